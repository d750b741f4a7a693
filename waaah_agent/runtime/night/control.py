"""`waaah send|pause|resume|stop|tail|attach`: a running session, from another shell.

Commands go into the session's inbox (``.waaah/sessions/<id>/inbox.jsonl``), which the
supervisor already watches for its MCP proxy and the CLI's hooks: one JSON line each, appended
in one write (O_APPEND), never through a symlink. The inbox and its folder are the user's own
(0600 in 0700), so only that user can append; a session folder owned by someone else is
refused. The supervisor decides what a command does (core/machine.py): a prompt is typed with
the verified delivery once the agent is ready, never over a draft or into a turn at work.
``tail`` follows the session's text log, ``attach`` its raw screen record (read-only).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from waaah_agent.core.mcp.inbox_records import MAX_PROMPT, ControlCommand, ControlRecord, queue_full
from waaah_agent.core.nesting import loads_json
from waaah_agent.errors import SessionNotFound, StorageError, UsageError
from waaah_agent.runtime.locks import is_live
from waaah_agent.runtime.store import SessionState, SessionStore
from waaah_agent.runtime.workspace import git_root
from waaah_agent.safe_read import open_regular, why

#: How much of the log's end `waaah tail` reads for its first lines.
TAIL_BYTES = 256 * 1024
#: The longest line of a screen record `waaah attach` waits to see the end of.
CAST_LINE_CAP = 16 * 1024 * 1024


def running(folder: Path, session: str | None) -> tuple[Path, SessionState]:
    """The session folder and state of the running session (the one named, else the only one)."""
    start = folder.resolve()
    workspace = git_root(start) or start
    store = SessionStore(workspace / ".waaah" / "sessions")
    states = store.all_states()
    if session:
        states = [s for s in states if s.id == session] or [s for s in states if s.id.startswith(session)]
    live = [s for s in states if is_live(store.root / s.id)]
    if not live:
        what = f"no running session named {session!r}" if session else "no running session"
        raise SessionNotFound(f"{what} in {workspace}; start one with: waaah agent --start=gemini")
    if len(live) > 1:
        names = ", ".join(s.id for s in live)
        raise UsageError(
            f"{len(live)} sessions run in {workspace} ({names}): name one, e.g. --session {live[0].id}"
        )
    return store.root / live[0].id, live[0]


def tell(folder: Path, record: ControlRecord) -> None:
    """Append ``record`` to the session's inbox in one write: all of it, or a
    :class:`~waaah_agent.errors.StorageError` (what a failed write left is taken back)."""
    if folder.stat().st_uid != os.getuid():
        raise UsageError(f"{folder} belongs to another user: only its owner can control that session")
    line = (json.dumps(record.to_json(), ensure_ascii=False) + "\n").encode()
    path = folder / "inbox.jsonl"
    try:  # never blocks on a FIFO, never follows a symlink
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError as err:
        raise UsageError(f"cannot write to {path}: {_why_not(err)}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(f"cannot write to {path}: it is not a regular file; move it away")
        written = _write(fd, line, path)
    finally:
        os.close(fd)
    if written != len(line):
        raise StorageError(
            f"only {written:,} of {len(line):,} bytes could be written to {path} (is the disk full?): not queued"
        )


def _write(fd: int, line: bytes, path: Path) -> int:
    """Bytes of ``line`` written at the inbox's end; a short write is cut off again (unless
    another writer appended after it: the reader then keeps that writer's whole line)."""
    try:
        written = os.write(fd, line)
    except OSError as err:
        raise StorageError(f"cannot write to {path}: {err.strerror}: not queued") from None
    if written != len(line):
        with contextlib.suppress(OSError):
            end = os.lseek(fd, 0, os.SEEK_CUR)
            if os.fstat(fd).st_size == end:
                os.ftruncate(fd, end - written)
    return written


