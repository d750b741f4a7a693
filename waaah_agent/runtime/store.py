"""Session state on disk: ``.waaah/sessions/<id>/`` with session.json, events.jsonl and a lock.

session.json is written atomically (temp file, fsync, rename), so a crash or a full disk
leaves the previous good copy in place; the temporary file is always a new one (``O_EXCL``,
never through a symlink). events.jsonl is append-only, one line per supervisor decision; a
FIFO or a symlink in its place is one line in the log and the session goes on. An exclusive
``flock`` makes sure two supervisors never drive one session (runtime/locks.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from waaah_agent.core.mcp.inbox_records import Mark
from waaah_agent.core.nesting import loads_json
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.session_fields import REQUIRED, drop_damaged, field_problem, kind, mark_of
from waaah_agent.errors import SessionBusy
from waaah_agent.runtime.locks import is_live
from waaah_agent.runtime.private import private_dir, trusted_session, untrusted
from waaah_agent.runtime.supervise.send_queue import SendQueue, newest, read_queue
from waaah_agent.safe_read import STATE_CAP, open_writable, read_capped, read_text, why

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
TAIL_LINES = 40


@dataclass
class SessionState:
    """Everything needed to report on a session and to resume it."""

    id: str
    agent: str
    workflow: str
    workspace: str
    native_session_id: str
    agent_id: str = ""
    server_url: str = ""
    argv: list[str] = field(default_factory=list)
    status: str = "starting"
    created: str = ""
    updated: str = ""
    exit_code: int | None = None
    restarts: int = 0
    workflow_delivered: bool = False
    workflow_pending: bool = False  # typed, not confirmed yet: settled from the transcript on resume
    limit_until: str = ""  # ISO time a usage limit resets; kept so a new supervisor waits too
    next_heartbeat: str = ""  # ISO time the next heartbeat prompt is due if the agent stays idle
    server_down: str = ""  # why the WAAAH server cannot be reached now ("" when it can)
    server_down_since: str = ""  # ISO time it went down
    paused: bool = False  # `waaah pause`: continue prompts and heartbeats held until `waaah unpause`
    # Prompts of `waaah send` not typed yet: kept in queue.jsonl beside session.json (runtime/
    # send_queue.py); only an older waaah's are saved here.
    queued: list[str] = field(default_factory=list)
    # How far the inbox's sends are taken, [ts, n] (runtime/send_queue.py); null: not known (an
    # older waaah's session: its inbox is history).
    inbox_mark: list[float] | None = None
    # The sum of ``token_files``: the totals of each transcript file the CLI wrote in this
    # session (a resumed conversation goes on in the same file; a new file adds its own).
    tokens: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0, "cached": 0})
    token_files: dict[str, dict[str, int]] = field(default_factory=dict)
    # The same per model ({path: {model: counts}}), what --max-cost prices.
    token_models: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    nudges: int = 0  # continue and heartbeat prompts typed
    first_prompt: str = ""  # the workflow's first line, what `waaah sessions` shows
    first_task: str = ""  # the first task the WAAAH server handed out (its id)
    ended: str = ""  # ISO time the supervisor last ended ("" while it runs)
    end_reason: str = ""  # why it ended (a StopReason value) and the detail
    # The options it was started with (never the API key), kept for --resume; see session.py.
    options: dict[str, Any] = field(default_factory=dict)
    # The CLI's release at the last start: version, standing, own_session_ids (runtime/releases.py).
    cli_release: dict[str, Any] = field(default_factory=dict)
    output_tail: list[str] = field(default_factory=list)
    log_path: str = ""
    cast_path: str = ""
    supervisor_pid: int = 0
    agent_pid: int = 0
    # The agent and what it started ({pid, start, boot, cmd}; start: /proc/<pid>/stat field 22),
    # recorded at the spawn and on a slow timer: after a SIGKILL of the supervisor, what is still
    # the same process is a leftover. ``leftovers``: found by a later supervisor of this session.
    processes: list[dict[str, Any]] = field(default_factory=list)
    leftovers: list[dict[str, Any]] = field(default_factory=list)
    schema: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> SessionState:
        """The state in ``data``, every field of its type (else ``ValueError`` naming the field)."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, found {kind(data)}")
        if data.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"unknown schema version {data.get('schema')!r}")
        for name in REQUIRED:
            if not isinstance(data.get(name), str) or not data[name]:
                raise ValueError(f"'{name}' must be a non-empty string")
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        values = drop_damaged(values)
        for name, value in values.items():
            problem = field_problem(name, value)
            if problem:
                raise ValueError(f"'{name}' {problem} (found {value!r:.60})")
        return cls(**values)


