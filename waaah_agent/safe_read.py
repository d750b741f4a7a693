"""Reading a file that anyone may have replaced: never block, never read without a cap.

Every file waaah reads (session.json, run logs, breakers, workflows, context files) may
be huge, endless, a FIFO, a device, a directory or a symlink. :func:`read_capped` opens it
without blocking (``O_NONBLOCK``; ``O_NOFOLLOW`` where a symlink is not expected), checks
that it is a regular file (``fstat``), refuses one over the cap (or keeps its head), and reads
at most the cap. Its errors are :class:`UnsafeFile`, an ``OSError``, so callers that already
handle a missing or unreadable file handle these too. :func:`open_writable` is the same for a
file waaah writes in place (events.jsonl, a lock): never through a symlink, never a wait on a FIFO.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

#: session.json, a breaker's file: a few KB normally.
STATE_CAP = 1024 * 1024
#: A workflow file (typed into the agent).
WORKFLOW_CAP = 1024 * 1024
#: A run log (.waaah/runs/<day>/<id>.jsonl), read for summaries.
RUN_LOG_CAP = 64 * 1024 * 1024


class UnsafeFile(OSError):
    """A file we will not read: not a regular file, a symlink where none belongs, too big."""

    def __init__(self, path: Path, reason: str, code: int = errno.EINVAL) -> None:
        super().__init__(code, reason, str(path))
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.filename}: {self.reason}"


def why(err: BaseException) -> str:
    """What went wrong with a path, in a few words: an :class:`UnsafeFile`'s reason, an
    ``OSError``'s strerror ("No such file or directory"), else the error's text (a ValueError
    of a NUL byte in a name)."""
    return str(getattr(err, "reason", None) or getattr(err, "strerror", None) or err)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def open_regular(path: Path, *, follow: bool = True) -> int:
    """A read-only descriptor of the regular file ``path`` (the caller closes it)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP and not follow:
            raise UnsafeFile(path, "is a symlink (not followed here)", errno.ELOOP) from None
        raise
    return _regular(fd, path)


def _regular(fd: int, path: Path) -> int:
    """``fd`` when it is a regular file's; else closed, and an :class:`UnsafeFile`."""
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFile(path, f"is {_kind(mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_writable(path: Path, flags: int, mode: int = 0o600) -> int:
    """A descriptor to write the regular file ``path`` (``flags``: e.g. ``O_WRONLY | O_APPEND |
    O_CREAT``), never through a symlink nor waiting on a FIFO: anything else there is an
    :class:`UnsafeFile` (the caller closes the descriptor)."""
    flags |= os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnsafeFile(path, "is a symlink (not followed here)", errno.ELOOP) from None
        if err.errno == errno.ENXIO:  # a FIFO with no reader (or a device) opened to write
            try:
                kind = _kind(os.lstat(path).st_mode)
            except OSError:
                kind = "not a regular file"
            raise UnsafeFile(path, f"is {kind}, not a regular file", errno.ENXIO) from None
        raise
    return _regular(fd, path)


def read_capped(path: Path, cap: int, *, follow: bool = True, head: bool = False) -> bytes:
    """The bytes of the regular file ``path``; a file over ``cap`` bytes is refused
    (:class:`UnsafeFile`), or with ``head`` its first ``cap`` bytes are returned."""
    data, _ = read_head(path, cap, follow=follow, refuse_more=not head)
    return data


def read_head(path: Path, cap: int, *, follow: bool = True, refuse_more: bool = False) -> tuple[bytes, int]:
    """The first ``cap`` bytes of ``path`` and its size (what fstat said, or what was read)."""
    fd = open_regular(path, follow=follow)
    try:
        size = os.fstat(fd).st_size
        if refuse_more and size > cap:
            raise UnsafeFile(
                path, f"is {size:,} bytes, more than the {cap:,} this file may have", errno.EFBIG
            )
        chunks: list[bytes] = []
        left = cap + 1  # one more: a file that grew past the cap since fstat is caught too
        while left > 0:
            try:
                chunk = os.read(fd, min(left, 1024 * 1024))
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > cap:
        if refuse_more:
            raise UnsafeFile(path, f"grew past the {cap:,} bytes this file may have", errno.EFBIG)
        data = data[:cap]
    return data, max(size, len(data))


def read_text(path: Path, cap: int, *, follow: bool = True) -> str:
    """:func:`read_capped` decoded as UTF-8 (strict: a ``UnicodeDecodeError`` is a ``ValueError``)."""
    return read_capped(path, cap, follow=follow).decode("utf-8")


def read_tail(path: Path, cap: int, *, follow: bool = True) -> bytes:
    """The last ``cap`` bytes of the regular file ``path`` (for the tail of an append-only log)."""
    fd = open_regular(path, follow=follow)
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - cap), os.SEEK_SET)
        chunks: list[bytes] = []
        left = cap
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