def _why_not(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "it is a symlink; move it away"
    if err.errno == errno.ENXIO:
        return "it is a FIFO, not a regular file; move it away"
    return err.strerror or str(err)


def send_prompt(folder: Path, text: str, queued: list[str] | None = None) -> None:
    """Queue ``text`` for the session in ``folder``; ``queued``: the prompts waiting already."""
    if not text.strip():
        raise UsageError("the prompt is empty")
    if "\x00" in text:
        raise UsageError("the prompt holds a NUL byte, which no CLI can be given")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise UsageError(f"the prompt is not UTF-8 text (character {err.start + 1})") from None
    if len(text) > MAX_PROMPT:
        raise UsageError(
            f"the prompt is longer than {MAX_PROMPT:,} characters; put it in a file the agent can read"
        )
    waiting = queued or []
    full = queue_full(len(waiting), sum(map(len, waiting)), len(text))
    if full:
        raise UsageError(f"not queued: {full}; send it once some are typed (waaah tail -f shows them)")
    tell(folder, ControlRecord(time.time(), ControlCommand.SEND, text))


def read_prompt(stream: IO[bytes]) -> str:
    """The prompt on stdin: UTF-8 text (else one line saying where it is not), read no further
    than a prompt may be long."""
    raw = stream.read(4 * MAX_PROMPT + 1)  # a character is at most 4 bytes
    if len(raw) > 4 * MAX_PROMPT:
        raise UsageError(
            f"the prompt is longer than {MAX_PROMPT:,} characters; put it in a file the agent can read"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"the prompt on stdin is not UTF-8 text (byte {err.start}); convert it first, e.g. with iconv"
        ) from None


def session_live(folder: Path) -> bool:
    """Whether a supervisor still holds the session in ``folder``."""
    return is_live(folder)


def wait_until_stopped(folder: Path, seconds: float, sleep: Callable[[float], None] = time.sleep) -> bool:
    """True once the supervisor let go of the session (its lock), within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not is_live(folder):
            return True
        sleep(0.2)
    return not is_live(folder)


def follow(
    path: Path,
    out: IO[bytes],
    lines: int,
    keep_going: Callable[[], bool],
    cast: bool = False,
    live: Callable[[], bool] = lambda: True,
) -> bool:
    """Print a growing file: its last ``lines`` lines, then what is added, until ``keep_going``
    says no or the session ends (``live``: then what it wrote last is printed, and True returned).

    ``cast``: the file is an asciicast; what is printed is the output of its ``"o"`` events
    added from now on (an earlier screen is no use to a screen drawn over)."""
    fh = _open(path)
    try:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(size if cast else max(0, size - TAIL_BYTES))
        if not cast:
            tail = fh.read(TAIL_BYTES).split(b"\n")
            out.write(b"\n".join(tail[-lines - 1 :]))
            out.flush()
        pending = b""
        ended = False
        while keep_going():
            chunk = fh.read(1 << 16)
            if not chunk:
                if ended:
                    return True
                try:
                    rolled = os.stat(path).st_ino != os.fstat(fh.fileno()).st_ino
                except FileNotFoundError:
                    return False  # the session's log is gone (pruned)
                if rolled:  # rolled over into a compressed part: the new live file, from its start
                    fh.close()
                    fh = _open(path)
                    continue
                ended = not live()  # once more: what it wrote before it let go
                if not ended:
                    time.sleep(0.2)
                continue
            if not cast:
                out.write(chunk)
                out.flush()
                continue
            pending += chunk
            *complete, pending = pending.split(b"\n")
            if len(pending) > CAST_LINE_CAP:  # no event is that long: dropped (its end is no JSON)
                pending = b""
            for line in complete:
                try:
                    event = loads_json(line)
                except ValueError:
                    continue
                if (
                    isinstance(event, list)
                    and len(event) == 3
                    and event[1] == "o"
                    and isinstance(event[2], str)
                ):
                    out.write(event[2].encode("utf-8", "replace"))
            out.flush()
    finally:
        fh.close()
    return False


def _open(path: Path) -> IO[bytes]:
    """``path`` to read, if it is a regular file: a FIFO or a device there (``/dev/zero``) is
    one line, never a wait nor an endless read."""
    try:
        return os.fdopen(open_regular(path), "rb")
    except OSError as err:
        raise UsageError(f"cannot read {path}: {why(err)}") from None


def stdout_bytes() -> IO[bytes]:
    return sys.stdout.buffer