class CorruptSession(Exception):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def new_session_id(agent: str, now: datetime) -> str:
    return f"{agent}-{now.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def now_iso() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def event_ts(when: datetime | None = None) -> str:
    """An event's time: ISO-8601, local, with milliseconds and the UTC offset."""
    return (when or datetime.now()).astimezone().isoformat(timespec="milliseconds")


def event_time(value: Any) -> datetime | None:
    """The aware time of an event's ``ts``: an ISO string (written since the format changed; a
    time without an offset is taken as local) or epoch seconds (older files); None otherwise,
    and None for a time this machine cannot show as its local time (``9999-12-31T23:59:59-01:00``
    is in the year 10000 in UTC), which no reader could print."""
    try:
        if isinstance(value, str):
            when = datetime.fromisoformat(value)
            when = when if when.tzinfo is not None else when.astimezone()
            datetime.fromtimestamp(when.timestamp())  # a ValueError or OverflowError out of range
            return when
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return datetime.fromtimestamp(value).astimezone()
    except (ValueError, OverflowError, OSError):
        pass
    return None


def event_epoch(value: Any) -> float | None:
    """An event's ``ts`` as epoch seconds (see :func:`event_time`)."""
    when = event_time(value)
    return when.timestamp() if when is not None else None


def give_owner(fd: int, owner: tuple[int, int] | None) -> None:
    """A file written in a user's place keeps its owner (waaah run as root, e.g. with sudo -E)."""
    if owner is not None and owner != (os.geteuid(), os.getegid()):
        with contextlib.suppress(OSError):
            os.fchown(fd, *owner)


def atomic_write(path: Path, text: str, mode: int = 0o600, owner: tuple[int, int] | None = None) -> None:
    """Write ``text`` to ``path`` so that readers see the old or the new file, never half
    (``owner``: the uid and gid it keeps, where we may give it: a user's file edited as root)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = _create(tmp, mode)
        give_owner(fd, owner)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _create(tmp: Path, mode: int) -> int:
    """A new file at ``tmp`` (the temporary name beside the file written): whatever is there
    already, a file a killed process left or a symlink someone planted, is removed, never
    written through."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(tmp, flags, mode)
    except FileExistsError:
        tmp.unlink()  # the link itself, not what it points to
        return os.open(tmp, flags, mode)


