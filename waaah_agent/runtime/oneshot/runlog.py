"""`waaah run`'s per-run JSONL logs: written as the run goes, read back record by record.

A run log is ``<workspace>/.waaah/runs/<YYYY-MM-DD>/<log id>.jsonl``; the log id is the CLI
session id the run started with, or an id of ours for CLIs that pick their own session ids (codex,
opencode). ``--session ID`` (the log id or a CLI session id in it) appends to that log.
``WAAAH_LOG_DIR`` puts the ``<YYYY-MM-DD>/`` folders there instead (:func:`check_log_dir`).
Records, one JSON object per line, each with ``record`` and ``ts``:

* ``start``: prompt (secrets masked), agent, model, parent_id, fallback chain, context source,
  the pid and start time of the `waaah run` process (gone without an ``end``: ``killed``);
* ``processes``: the CLI and what it started (pid, start time), at its spawn and on a slow timer;
* ``attempt`` / ``attempt_end``: one CLI process, its argv (the prompt elided), exit code, error;
* ``event``: one JSON event of the CLI's stream as it came (secrets masked; non-JSON dropped),
  while the log is under EVENTS_CAP (past it a ``cut`` record says they are left out);
* ``end``: the envelope printed for the run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from waaah_agent import settings
from waaah_agent.core.nesting import dumps_json, loads_json
from waaah_agent.core.oneshot.restore import own_prompt
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.errors import UsageError, storage_error
from waaah_agent.runtime import reaper
from waaah_agent.runtime.private import private_dir
from waaah_agent.safe_read import RUN_LOG_CAP, UnsafeFile, open_regular

#: `waaah run --verbose` shows at most this many characters of each record.
ECHO_CAP = 1000
#: The CLI's stream events are written while the log is under this size; past it they are left
#: out (one ``cut`` record says so) and only the run's own records (attempts, the end) are
#: written: readers stop at RUN_LOG_CAP, and a run whose end record is not read shows as killed.
EVENTS_CAP = RUN_LOG_CAP - 16 * 1024 * 1024
_C1 = re.compile("[\x7f-\x9f\u2028\u2029]")


def runs_root(workspace: Path) -> Path:
    """``WAAAH_LOG_DIR`` (a relative one from the workspace), else ``<workspace>/.waaah/runs``."""
    override = settings.log_dir(os.environ)
    if override:
        return workspace / Path(override).expanduser()
    return workspace / ".waaah" / "runs"


def check_log_dir(workspace: Path, write: bool) -> Path:
    """The folder run logs go to, checked: with ``WAAAH_LOG_DIR`` set, a folder that is (or, to
    ``write``, can be made) a writable folder; anything else is a one-line UsageError."""
    root = runs_root(workspace)
    value = settings.log_dir(os.environ)
    if not value:
        return root
    where = f"{settings.LOG_DIR}={value}"
    fix = f"point it at a folder, or unset it for {workspace / '.waaah' / 'runs'}"
    try:
        mode = os.stat(root).st_mode
    except ValueError:
        raise UsageError(f"{where} is not a usable path (it holds a NUL byte); {fix}") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UsageError(f"{where} is a symlink loop; {fix}") from None
        if err.errno == errno.ENOTDIR:
            raise UsageError(f"{where}: a part of that path is a file, not a folder; {fix}") from None
        if err.errno != errno.ENOENT:
            raise UsageError(f"{where} cannot be read ({err.strerror}); {fix}") from None
        if not write:
            return root  # nothing logged there yet
        try:
            private_dir(root)
        except OSError as cannot:
            raise UsageError(f"{where} cannot be created ({cannot.strerror}); {fix}") from None
        return root
    if not stat.S_ISDIR(mode):
        raise UsageError(f"{where} is not a folder; {fix}")
    if write and not os.access(root, os.W_OK | os.X_OK):
        raise UsageError(f"{where} is not writable by this user; {fix}")
    return root


class RunLog:
    """Appends records to one run's log; every line is written and flushed as it happens, so an
    interrupted run keeps what it had. A log that cannot be written never stops the run: the
    first failure is kept in ``error`` (the path, why, the fix) and nothing more is tried."""

    def __init__(self, path: Path, redact: Redactor, echo: Callable[[str], None] | None = None) -> None:
        self.path = path
        self._redact = redact
        self._echo = echo  # `waaah run --verbose`: each record (masked, cut) as it is written
        self.error = ""
        self._fh: IO[str] | None = None
        self.size = 0  # bytes in the file: the earlier runs' of a continued session, and ours
        self.events_left_out = 0  # stream events not written: the log had reached EVENTS_CAP
        global _ACTIVE
        _ACTIVE = self
        try:
            private_dir(path.parent)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        except OSError as err:
            self._failed(err)
            return
        try:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode):
                raise UnsafeFile(path, "is not a regular file")
            self.size = found.st_size
        except OSError as err:
            os.close(fd)
            self._failed(err)
            return
        self._fh = os.fdopen(fd, "a", encoding="utf-8", errors="replace")

    def _failed(self, err: OSError) -> None:
        if not self.error:
            self.error = str(storage_error(err, self.path, "write the run log"))
        self.close()
        self._fh = None

    def _put(self, line: str) -> None:
        if self._echo is not None:  # JSON escapes C0 controls; C1 ones (a CSI is one) too, here
            shown = _C1.sub(lambda c: f"\\u{ord(c.group(0)):04x}", line)
            self._echo(shown if len(shown) <= ECHO_CAP else shown[: ECHO_CAP - 3] + "...")
        if self._fh is None:
            return
        try:
            self._fh.write(line + "\n")
            self._fh.flush()
            self.size += 1 + (len(line) if line.isascii() else len(line.encode("utf-8", "replace")))
        except OSError as err:
            self._failed(err)

    def write(self, record: str, **fields: Any) -> None:
        if record == "start":  # who runs it: a run whose process is gone without an end was killed
            me = os.getpid()
            fields.update(pid=me, pid_start=reaper.start_time(me) or 0, boot=reaper.boot_id())
        line = dumps_json({"record": record, "ts": round(time.time(), 3), **fields}, ensure_ascii=False)
        self._put(self._redact(line))

    def event(self, attempt: int, agent: str, raw_line: str) -> None:
        """One stream line (a JSON object the parser took), masked before it is parsed again
        (JSON-safe: masks hold no quotes). A line nothing was masked in is written as it came,
        not parsed and encoded again: a 64 MB answer is copied, not decoded twice."""
        line = raw_line.strip()
        if self.size + len(line) > EVENTS_CAP:
            self._leave_out(attempt, agent)
            return
        masked = self._redact(line)
        head = {"record": "event", "ts": round(time.time(), 3), "attempt": attempt, "agent": agent}
        # NaN and Infinity, which Python's parser takes, are no JSON: such a line is written again.
        plain = "NaN" not in line and "Infinity" not in line
        if masked is line and line.startswith("{") and "\r" not in line and plain:
            self._put(dumps_json(head, ensure_ascii=False)[:-1] + ', "event": ' + line + "}")
            return
        try:
            event = loads_json(masked)
        except ValueError:
            return
        self._put(dumps_json({**head, "event": event}, ensure_ascii=False))

    def _leave_out(self, attempt: int, agent: str) -> None:
        """A stream event not written: the log holds EVENTS_CAP of them; the first one says so."""
        self.events_left_out += 1
        if self.events_left_out == 1:
            self.write(
                "cut",
                attempt=attempt,
                agent=agent,
                what=f"the CLI's stream events from here on are not written: the run log holds at "
                f"most {EVENTS_CAP // (1024 * 1024)} MB of them (the run goes on; its end is written)",
            )

    def close(self) -> None:
        global _ACTIVE
        if _ACTIVE is self:
            _ACTIVE = None
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()


_ACTIVE: RunLog | None = None  # the log of the run this process is making, while it is open


def note_processes(records: list[dict[str, Any]]) -> None:
    """The CLI of the current run and what it started (runtime/headless.py calls this)."""
    if _ACTIVE is not None:
        with contextlib.suppress(OSError, ValueError):
            _ACTIVE.write("processes", processes=records)


def note_cut(sizes: list[int], cap: int) -> None:
    """Lines of the CLI's output over ``cap`` bytes were cut (runtime/headless.py): said once."""
    if _ACTIVE is not None:
        with contextlib.suppress(OSError, ValueError):
            _ACTIVE.write(
                "cut",
                what=f"{len(sizes)} line(s) of the CLI's output longer than {cap // (1024 * 1024)} MB, "
                "left out (not parsed)",
                sizes=sizes[:20],
            )


