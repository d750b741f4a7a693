"""Signals reach the loop as bytes on a pipe: the handlers themselves do nothing."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterator

from waaah_agent.core.supervise.events import CTRL_C

WATCHED_SIGNALS = (signal.SIGWINCH, signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGCHLD)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _ignore_in_handler(signum: int, frame: object) -> None:
    """The wake-up fd carries the signal number to the loop; the handler does nothing."""


_active: list[int] = []  # the read end of the pipe in place, when there is one


@contextlib.contextmanager
def signal_pipe() -> Iterator[int]:
    """Route the watched signals to a pipe (yielded: its read end); restore everything after.

    Nested uses share the outer pipe: the session holds one for its whole life, so a signal
    that comes between two runs of the agent (or while one starts) waits there for the loop
    or the restart wait instead of killing the supervisor unsaved.
    """
    if _active:
        yield _active[-1]
        return
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    old_wakeup = signal.set_wakeup_fd(wake_w)
    old_handlers = {s: signal.signal(s, _ignore_in_handler) for s in WATCHED_SIGNALS}
    _active.append(wake_r)
    try:
        yield wake_r
    finally:
        _active.pop()
        signal.set_wakeup_fd(old_wakeup)
        for signum, handler in old_handlers.items():
            signal.signal(signum, handler)
        os.close(wake_r)
        os.close(wake_w)


def stop_signal_in(raw: bytes) -> str | None:
    """The name of the first stop signal among the signal numbers in ``raw``."""
    for signum in raw:
        if signum in STOP_SIGNALS:
            return signal.Signals(signum).name
    return None


def wait_interruptibly(seconds: float, stdin_fd: int | None) -> str | None:
    """Sleep ``seconds`` unless a stop signal or Ctrl+C comes first; return what came."""
    deadline = time.monotonic() + seconds
    with signal_pipe() as wake_r:
        fds = [wake_r] if stdin_fd is None else [wake_r, stdin_fd]
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(fds, [], [], left)
            if wake_r in ready and (name := stop_signal_in(os.read(wake_r, 512))):
                return f"received {name}"
            if stdin_fd is not None and stdin_fd in ready:
                keys = os.read(stdin_fd, 1024)
                if not keys:
                    return "the terminal closed"
                if any(seq in keys for seq in CTRL_C):
                    return "Ctrl+C"
    return None


@contextlib.contextmanager
def stop_signals_unwind() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt here (the default would end the process with
    no ``finally`` run); the handlers before are restored at the end."""

    def unwind(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    before = {sig: signal.signal(sig, unwind) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
