"""The user's terminal: raw mode that is always restored, and its size."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import termios
import time
import tty
from collections.abc import Iterator

from waaah_agent.runtime.supervise.signals import stop_signal_in
from waaah_agent.runtime.supervise.writeq import WriteQueue

DEFAULT_SIZE = (120, 40)  # cols, rows when there is no terminal to copy


def terminal_size(fd: int) -> tuple[int, int] | None:
    """(cols, rows) of the terminal on ``fd``; None if it is not a usable terminal."""
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:
        return None
    # A 0x0 or 1-row "terminal" (some CI runners, detached panes) is no size at all.
    if cols < 2 or rows < 2:
        return None
    return cols, rows


@contextlib.contextmanager
def raw_mode(fd: int) -> Iterator[None]:
    """Put the terminal on ``fd`` in raw mode; restore it on every exit path.

    Only the line discipline changes: stdin stays blocking, because it shares its open
    file description with stdout and a non-blocking stdout makes our writes fail.
    """
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSANOW)
        yield
    finally:
        with contextlib.suppress(termios.error):
            # TCSANOW: TCSADRAIN/TCSAFLUSH would wait for a stalled terminal to take our output.
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def is_interactive(stdin_fd: int, stdout_fd: int) -> bool:
    return os.isatty(stdin_fd) and os.isatty(stdout_fd)


class TerminalOut:
    """Non-blocking writes to the user's terminal, with a queue.

    A stalled terminal (XOFF, a paused reader) must not freeze the loop: signals, timers and
    the inbox keep being served, and the agent is slowed down by not reading its PTY (the
    back-pressure a real terminal applies) instead. The terminal is opened a second time for
    this, so O_NONBLOCK lands on our own open file description, never on the one stdin (and
    the shell after us) shares.
    """

    def __init__(self, fd: int) -> None:
        try:
            self.fd = os.open(os.ttyname(fd), os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
            self._owned = True
        except OSError:
            self.fd, self._owned = fd, False  # no tty name: fall back to blocking writes
        self._queue = WriteQueue()

    @property
    def pending(self) -> int:
        return self._queue.pending

    def write(self, data: bytes) -> None:
        """Write ``data`` now as far as the terminal takes it; queue the rest, in order."""
        self._queue.add(data)
        self.flush()

    def flush(self) -> None:
        """Write what the terminal takes now. Raises OSError if the terminal is gone."""
        self._queue.write_to(self.fd)

    def drain(self, wake_fd: int, stalled_after: float = 1.0) -> None:
        """At the end, let the terminal take what is queued (the agent's last words) at its pace.

        A terminal that takes nothing for ``stalled_after`` seconds (paused, gone) is given up
        on; so is the rest when a stop signal arrives on ``wake_fd`` meanwhile.
        """
        give_up = time.monotonic() + stalled_after
        while self.pending:
            before = self.pending
            try:
                self.flush()
            except OSError:
                return
            now = time.monotonic()
            if self.pending < before:
                give_up = now + stalled_after
            if not self.pending or now >= give_up:
                return
            ready, _, _ = select.select([wake_fd], [self.fd], [], give_up - now)
            if wake_fd in ready and stop_signal_in(os.read(wake_fd, 512)):
                return

    def close(self) -> None:
        if self._owned:
            with contextlib.suppress(OSError):
                os.close(self.fd)
