"""The user's terminal: raw mode that is always restored, and its size."""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import termios
import tty
from collections.abc import Iterator

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
            termios.tcsetattr(fd, termios.TCSAFLUSH, saved)


def is_interactive(stdin_fd: int, stdout_fd: int) -> bool:
    return os.isatty(stdin_fd) and os.isatty(stdout_fd)
