"""The one list of supervised sessions and `waaah run` runs: `waaah sessions [ID] [--paths]`
(and its old spelling `waaah run --list`) draw this tree, newest day first, each run under the run
or session it names as its ``--parent``.

The nodes come from the sessions' state (runtime/night/report.py) and the runs' logs
(runtime/oneshot/runlog.py's reader: a torn line, a huge log, a symlink or FIFO in place of one
are skipped or read no further); parent ids in a loop are cut so every walk ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent.core.nesting import dumps_json
from waaah_agent.core.printable import one_line
from waaah_agent.errors import SessionNotFound
from waaah_agent.runtime.night import report
from waaah_agent.runtime.oneshot.runlog import all_runs, check_log_dir, runs_root
from waaah_agent.runtime.private import check_state


def show(workspace: Path, wanted: str | None = None, paths: bool = False, as_json: bool = False) -> str:
    """What `waaah sessions` prints for this workspace (its root): the state folder checked first
    (someone else's: one line, nothing of it shown), then :func:`list_text`."""
    check_state(workspace / ".waaah")
    return list_text(workspace, wanted, paths, as_json)


def log_path(workspace: Path, node: Node) -> Path:
    return runs_root(workspace) / node.day / f"{node.id}.jsonl"


def _find(roots: list[Node], wanted: str) -> Node | None:
    stack = list(roots)
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if wanted == node.id or wanted in node.aliases:
            return node
        stack.extend(node.children)
    return None


def list_text(workspace: Path, wanted: str | None, paths: bool, as_json: bool = False) -> str:
    """The tree `waaah sessions` shows, or only the tree of ``wanted``; with ``paths``, each run's
    log path under it. ``as_json``: the trees as `waaah sessions --json` prints them, each run
    with its ``log`` path when ``paths``."""
    roots = _listed(workspace, wanted)
    if as_json:
        trees = [r.to_json() for r in roots]

        def add_logs(node: Node, out: dict[str, Any]) -> None:
            if node.kind == "run":
                out["log"] = str(log_path(workspace, node))
            for child, child_out in zip(node.children, out["children"], strict=True):
                add_logs(child, child_out)

        for root, tree in zip(roots, trees, strict=True) if paths else ():
            add_logs(root, tree)
        return dumps_json(trees, indent=2)

    def path_line(node: Node) -> str:
        return f"log: {log_path(workspace, node)}" if node.kind == "run" else ""

    return render_tree(roots, path_line if paths else None)


def _listed(workspace: Path, wanted: str | None) -> list[Node]:
    check_log_dir(workspace, write=False)
    roots = tree(workspace)
    if wanted:
        node = _find(roots, wanted)
        if node is None:
            raise SessionNotFound(
                f"unknown run id '{wanted}': no run or supervised session with that id "
                f"(runs in {runs_root(workspace)}; see: waaah sessions)"
            )
        roots = [node]
    return roots


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