class SessionDir:
    """One session's folder, held under an exclusive lock while open."""

    def __init__(self, root: Path, session_id: str, create: bool = True) -> None:
        self.path = root / session_id
        if create:
            private_dir(self.path)
        self.redact = Redactor()  # shapes; the run sets one that knows its environment's secrets
        self.state_file = self.path / "session.json"
        self.events_file = self.path / "events.jsonl"
        self.inbox = self.path / "inbox.jsonl"
        # The prompts of `waaah send` not typed yet, masked as session.json is.
        self.queue = SendQueue(self.path / "queue.jsonl", lambda text: self.redact(text), self._keep_mark)
        self._state: SessionState | None = None  # the state last saved: the queue's mark joins it
        self._lock_fd: int | None = None
        self._event_trouble = ""  # why events.jsonl cannot be written, said once
        # Told of every event after it is written (its record, secrets masked): the session keeps
        # its counters with it and, headless, prints the events a person reads.
        self.observers: list[Callable[[dict[str, Any]], None]] = []

    def lock(self) -> None:
        """Take the session's lock; an ``OSError`` (an :class:`UnsafeFile` for a symlink, a FIFO
        or a folder in its place, never followed nor waited on) when it cannot be taken."""
        fd = open_writable(self.path / "lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            os.close(fd)
            raise SessionBusy(
                f"session {self.path.name} is being supervised by another waaah process; "
                "stop that one first or start a new session without --resume"
            ) from err
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def load(self) -> SessionState:
        """The saved state; ``CorruptSession`` when it is not a session.json of the right shape
        (not a regular file, too big, not UTF-8 JSON, a field of the wrong type, another id)."""
        try:
            state = SessionState.from_json(loads_json(read_text(self.state_file, STATE_CAP, follow=False)))
        except FileNotFoundError:
            raise
        except (OSError, ValueError, TypeError) as err:
            raise CorruptSession(self.state_file, str(err)) from err
        if state.id != self.path.name:
            raise CorruptSession(self.state_file, f"'id' is {state.id!r}, not its folder's name")
        if not trusted_session(self.state_file):  # someone else's (or anyone's): never resumed
            raise CorruptSession(self.state_file, next(filter(None, map(untrusted, self._chain())), ""))
        self.queue.legacy = state.queued  # an older waaah kept them here
        state.queued = self.queue.texts()
        with contextlib.suppress(OSError):
            self.queue.mark = newest(mark_of(state.inbox_mark), read_queue(self.queue.path)[1])
        return state

    def _chain(self) -> tuple[Path, ...]:
        return (self.path.parent.parent, self.path.parent, self.path, self.state_file)

    def holder(self) -> str:
        """What the lock file says about the supervisor holding it (its pid), or ""."""
        try:
            return read_capped(self.path / "lock", 64, follow=False).decode("ascii", "replace").strip()
        except OSError:
            return ""

    def save(self, state: SessionState, strict: bool = False) -> bool:
        """Persist ``state``; on failure (disk full) keep the old file and return False (with
        ``strict``, raise the ``OSError``)."""
        state.updated = now_iso()
        if (mark := newest(mark_of(state.inbox_mark), self.queue.mark)) is not None:
            state.inbox_mark = list(mark)
        self._state = state
        data = state.to_json() | {"queued": list(self.queue.legacy)}  # the queue is a file of its own
        try:
            atomic_write(self.state_file, json.dumps(self.redact.value(data), indent=2) + "\n")
        except OSError as err:
            if strict:
                raise
            log.warning("could not save %s (the previous copy is kept): %s", self.state_file, err)
            return False
        return True

    def _keep_mark(self, mark: Mark) -> bool:
        """The queue's mark saved in session.json, before the queue file is emptied."""
        return self._state is not None and self.save(self._state)

    def event(self, name: str, /, **fields: Any) -> None:
        record = {"ts": event_ts(), "event": name, **fields}
        line = self.redact(json.dumps(record, default=str))
        try:  # one write of bytes: a burst of events costs no file object each
            fd = open_writable(self.events_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                data = memoryview((line + "\n").encode("utf-8", "replace"))
                while data:
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)
            self._event_trouble = ""
        except OSError as err:
            trouble = why(err)
            if trouble != self._event_trouble:  # once, not for every event that follows
                self._event_trouble = trouble
                log.warning("could not append to %s (%s); the session goes on", self.events_file, trouble)
        if self.observers:
            try:
                masked = json.loads(line)
            except ValueError:  # a mask that cut a JSON escape: the fields, masked one by one
                masked = cast(dict[str, Any], self.redact.value(json.loads(json.dumps(record, default=str))))
            for observer in self.observers:
                observer(masked)

    def move_aside(self) -> Path:
        """Keep a corrupt session.json for inspection, out of the way of a fresh one."""
        target = self.state_file.with_name(f"session.json.corrupt-{int(time.time())}")
        os.replace(self.state_file, target)
        return target


def set_aside(session: SessionDir, err: CorruptSession) -> None:
    """One warning for a session.json of the wrong shape, and the file moved aside."""
    if is_live(session.path):
        log.warning(
            "session file %s is unreadable (%s); its supervisor writes it again",
            session.state_file,
            err.reason,
        )
        return
    try:
        where = f"moved it to {session.move_aside()}"
    except OSError as failed:
        where = f"it could not be moved aside ({why(failed)})"
    log.warning("session file %s is unreadable (%s); %s", session.state_file, err.reason, where)


class SessionStore:
    """``<workspace>/.waaah/sessions``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def open(self, session_id: str) -> SessionDir:
        return SessionDir(self.root, session_id)

    def newest(self, agent: str | None) -> str | None:
        """The most recently updated session (of ``agent``, if given) in this workspace."""
        best: tuple[float, str] | None = None
        if not self.root.is_dir():
            return None
        for state_file in self.root.glob("*/session.json"):
            if not trusted_session(state_file):
                continue  # someone else's: never a candidate
            try:
                data = loads_json(read_text(state_file, STATE_CAP, follow=False))
            except (OSError, ValueError):
                data = {}  # corrupt: still a candidate, so the user hears about it
            found = data.get("agent", agent) if isinstance(data, dict) else agent
            if not isinstance(found, str):
                found = agent  # corrupt too (an agent of another type): a candidate
            if agent is not None and found != agent:
                continue
            try:
                key = (state_file.lstat().st_mtime, state_file.parent.name)
            except OSError:
                continue
            if best is None or key > best:
                best = key
        return best[1] if best else None

    def all_states(self) -> list[SessionState]:
        """The state of every session here; a session.json of the wrong shape is one warning
        naming it, and is moved aside (``session.json.corrupt-<time>``) unless a supervisor holds
        the session (it writes the file again at its next save)."""
        states = []
        for state_file in sorted(self.root.glob("*/session.json")):
            if not trusted_session(state_file):
                continue
            session = self.open_existing(state_file.parent.name)
            try:
                states.append(session.load())
            except CorruptSession as err:
                set_aside(session, err)
            except OSError:
                continue
        return states

    def open_existing(self, session_id: str) -> SessionDir:
        """A session folder that is there already (nothing is created)."""
        return SessionDir(self.root, session_id, create=False)