def new_log_path(workspace: Path, log_id: str, day: datetime) -> Path:
    return runs_root(workspace) / day.strftime("%Y-%m-%d") / f"{log_id}.jsonl"


#: A record line longer than this is skipped (a prompt is at most 8 MB).
LINE_CAP = 16 * 1024 * 1024


def records(path: Path, events: bool = False) -> Iterator[dict[str, Any]]:
    """The records of the run log ``path`` (a regular file, not a symlink; its first
    RUN_LOG_CAP bytes): JSON objects with a string ``record``. Lines of another shape are
    skipped, as a torn last line is; stream ``event`` records only with ``events``."""
    try:
        fd = open_regular(path, follow=False)
    except OSError:
        return
    with os.fdopen(fd, "rb") as fh:
        left = RUN_LOG_CAP
        while left > 0:
            try:
                line = fh.readline(min(LINE_CAP, left))
            except OSError:
                return
            if not line:
                return
            left -= len(line)
            if not line.endswith(b"\n") and len(line) == LINE_CAP:
                while (rest := fh.readline(LINE_CAP)) and not rest.endswith(b"\n"):
                    left -= len(rest)
                continue
            if not events and b'"record": "event"' in line[:40]:
                continue  # stream events: not needed for summaries
            try:
                record = loads_json(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("record"), str):
                yield record


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass
class RunSummary:
    """One run log, summed over every prompt it carried."""

    id: str
    path: Path
    day: str
    agent: str = ""
    status: str = "running"
    first_prompt: str = ""
    parent_id: str = ""
    started: float = 0.0
    tokens: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0, "cached": 0, "total": 0})
    session_ids: list[str] = field(default_factory=list)
    prompts: int = 0
    duration_ms: int = 0  # every ended prompt's, summed
    runner: dict[str, Any] = field(default_factory=dict)  # the `waaah run` process of the last start
    processes: list[dict[str, Any]] = field(default_factory=list)  # its CLI's, last recorded
    leftovers: list[dict[str, Any]] = field(default_factory=list)  # a killed run's, still running


