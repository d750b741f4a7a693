"""`waaah run` files: the per-run JSONL logs, the session tree, the persisted circuit breakers.

A run log is ``<workspace>/.waaah/runs/<YYYY-MM-DD>/<log id>.jsonl``; the log id is the CLI
session id the run started with, or an id of ours for CLIs that pick their own session ids (codex,
opencode). ``--session ID`` (the log id or a CLI session id in it) appends to that log.
``WAAAH_LOG_DIR`` puts the ``<YYYY-MM-DD>/`` folders there instead (runtime/run_trees.py checks it).
Records, one JSON object per line, each with ``record`` and ``ts``:

* ``start``: prompt (secrets masked), agent, model, parent_id, fallback chain, context source,
  the pid and start time of the `waaah run` process (gone without an ``end``: ``killed``);
* ``processes``: the CLI and what it started (pid, start time), at its spawn and on a slow timer;
* ``attempt`` / ``attempt_end``: one CLI process, its argv (the prompt elided), exit code, error;
* ``event``: one JSON event of the CLI's stream as it came (secrets masked; non-JSON dropped);
* ``end``: the envelope printed for the run.
"""

from __future__ import annotations

import contextlib
import json
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
from waaah_agent.core.nesting import loads_json
from waaah_agent.core.oneshot.restore import own_prompt
from waaah_agent.core.printable import one_line
from waaah_agent.core.redact import Redactor
from waaah_agent.errors import storage_error
from waaah_agent.runtime import reaper
from waaah_agent.runtime.night import report
from waaah_agent.runtime.private import private_dir
from waaah_agent.safe_read import RUN_LOG_CAP, UnsafeFile, open_regular

#: `waaah run --verbose` shows at most this many characters of each record.
ECHO_CAP = 1000
_C1 = re.compile("[\x7f-\x9f\u2028\u2029]")


def runs_root(workspace: Path) -> Path:
    """``WAAAH_LOG_DIR`` (a relative one from the workspace), else ``<workspace>/.waaah/runs``."""
    override = os.environ.get(settings.LOG_DIR, "").strip()
    if override:
        return workspace / Path(override).expanduser()
    return workspace / ".waaah" / "runs"


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
        global _ACTIVE
        _ACTIVE = self
        try:
            private_dir(path.parent)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        except OSError as err:
            self._failed(err)
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafeFile(path, "is not a regular file")
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
        except OSError as err:
            self._failed(err)

    def write(self, record: str, **fields: Any) -> None:
        if record == "start":  # who runs it: a run whose process is gone without an end was killed
            me = os.getpid()
            fields.update(pid=me, pid_start=reaper.start_time(me) or 0, boot=reaper.boot_id())
        line = json.dumps({"record": record, "ts": round(time.time(), 3), **fields}, ensure_ascii=False)
        self._put(self._redact(line))

    def event(self, attempt: int, agent: str, raw_line: str) -> None:
        """One stream line (a JSON object the parser took), masked before it is parsed again
        (JSON-safe: masks hold no quotes). A line nothing was masked in is written as it came,
        not parsed and encoded again: a 64 MB answer is copied, not decoded twice."""
        line = raw_line.strip()
        masked = self._redact(line)
        head = {"record": "event", "ts": round(time.time(), 3), "attempt": attempt, "agent": agent}
        if masked is line and line.startswith("{") and "\r" not in line:
            self._put(json.dumps(head, ensure_ascii=False)[:-1] + ', "event": ' + line + "}")
            return
        try:
            event = loads_json(masked)
        except ValueError:
            return
        self._put(json.dumps({**head, "event": event}, ensure_ascii=False))

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


# --------------------------------------------------------------------------------------------
# The tree of supervised sessions and runs
# --------------------------------------------------------------------------------------------


@dataclass
class Node:
    id: str
    kind: str  # "session" (supervised) or "run"
    agent: str
    status: str
    first_prompt: str
    tokens: dict[str, int]
    day: str
    started: float
    parent_id: str = ""
    aliases: tuple[str, ...] = ()
    children: list[Node] = field(default_factory=list)
    # A supervised session's night at a glance: started, ended, duration_s, end_reason,
    # restarts, nudges, first_task (what `waaah sessions` prints on its second line).
    night: dict[str, Any] = field(default_factory=dict)
    duration_ms: int | None = None  # a run's (a supervised session's is in night)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "agent": self.agent,
            "status": self.status,
            "first_prompt": self.first_prompt,
            "tokens": self.tokens,
            "day": self.day,
            "parent_id": self.parent_id or None,
            **({"duration_ms": self.duration_ms} if self.kind == "run" else {}),
            **self.night,
            "children": [c.to_json() for c in self.children],
        }


