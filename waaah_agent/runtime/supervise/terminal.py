"""The user's terminal: raw mode that is always restored, and its size."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import struct
import termios
import threading
import time
import tty
from collections import deque
from collections.abc import Iterator

from waaah_agent.runtime.supervise.signals import stop_signal_in

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


# Stop reading the agent while this much waits for the terminal (the back-pressure a real
# terminal applies); the writer wakes the loop once less than that waits.
HIGH_WATER = 1024 * 1024
WRITE_AT_MOST = 64 * 1024  # queued output the writer hands to one write (joined: one syscall)
DRAIN_PIECE = 4096  # ... and at the end, when each piece the terminal takes shows it is alive


class TerminalOut:
    """Writes to the user's terminal that never freeze the loop, in the order they were made.

    While nothing waits, output is written at once, non-blocking (a key's echo, a trickle: no
    hand-over to add latency). What the terminal does not take at once (a flood it reads slower
    than the agent writes, XOFF, a paused reader) is queued for a writer thread that writes it
    blocking: the kernel hands the terminal each piece as it takes it, where a non-blocking
    writer pays a wake-up and a syscall for every few KB it drains (~0.3 s of CPU per 100 MB).
    Meanwhile the loop goes on: signals, timers and the inbox are served, the record is made,
    and the agent is slowed down by not reading its PTY once HIGH_WATER waits.

    The terminal is opened again for this (twice: non-blocking for the loop, blocking for the
    writer), so O_NONBLOCK lands on our own open file description, never on the one stdin (and
    the shell after us) shares. A writer left blocked by a stalled terminal when its run ended
    (``drain`` gives up) keeps its place: the kernel lets one write to a terminal at a time, so
    the next run's output (non-blocking: EAGAIN, then its own writer) comes after that piece.
    """

    def __init__(self, fd: int) -> None:
        try:
            self._path: str | None = os.ttyname(fd)
            self.fd = os.open(self._path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
            self._owned = True
        except OSError:  # no tty name: the writer writes to ``fd`` as it is, and all of it
            self.fd, self._owned, self._path = fd, False, None
        self._cond = threading.Condition()
        self._queue: deque[bytes | memoryview] = deque()
        self.pending = 0  # bytes given to write and not yet taken by the terminal
        self._error: OSError | None = None
        self._closed = self._writer_done = False
        self._notify_each = False  # while draining: small pieces, and a wake-up for each
        self._wake_r, self._wake_w = os.pipe()
        for end in (self._wake_r, self._wake_w):
            os.set_blocking(end, False)
        self._thread: threading.Thread | None = None

    @property
    def wake_fd(self) -> int:
        """Readable when the writer drained below HIGH_WATER or failed (and, draining, on each piece)."""
        return self._wake_r

    def write(self, data: bytes) -> None:
        """Write ``data`` now as far as the terminal takes it; queue the rest, in order.
        Raises OSError once the terminal is gone."""
        if self._error is not None:
            raise self._error
        if not data:
            return
        rest: bytes | memoryview = data
        if not self.pending and self._owned:  # nothing before it in flight
            try:
                sent = os.write(self.fd, data)
            except BlockingIOError:
                sent = 0
            if sent == len(data):
                return
            rest = memoryview(data)[sent:]  # the rest, not a copy of it
        with self._cond:
            self._queue.append(rest)
            self.pending += len(rest)
            self._cond.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._writer, name="terminal-writer", daemon=True)
            self._thread.start()

    def flush(self) -> None:
        """Take the writer's news (the wake pipe). Raises OSError once the terminal is gone."""
        self._read_news()
        if self._error is not None:
            raise self._error

    def _read_news(self) -> None:
        with contextlib.suppress(OSError):  # nothing there (non-blocking): no news
            os.read(self._wake_r, 4096)

    def _writer(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())  # the loop's to handle
        fd = -1
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_NOCTTY) if self._path else self.fd
            while (piece := self._next_piece()) is not None:
                view, sent = memoryview(piece), 0
                while sent < len(view) and not self._closed:  # closed: dropped after this write
                    step = DRAIN_PIECE if self._notify_each else WRITE_AT_MOST
                    n = os.write(fd, view[sent : sent + step])
                    sent += n
                    self._taken(n)
        except OSError as err:
            with self._cond:
                self._error, self.pending = err, 0
                self._queue.clear()
            self._wake()
        finally:
            if self._path and fd >= 0:
                os.close(fd)
            with self._cond:
                self._writer_done = True
                if self._closed:  # close() left the wake pipe to us: the loop is gone
                    self._close_pipe()

    def _next_piece(self) -> bytes | memoryview | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            parts: list[bytes | memoryview] = []
            size = 0
            while self._queue and (not parts or size < WRITE_AT_MOST):  # one syscall for many
                parts.append(self._queue.popleft())
                size += len(parts[-1])
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _taken(self, n: int) -> None:
        with self._cond:
            before = self.pending
            self.pending = max(0, before - n)
            crossed = before >= HIGH_WATER > self.pending
        if crossed or self._notify_each:
            self._wake()

    def _wake(self) -> None:
        with self._cond:
            if not self._closed:
                with contextlib.suppress(OSError):  # full: the loop has news to read already
                    os.write(self._wake_w, b".")

    def _close_pipe(self) -> None:
        for end in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(end)

    def drain(self, wake_fd: int, stalled_after: float = 1.0) -> None:
        """At the end, let the terminal take what is queued (the agent's last words) at its pace.

        A terminal that takes nothing for ``stalled_after`` seconds (paused, gone) is given up
        on; so is the rest when a stop signal arrives on ``wake_fd`` meanwhile.
        """
        self._notify_each = True
        give_up = time.monotonic() + stalled_after
        while self.pending and self._error is None:
            before = self.pending
            ready, _, _ = select.select([wake_fd, self._wake_r], [], [], max(0.0, give_up - time.monotonic()))
            if wake_fd in ready and stop_signal_in(os.read(wake_fd, 512)):
                return
            if self._wake_r in ready:
                self._read_news()
            now = time.monotonic()
            if self.pending < before:
                give_up = now + stalled_after
            elif now >= give_up:
                return

    def close(self) -> None:
        """Drop what the terminal did not take. A writer still in a write (a stalled terminal)
        ends when that write returns."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify()
            if self._thread is None or self._writer_done:
                self._close_pipe()
        if self._owned:
            with contextlib.suppress(OSError):
                os.close(self.fd)
