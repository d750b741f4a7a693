"""A CLI's own session files kept before every native resume, and put back when the CLI removed
or emptied them (core/kept_sessions.py decides; docs/architecture.md "Sessions and resume").

The copies live in the session's own folder (``kept/``, private), one per file, replaced at each
resume; what is set aside (a file of the session holding no conversation, or the CLI's emptied
version of one put back) goes to ``kept/set-aside/``, never deleted. Every read is capped and
refuses what is not a regular file; a copy that cannot be made or put back is one line in the
log and the run goes on: losing the copy never costs the session.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from waaah_agent.adapters.base import Adapter
from waaah_agent.core.kept_sessions import FileSeen, Plan, decide
from waaah_agent.safe_read import open_regular, why

#: A session file larger than this is not copied (said once in the log).
KEEP_CAP = 512 * 1024 * 1024
#: How much of a file is read to tell whether it holds a conversation.
READ_CAP = 64 * 1024 * 1024
_CHUNK = 1024 * 1024


@dataclass
class SessionKeeper:
    """The session files of one native resume: ``before()`` it, ``after()`` the run."""

    adapter: Adapter
    env: Mapping[str, str]
    workspace: Path
    session_id: str
    folder: Path  # <session dir>/kept
    note: Callable[[str], None]  # a line for the log
    event: Callable[..., None]  # an event for events.jsonl
    kept: dict[str, FileSeen] = field(default_factory=dict)

    def files(self) -> list[Path]:
        finder = self.adapter.session_files
        if finder is None or not self.session_id:
            return []
        try:
            return finder(self.env, self.workspace, self.session_id)
        except OSError as err:
            self.note(f"could not list {self.adapter.name}'s session files: {why(err)}")
            return []

    def seen(self) -> dict[str, FileSeen]:
        out = {}
        for path in self.files():
            with contextlib.suppress(OSError):
                out[str(path)] = FileSeen(path.stat().st_size, self._holds(path))
        return out

    def before(self) -> None:
        """Set aside what would cost the conversation at this start, then copy every file."""
        self._carry_out(decide({}, self.seen()), "before the resume")
        self.kept = {}
        for name, seen in self.seen().items():
            if seen.size > KEEP_CAP:
                self.note(f"{name} is over {KEEP_CAP >> 20} MB: not copied before the resume")
                continue
            try:
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                copy_file(Path(name), self.folder / Path(name).name)
            except OSError as err:
                self.note(f"could not keep a copy of {name} before the resume: {why(err)}")
                continue
            self.kept[name] = seen
        if self.kept:
            self.event("session-kept", files=sorted(self.kept))

    def after(self) -> Plan:
        """Put back what the CLI removed or emptied; set aside what would cost it later."""
        plan = decide(self.kept, self.seen())
        self._carry_out(plan, "after the run")
        return plan

    def _carry_out(self, plan: Plan, when: str) -> None:
        cli = self.adapter.name
        for name, reason in plan.restore:
            path = Path(name)
            try:
                if path.exists():
                    set_aside(path, self.folder / "set-aside")
                copy_file(self.folder / path.name, path)
            except OSError as err:
                self.note(
                    f"{cli} {reason} its session file {name}; putting the kept copy back failed: {why(err)}"
                )
                self.event("session-restored", file=name, why=reason, ok=False, error=why(err))
                continue
            self.note(
                f"{cli} {reason} its session file {name} ({when}): put back the copy kept before the resume"
            )
            self.event("session-restored", file=name, why=reason, ok=True, when=when)
        for name, reason in plan.set_aside:
            try:
                where = set_aside(Path(name), self.folder / "set-aside")
            except OSError as err:
                self.note(f"could not set aside {name} ({reason}): {why(err)}")
                continue
            self.note(
                f"set aside {name} ({when}): it {reason}, and {cli} would remove the whole session "
                f"at its next start because of it; kept in {where}"
            )
            self.event("session-set-aside", file=name, why=reason, to=str(where), when=when)

    def _holds(self, path: Path) -> bool | None:
        try:
            return self.adapter.holds_conversation(_lines(path))
        except (OSError, ValueError):
            return None


def _lines(path: Path) -> Iterator[str]:
    """The lines of the first READ_CAP bytes (a regular file only)."""
    with os.fdopen(open_regular(path), "rb") as fh:
        data = fh.read(READ_CAP)
    for line in data.splitlines():
        yield line.decode("utf-8", "replace")


def copy_file(source: Path, target: Path) -> None:
    """Copy the regular file ``source`` to ``target`` atomically (a temporary file beside the
    target, synced, then renamed over it), private to the user."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with os.fdopen(open_regular(source), "rb") as src:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                while chunk := src.read(_CHUNK):
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def set_aside(path: Path, folder: Path) -> Path:
    """Move ``path`` into ``folder`` under a name of its own (a copy, then the original removed,
    when the two are on different file systems); returns where it went."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = folder / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}"
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}-{n}"
    try:
        os.rename(path, target)
    except OSError as err:
        if err.errno != 18:  # EXDEV: another file system
            raise
        copy_file(path, target)
        path.unlink()
    return target


def keeper_for(
    adapter: Adapter,
    env: Mapping[str, str],
    workspace: Path,
    session_id: str,
    folder: Path,
    note: Callable[[str], None],
    event: Callable[..., Any],
) -> SessionKeeper | None:
    """A keeper for a native resume of ``adapter`` (None: the CLI keeps no files per session)."""
    if adapter.session_files is None:
        return None
    keeper = SessionKeeper(adapter, env, workspace, session_id, folder, note, event)
    keeper.before()
    return keeper