def nodes(workspace: Path) -> list[Node]:
    found: list[Node] = []
    for r in report.reports(workspace):
        started = _epoch(r.created) or _epoch(r.last_activity)
        found.append(
            Node(
                id=r.id,
                kind="session",
                agent=r.agent,
                status=f"{r.status}{' (live)' if r.live else ''}",
                first_prompt=f"{r.workflow}: {r.first_prompt}" if r.first_prompt else r.workflow,
                tokens={k: int(r.tokens.get(k, 0)) for k in ("input", "output", "cached")},
                day=datetime.fromtimestamp(started).strftime("%Y-%m-%d") if started else "",
                started=started,
                aliases=(r.native_session_id,) if r.native_session_id else (),
                night=_night(r, started),
            )
        )
    for run in all_runs(workspace):
        found.append(
            Node(
                id=run.id,
                kind="run",
                agent=run.agent,
                status=run.status,
                first_prompt=run.first_prompt,
                tokens=dict(run.tokens),
                day=run.day,
                started=run.started,
                parent_id=run.parent_id,
                aliases=tuple(run.session_ids),
                duration_ms=run.duration_ms if run.status != "running" else None,
            )
        )
    return found


def _night(r: report.SessionReport, started: float) -> dict[str, Any]:
    ended = _epoch(r.ended)
    until = ended or (_epoch(r.last_activity) if r.live else 0.0)
    return {
        "started": r.created,
        "ended": r.ended,
        "duration_s": round(until - started) if started and until >= started else None,
        "end_reason": r.end_reason,
        "restarts": r.restarts,
        "nudges": r.nudges,
        "first_task": r.first_task,
    }


def _clock(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%m-%d %H:%M")
    except ValueError:
        return "?"


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, int):
        return "?"
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def night_line(node: Node) -> str:
    """start -> end (duration), why it ended, restarts, nudges, first task."""
    n = node.night
    end = _clock(n["ended"]) if n.get("ended") else ("now" if "(live)" in node.status else "?")
    how = (
        f"ended: {n['end_reason']}" if n.get("end_reason") else ("running" if end == "now" else "end unknown")
    )
    parts = [
        f"{_clock(n.get('started') or '')} -> {end} ({_duration(n.get('duration_s'))})",
        how,
        f"restarts {n.get('restarts', 0)}",
        f"nudges {n.get('nudges', 0)}",
    ]
    if n.get("first_task"):
        parts.append(f"first task {n['first_task']}")
    return "; ".join(parts)


def known_id(workspace: Path, wanted: str) -> bool:
    return any(wanted == n.id or wanted in n.aliases for n in nodes(workspace))


def tree(workspace: Path) -> list[Node]:
    """Root nodes, newest day first, newest first within a day; children oldest first."""
    every = nodes(workspace)
    by_id: dict[str, Node] = {}
    for n in every:
        by_id[n.id] = n
        for alias in n.aliases:
            by_id.setdefault(alias, n)
    roots = []
    for n in every:
        parent = by_id.get(n.parent_id) if n.parent_id else None
        if parent is not None and parent is not n:
            parent.children.append(n)
        else:
            roots.append(n)
    for n in every:
        n.children.sort(key=lambda c: c.started)
    # Parent ids in a loop (damaged logs) leave no way in from a root: the loop is cut above its
    # first node, which stands as a root; what is returned is a tree (no walk of it loops).
    reached: set[int] = set()
    stack = list(roots)
    for n in every:
        while stack:
            node = stack.pop()
            if id(node) not in reached:
                reached.add(id(node))
                stack.extend(node.children)
        if id(n) not in reached:
            above = by_id.get(n.parent_id)
            if above is not None:
                above.children = [c for c in above.children if c is not n]
            roots.append(n)
            stack.append(n)
    return sorted(roots, key=lambda n: (n.day, n.started), reverse=True)


def render_tree(roots: list[Node], extra: Callable[[Node], str] | None = None) -> str:
    """The tree as text; ``extra`` gives a line shown under each node (when not empty)."""
    if not roots:
        return "no sessions or runs in this workspace"
    lines: list[str] = []
    day = None
    for root in roots:
        if root.day != day:
            day = root.day
            lines.append(f"{day or 'undated'}")
        _render(root, "  ", "", lines, extra, set())
    return "\n".join(lines)


def _render(
    node: Node,
    indent: str,
    branch: str,
    lines: list[str],
    extra: Callable[[Node], str] | None,
    seen: set[int],
) -> None:
    if id(node) in seen:  # a loop of parent ids: each node once
        return
    seen.add(id(node))
    tokens = f"{node.tokens.get('input', 0)}/{node.tokens.get('output', 0)}"
    prompt = f'"{node.first_prompt}"' if node.first_prompt else ""
    took = f"  {node.duration_ms / 1000:.1f}s" if node.duration_ms is not None else ""
    lines.append(
        one_line(
            f"{indent}{branch}{node.id}  {node.kind}  {node.agent}  {node.status}{took}  tokens {tokens}  {prompt}".rstrip()
        )
    )
    child_indent = indent + ("   " if branch == "└─ " else "│  " if branch else "")
    under = f"{child_indent}{'│  ' if node.children else '   '}"
    if node.night:
        lines.append(one_line(f"{under}{night_line(node)}"))
    if extra is not None and (line := extra(node)):
        lines.append(one_line(f"{under}{line}"))
    for i, child in enumerate(node.children):
        _render(child, child_indent, "└─ " if i == len(node.children) - 1 else "├─ ", lines, extra, seen)


def _epoch(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0


# --------------------------------------------------------------------------------------------
# Circuit breakers, shared by every run of this user (platformdirs state dir)
# --------------------------------------------------------------------------------------------


def remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
