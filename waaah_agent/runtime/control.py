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

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from waaah_agent.core.inbox_records import MAX_PROMPT, ControlCommand, ControlRecord
from waaah_agent.core.nesting import loads_json
from waaah_agent.errors import SessionNotFound, UsageError
from waaah_agent.runtime.report import is_live
from waaah_agent.runtime.store import SessionState, SessionStore
from waaah_agent.runtime.workspace import git_root


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
    """Append ``record`` to the session's inbox in one write."""
    if folder.stat().st_uid != os.getuid():
        raise UsageError(f"{folder} belongs to another user: only its owner can control that session")
    line = (json.dumps(record.to_json(), ensure_ascii=False) + "\n").encode()
    try:
        fd = os.open(folder / "inbox.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as err:
        raise UsageError(f"cannot write to {folder / 'inbox.jsonl'}: {err.strerror}") from None
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def send_prompt(folder: Path, text: str) -> None:
    if not text.strip():
        raise UsageError("the prompt is empty")
    if "\x00" in text:
        raise UsageError("the prompt holds a NUL byte, which no CLI can be given")
    if len(text) > MAX_PROMPT:
        raise UsageError(
            f"the prompt is longer than {MAX_PROMPT:,} characters; put it in a file the agent can read"
        )
    tell(folder, ControlRecord(time.time(), ControlCommand.SEND, text))


def wait_until_stopped(folder: Path, seconds: float, sleep: Callable[[float], None] = time.sleep) -> bool:
    """True once the supervisor let go of the session (its lock), within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not is_live(folder):
            return True
        sleep(0.2)
    return not is_live(folder)


def follow(
    path: Path, out: IO[bytes], lines: int, keep_going: Callable[[], bool], cast: bool = False
) -> None:
    """Print a growing file: its last ``lines`` lines, then what is added.

    ``cast``: the file is an asciicast; what is printed is the output of its ``"o"`` events
    added from now on (an earlier screen is no use to a screen drawn over)."""
    try:
        fh = path.open("rb")
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None
    try:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(size if cast else max(0, size - 256 * 1024))
        if not cast:
            tail = fh.read().split(b"\n")
            out.write(b"\n".join(tail[-lines - 1 :]))
            out.flush()
        pending = b""
        while keep_going():
            chunk = fh.read(1 << 16)
            if not chunk:
                try:
                    rolled = os.stat(path).st_ino != os.fstat(fh.fileno()).st_ino
                except FileNotFoundError:
                    return  # the session's log is gone (pruned)
                if rolled:  # rolled over into a compressed part: the new live file, from its start
                    fh.close()
                    fh = path.open("rb")
                time.sleep(0.2)
                continue
            if not cast:
                out.write(chunk)
                out.flush()
                continue
            pending += chunk
            *complete, pending = pending.split(b"\n")
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


def stdout_bytes() -> IO[bytes]:
    return sys.stdout.buffer