def summarize(path: Path) -> RunSummary:
    run = RunSummary(id=path.stem, path=path, day=path.parent.name)
    for record in records(path):
        kind = record.get("record")
        if kind == "start":
            run.prompts += 1
            run.status = "running"
            run.runner = {
                "pid": record.get("pid"),
                "start": record.get("pid_start"),
                "boot": record.get("boot"),
            }
            run.processes = []
            if not run.started:
                ts = record.get("ts")
                run.started = float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else 0.0
                run.agent = _text(record.get("agent"))
                run.first_prompt = _first_line(own_prompt(_text(record.get("prompt"))))
                run.parent_id = _text(record.get("parent_id"))
        elif kind == "processes":
            procs = record.get("processes")
            run.processes = [p for p in procs if isinstance(p, dict)] if isinstance(procs, list) else []
        elif kind == "end":
            envelope = _dict(record.get("envelope"))
            run.status = "error" if envelope.get("error") else "ok"
            if envelope.get("error_kind", envelope.get("error_type")) == "interrupted":  # precise
                run.status = "interrupted"
            run.agent = _text(envelope.get("agent")) or run.agent
            run.duration_ms += _whole(envelope.get("duration_ms"))
            tokens = _dict(envelope.get("tokens"))
            for key in run.tokens:
                run.tokens[key] += _whole(tokens.get(key))
            sid = _text(envelope.get("session_id"))
            if sid and sid not in run.session_ids:
                run.session_ids.append(sid)
            run.processes = []
    if run.status == "running" and run.runner.get("start") and not _runner_alive(run.runner):
        run.status = "killed"  # its process is gone and never wrote the end
        run.leftovers = reaper.still_running(run.processes)
    return run


def _runner_alive(runner: dict[str, Any]) -> bool:
    if runner.get("pid") == os.getpid():  # this very run (is_same never names us)
        return runner.get("start") == reaper.start_time(os.getpid())
    return reaper.is_same(runner)


def all_runs(workspace: Path) -> list[RunSummary]:
    root = runs_root(workspace)
    paths = sorted(root.glob("*/*.jsonl")) if root.is_dir() else []
    return [summarize(p) for p in paths if p.is_file() and not p.is_symlink()]  # a log, not a link


def find_run(workspace: Path, run_id: str) -> RunSummary | None:
    """The run whose log id, or one of whose CLI session ids, is ``run_id``."""
    root = runs_root(workspace)
    if not run_id or not root.is_dir() or "/" in run_id or run_id.startswith(".") or "*" in run_id:
        return None
    for path in sorted(root.glob(f"*/{run_id}.jsonl")):
        return summarize(path)
    for run in all_runs(workspace):
        if run_id in run.session_ids:
            return run
    return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and not line.startswith("<context"):
            return line.strip()[:80]
    return ""


def remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
