"""The night at a glance, from a session's events: what the agent did when, and what we did about it.

Pure: event dicts (as ``events.jsonl`` holds them, ``ts`` already turned into epoch seconds
under ``t``) in, a :class:`Night` out. runtime/night_html.py draws it; `waaah report` prints it.

The agent's state over time comes from the supervisor's own records: each ``state`` event
starts a stretch (``busy`` is working, ``tool`` is waiting in ``wait_for_prompt``, ``ready`` is
idle at the prompt, a dialog or a login screen is "needs someone"), a ``limit`` event starts a
usage-limit wait that its ``limit-over`` ends, a ``restart`` starts a restart that the next
``start`` ends, and the session's end (or the last event) ends the last stretch. Every
intervention (nudges, Esc on a stall, restarts, the loop detector answered, a login waited for,
a limit waited out) is a marker with its cause.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from waaah_agent.core.prices import Prices, cost_of

#: How each recorded state counts in the night's picture.
KIND_OF_STATE = {
    "busy": "working",
    "tool": "in the loop",
    "ready": "idle",
    "starting": "starting",
    "dialog": "needs someone",
    "login": "needs someone",
    "limited": "usage limit",
    "exiting": "restarting",
    "exited": "restarting",
}
#: The kinds in the order a legend shows them.
KINDS = ("working", "in the loop", "idle", "needs someone", "usage limit", "restarting", "starting")
#: Events that are interventions of ours, and how a marker names them.
INTERVENTIONS = {
    "nudge": "nudge",
    "stall": "Esc on a stall",
    "restart": "restart",
    "loop-detector": "loop detector",
    "login-wait": "waits for a login",
    "limit": "usage-limit wait",
    "limit-resume": "back from the limit",
    "task-kept": "task kept through a restart",
    "task-recovered": "task brought back",
    "evict-dropped": "EVICT RESTART served by the restart",
}
#: What the session link did with a task (core/link.py), as the summary says it.
LINK_EVENTS = {
    "task-kept": "came while the agent was restarting: kept for it",
    "task-recovered": "reserved for the agent on the server but never sent: brought back",
}
#: Tools by which an agent answers a task.
ANSWERS = ("send_response", "answer_task")


@dataclass(frozen=True)
class Stretch:
    session: str
    start: float
    end: float
    kind: str
    why: str = ""

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass(frozen=True)
class Marker:
    session: str
    t: float
    kind: str
    cause: str


@dataclass(frozen=True)
class Task:
    session: str
    task_id: str
    start: float
    end: float | None
    outcome: str  # "answered", "blocked", "back in the loop", "unfinished"


@dataclass(frozen=True)
class Nudge:
    session: str
    t: float
    kind: str
    reason: str
    answered: bool  # the agent was back in wait_for_prompt before the next nudge (or the end)


@dataclass(frozen=True)
class Restart:
    session: str
    t: float
    after: str
    reason: str


@dataclass(frozen=True)
class Kept:
    session: str
    t: float
    what: str  # the task id, or the EVICT's action
    how: str


@dataclass
class Night:
    sessions: list[str] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0
    stretches: list[Stretch] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    nudges: list[Nudge] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)  # tasks the session link kept or brought back
    tokens: list[tuple[float, int, int]] = field(default_factory=list)  # (t, input, output), running totals
    # (t, US dollars), the running cost at the user's prices (empty without a price table)
    costs: list[tuple[float, float]] = field(default_factory=list)
    unpriced: list[str] = field(default_factory=list)  # models the table has no price for
    # Each session's token totals as its events said them: (t, session, input, output, per model)
    token_points: list[tuple[float, str, int, int, dict[str, dict[str, int]]]] = field(
        default_factory=list, repr=False
    )

    def shares(self) -> dict[str, float]:
        """The share of the night (0..1) spent in each kind; kinds never seen are left out."""
        total = sum(s.seconds for s in self.stretches)
        spent: dict[str, float] = {}
        for s in self.stretches:
            spent[s.kind] = spent.get(s.kind, 0.0) + s.seconds
        return {k: spent[k] / total for k in KINDS if k in spent and total > 0}

    def seconds(self) -> dict[str, float]:
        spent: dict[str, float] = {}
        for s in self.stretches:
            spent[s.kind] = spent.get(s.kind, 0.0) + s.seconds
        return {k: spent[k] for k in KINDS if k in spent}


def read_night(
    sessions: Iterable[tuple[str, Sequence[Mapping[str, Any]], float | None]], prices: Prices | None = None
) -> Night:
    """A night of one or more sessions: (session id, its events with ``t``, its end or None);
    with ``prices`` (the user's table) the cost over time too."""
    night = Night()
    for name, events, ended in sessions:
        ordered = sorted((e for e in events if isinstance(e.get("t"), int | float)), key=lambda e: e["t"])
        if not ordered:
            continue
        night.sessions.append(name)
        _one_session(night, name, ordered, ended)
    if night.stretches or night.markers:
        times = [s.start for s in night.stretches] + [m.t for m in night.markers]
        ends = [s.end for s in night.stretches] + [m.t for m in night.markers]
        night.start, night.end = min(times), max(ends)
    _token_series(night, prices)
    return night


def _token_series(night: Night, prices: Prices | None) -> None:
    """The night's running totals: each ``tokens`` event holds its session's totals so far, so
    the night's are the sum of each session's latest."""
    latest: dict[str, tuple[int, int, dict[str, dict[str, int]]]] = {}
    unpriced: set[str] = set()
    for t, session, i, o, models in sorted(night.token_points, key=lambda p: p[0]):
        latest[session] = (i, o, models)
        night.tokens.append((t, sum(v[0] for v in latest.values()), sum(v[1] for v in latest.values())))
        if prices:
            per_model: dict[str, dict[str, int]] = {}
            for _, _, session_models in latest.values():
                for model, counts in session_models.items():
                    into = per_model.setdefault(model, {"input": 0, "output": 0, "cached": 0})
                    for key in into:
                        into[key] += _int(counts.get(key))
            found = cost_of(per_model, prices)
            unpriced.update(found.unpriced)
            night.costs.append((t, found.usd))
    night.unpriced = sorted(unpriced)


def _one_session(night: Night, name: str, events: Sequence[Mapping[str, Any]], ended: float | None) -> None:
    last_t = ended if ended is not None and ended >= events[-1]["t"] else events[-1]["t"]
    kind, why, since = "starting", "started", float(events[0]["t"])
    override: str | None = None  # "usage limit" or "restarting" while it lasts
    state_kind = kind

    def cut(t: float, new_kind: str, new_why: str) -> None:
        nonlocal kind, why, since
        if new_kind == kind:
            return
        if t > since:
            night.stretches.append(Stretch(name, since, t, kind, why))
        kind, why, since = new_kind, new_why, t

    task: dict[str, Any] | None = None
    open_nudges: list[int] = []  # nudges not yet followed by a wait_for_prompt (their index)
    for e in events:
        t, name_ = float(e["t"]), str(e.get("event", ""))
        if name_ == "state":
            state_kind = KIND_OF_STATE.get(str(e.get("state")), "idle")
            if override is None:
                cut(t, state_kind, str(e.get("evidence", "")))
        elif name_ == "limit":
            override = "usage limit"
            cut(t, override, f"until {e.get('until', '?')}")
        elif name_ in ("limit-over", "limit-resume") and override == "usage limit":
            override = None
            cut(t, state_kind, "the limit is over")
        elif name_ == "restart":
            override = "restarting"
            cut(t, override, f"after {e.get('after', '?')}")
            night.restarts.append(Restart(name, t, str(e.get("after", "")), str(e.get("reason", ""))))
        elif name_ == "start":
            if override == "restarting":
                override = None
            state_kind = "starting"
            cut(t, "starting", "started")
            if task is not None:  # the run ended inside a task
                night.tasks.append(Task(name, task["id"], task["start"], t, _cut_off(task["outcome"])))
                task = None
        elif name_ == "mcp-tool_start" and e.get("tool") == "wait_for_prompt":
            if task is not None:
                night.tasks.append(Task(name, task["id"], task["start"], t, task["outcome"]))
                task = None
            for i in open_nudges:
                old = night.nudges[i]
                night.nudges[i] = Nudge(old.session, old.t, old.kind, old.reason, True)
            open_nudges = []
        elif name_ == "mcp-tool_end" and e.get("tool") == "wait_for_prompt" and e.get("outcome") == "task":
            task = {"id": str(e.get("task_id") or "?"), "start": t, "outcome": "back in the loop"}
        elif name_ == "mcp-tool_end" and task is not None and e.get("tool") in ANSWERS:
            task["outcome"] = "answered"
        elif name_ == "mcp-tool_end" and task is not None and e.get("tool") == "block_task":
            task["outcome"] = "blocked"
        elif name_ in LINK_EVENTS:
            night.kept.append(Kept(name, t, _kept(e), LINK_EVENTS[name_]))
        elif name_ == "tokens":  # the session's totals so far (every transcript file of it)
            models = e.get("models")
            per_model = (
                {str(m): c for m, c in models.items() if isinstance(c, dict)}
                if isinstance(models, dict)
                else {}
            )
            i, o = _int(e.get("input")), _int(e.get("output"))
            if not per_model and (i or o):  # written before tokens were kept per model
                per_model = {"": {"input": i, "output": o, "cached": _int(e.get("cached"))}}
            night.token_points.append((t, name, i, o, per_model))
        if name_ in INTERVENTIONS:
            night.markers.append(Marker(name, t, INTERVENTIONS[name_], _cause(name_, e)))
        if name_ == "nudge":
            open_nudges = [len(night.nudges)]  # an earlier one not followed by a wait went unanswered
            night.nudges.append(Nudge(name, t, str(e.get("kind", "")), str(e.get("reason", "")), False))
    if task is not None:
        night.tasks.append(Task(name, task["id"], task["start"], None, _cut_off(task["outcome"])))
    if last_t > since:
        night.stretches.append(Stretch(name, since, last_t, kind, why))


def _cut_off(outcome: str) -> str:
    """A task whose run ended before the agent was back in its loop: answered or blocked stays."""
    return outcome if outcome in ("answered", "blocked") else "unfinished"


def _cause(name: str, e: Mapping[str, Any]) -> str:
    if name == "nudge":
        return f"{e.get('kind', '')}: {e.get('reason', '')}"
    if name == "restart":
        return f"after {e.get('after', '')} ({e.get('reason', '')})"
    if name == "stall":
        return f"no progress for {e.get('minutes', '?')} min"
    if name == "loop-detector":
        return str(e.get("action", ""))
    if name == "limit":
        return f"until {e.get('until', '?')} ({e.get('how', '')})"
    if name == "login-wait":
        return "the CLI asks for a login"
    if name in LINK_EVENTS:
        return _kept(e)
    if name == "evict-dropped":
        return "it came while the agent was being restarted"
    return name


def _kept(e: Mapping[str, Any]) -> str:
    return str(e.get("task_id") or f"EVICT {e.get('evict', '')}".strip())


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def duration(seconds: float) -> str:
    """``7h 12m``, ``12m 5s``, ``40s``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


def summary_lines(night: Night, clock: Any) -> list[str]:
    """The terminal summary; ``clock(t)`` shows a time (the shell passes local time)."""
    if not night.sessions:
        return ["no events in the sessions asked for"]
    lines = [
        f"{', '.join(night.sessions)}",
        f"from {clock(night.start)} to {clock(night.end)} ({duration(night.end - night.start)})",
        "",
        "time spent:",
    ]
    seconds = night.seconds()
    for kind, share in night.shares().items():
        lines.append(f"  {kind:<14} {share * 100:5.1f} %  {duration(seconds[kind])}")
    answered = sum(n.answered for n in night.nudges)
    lines += [
        "",
        f"tasks served: {len(night.tasks)}"
        + "".join(f"\n  {clock(t.start)}  {t.task_id}  {t.outcome}" for t in night.tasks),
        *(
            [
                f"tasks the session kept or brought back: {len(night.kept)}"
                + "".join(f"\n  {clock(k.t)}  {k.what}  {k.how}" for k in night.kept)
            ]
            if night.kept
            else []
        ),
        f"nudges: {len(night.nudges)} ({answered} answered: the agent was back in its loop before the next)",
        f"restarts: {len(night.restarts)}"
        + "".join(f"\n  {clock(r.t)}  after {r.after}: {r.reason}" for r in night.restarts),
    ]
    if night.tokens:
        _, i, o = night.tokens[-1]
        lines.append(f"tokens: {i:,} in, {o:,} out")
    if night.costs:
        unpriced = f" ({', '.join(night.unpriced)} at its highest prices)" if night.unpriced else ""
        lines.append(f"cost: ${night.costs[-1][1]:,.2f} at your price table's prices{unpriced}")
    return lines
