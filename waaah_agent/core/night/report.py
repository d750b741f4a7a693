"""The night at a glance, from a session's events: what the agent did when, and what we did about it.

Pure: event dicts (as ``events.jsonl`` holds them, ``ts`` already turned into epoch seconds
under ``t``) in, a :class:`Night` out. runtime/night/html.py draws it; its records are in
core/night/records.py; `waaah report` prints it.

Bounded, however long the night: events are taken one at a time, in the order they were
written (an event dated before the one it follows counts at that one's time), and never kept.
The time in each state and the numbers (tasks, nudges answered, restarts) are exact; what is
drawn or listed is bounded: each session's timeline keeps at most its share of
:data:`TIMELINE_CAP` stretches (when over, neighbouring stretches merge, the longer one's kind
shown), and markers, table rows and token points are evenly spread samples
(:class:`Sample`). Text from the events is cut to :data:`TEXT_CAP` characters.

The agent's state over time comes from the supervisor's own records: each ``state`` event
starts a stretch (``busy`` is working, ``tool`` is waiting in ``wait_for_prompt``, ``ready`` is
idle at the prompt, a dialog or a login screen is "needs someone"), a ``limit`` event starts a
usage-limit wait that its ``limit-over`` ends, a ``restart`` starts a restart that the next
``start`` ends, and the session's end (or the last event) ends the last stretch. Every
intervention (nudges, Esc on a stall, restarts, the loop detector answered, a login waited for,
a limit waited out) is a marker with its cause.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from waaah_agent.core.night.records import (
    Kept,
    Marker,
    Night,
    Nudge,
    Restart,
    Sample,
    Stretch,
    Task,
    clipped,
)
from waaah_agent.core.prices import Prices, cost_of
from waaah_agent.core.printable import one_line

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
#: What the session link did with a task (core/mcp/link.py), as the summary says it.
LINK_EVENTS = {
    "task-kept": "came while the agent was restarting: kept for it",
    "task-recovered": "reserved for the agent on the server but never sent: brought back",
}
#: Tools by which an agent answers a task.
ANSWERS = ("send_response", "answer_task")
#: Bounds of what is drawn and listed (the numbers and times stay exact).
TIMELINE_CAP = 4000  # stretches, shared by the sessions (at least MIN_PER_SESSION each)
MIN_PER_SESSION = 200
MARKER_CAP = 2000
ROW_CAP = 500  # rows of each table (tasks, nudges, restarts)
TOKEN_CAP = 1000  # token points per session


def read_night(
    sessions: Iterable[tuple[str, Iterable[Mapping[str, Any]], float | None]], prices: Prices | None = None
) -> Night:
    """A night of one or more sessions: (session id, its events with ``t`` in the order written,
    its end or None); with ``prices`` (the user's table) the cost over time too."""
    night = Night()
    chosen = list(sessions)
    per_session = max(MIN_PER_SESSION, TIMELINE_CAP // max(1, len(chosen)))
    markers: Sample[Marker] = Sample(MARKER_CAP)
    rows: dict[str, Sample[Any]] = {k: Sample(ROW_CAP) for k in ("tasks", "nudges", "restarts", "kept")}
    firsts, lasts = [], []
    for name, events, ended in chosen:
        one = _Session(name, night, per_session, markers, rows)
        for e in events:
            t = e.get("t")
            if isinstance(t, int | float) and not isinstance(t, bool):
                one.take(float(t), e)
        if one.first is None:
            continue
        night.sessions.append(name)
        one.finish(ended)
        firsts.append(one.first)
        lasts.append(one.last)
    night.markers = markers.items
    night.tasks, night.nudges, night.restarts, night.kept = (
        rows[k].items for k in ("tasks", "nudges", "restarts", "kept")
    )
    for k in ("tasks", "nudges", "restarts", "kept"):
        night.counts[k] = rows[k].seen
    if firsts:
        night.start, night.end = min(firsts), max(lasts)
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


class _Session:
    """One session's events, taken one at a time into the night."""

    def __init__(
        self, name: str, night: Night, cap: int, markers: Sample[Marker], rows: dict[str, Sample[Any]]
    ) -> None:
        self.name, self.night, self.cap = name, night, cap
        self.markers, self.rows = markers, rows
        self.first: float | None = None
        self.last = 0.0
        self.kind, self.why, self.since = "starting", "started", 0.0
        self.override: str | None = None  # "usage limit" or "restarting" while it lasts
        self.state_kind = "starting"
        self.stretches: list[Stretch] = []
        self.task: dict[str, Any] | None = None
        self.nudge: Nudge | None = None  # the last nudge, until the agent is back in its loop
        self.tokens: Sample[tuple[float, str, int, int, dict[str, dict[str, int]]]] = Sample(TOKEN_CAP)
        self.last_tokens: tuple[float, str, int, int, dict[str, dict[str, int]]] | None = None

    def cut(self, t: float, new_kind: str, new_why: str) -> None:
        if new_kind == self.kind:
            return
        if t > self.since:
            self.stretch(Stretch(self.name, self.since, t, self.kind, self.why))
        self.kind, self.why, self.since = new_kind, clipped(new_why), t

    def stretch(self, s: Stretch) -> None:
        self.night.spent[s.kind] = self.night.spent.get(s.kind, 0.0) + s.seconds
        self.stretches.append(s)
        if len(self.stretches) > self.cap:  # neighbours merge: the timeline at half the detail
            pairs = zip(self.stretches[::2], self.stretches[1::2], strict=False)
            merged = [_merged(a, b) for a, b in pairs]
            self.stretches = merged + ([self.stretches[-1]] if len(self.stretches) % 2 else [])

    def end_task(self, t: float | None, outcome: str) -> None:
        if self.task is not None:
            self.rows["tasks"].add(Task(self.name, self.task["id"], self.task["start"], t, outcome))
            self.task = None

    def end_nudge(self, answered: bool) -> None:
        if self.nudge is not None:
            if answered:
                self.night.counts["answered"] = self.night.count("answered") + 1
            old = self.nudge
            self.rows["nudges"].add(Nudge(old.session, old.t, old.kind, old.reason, answered))
            self.nudge = None

    def take(self, t: float, e: Mapping[str, Any]) -> None:
        if self.first is None:
            self.first = self.since = self.last = t
        t = self.last = max(t, self.last)  # one dated before the last counts at its time
        name, name_ = self.name, str(e.get("event", ""))
        if name_ == "state":
            self.state_kind = KIND_OF_STATE.get(str(e.get("state")), "idle")
            if self.override is None:
                self.cut(t, self.state_kind, str(e.get("evidence", "")))
        elif name_ == "limit":
            self.override = "usage limit"
            self.cut(t, self.override, f"until {e.get('until', '?')}")
        elif name_ in ("limit-over", "limit-resume") and self.override == "usage limit":
            self.override = None
            self.cut(t, self.state_kind, "the limit is over")
        elif name_ == "restart":
            self.override = "restarting"
            self.cut(t, self.override, f"after {e.get('after', '?')}")
            self.rows["restarts"].add(
                Restart(name, t, clipped(e.get("after", "")), clipped(e.get("reason", "")))
            )
        elif name_ == "start":
            if self.override == "restarting":
                self.override = None
            self.state_kind = "starting"
            self.cut(t, "starting", "started")
            if self.task is not None:  # the run ended inside a task
                self.end_task(t, _cut_off(self.task["outcome"]))
        elif name_ == "mcp-tool_start" and e.get("tool") == "wait_for_prompt":
            if self.task is not None:
                self.end_task(t, self.task["outcome"])
            self.end_nudge(True)
        elif name_ == "mcp-tool_end" and e.get("tool") == "wait_for_prompt" and e.get("outcome") == "task":
            self.task = {"id": clipped(e.get("task_id") or "?"), "start": t, "outcome": "back in the loop"}
        elif name_ == "mcp-tool_end" and self.task is not None and e.get("tool") in ANSWERS:
            self.task["outcome"] = "answered"
        elif name_ == "mcp-tool_end" and self.task is not None and e.get("tool") == "block_task":
            self.task["outcome"] = "blocked"
        elif name_ == "delivery" and _typed_again(e):
            cause = clipped(f"{e.get('kind', '')}: {e.get('note', '')}")
            self.markers.add(Marker(name, t, "prompt typed again", cause))
            self.night.counts["typed again"] = self.night.count("typed again") + 1
        elif name_ in LINK_EVENTS:
            self.rows["kept"].add(Kept(name, t, clipped(_kept(e)), LINK_EVENTS[name_]))
        elif name_ == "tokens":  # the session's totals so far (every transcript file of it)
            self.took_tokens(t, e)
        if name_ in INTERVENTIONS:
            self.markers.add(Marker(name, t, INTERVENTIONS[name_], clipped(_cause(name_, e))))
        if name_ == "nudge":
            self.end_nudge(False)  # an earlier one not followed by a wait went unanswered
            self.nudge = Nudge(name, t, clipped(e.get("kind", "")), clipped(e.get("reason", "")), False)

    def took_tokens(self, t: float, e: Mapping[str, Any]) -> None:
        models = e.get("models")
        per_model = (
            {clipped(m): c for m, c in models.items() if isinstance(c, dict)}
            if isinstance(models, dict)
            else {}
        )
        i, o = _int(e.get("input")), _int(e.get("output"))
        if not per_model and (i or o):  # written before tokens were kept per model
            per_model = {"": {"input": i, "output": o, "cached": _int(e.get("cached"))}}
        self.last_tokens = (t, self.name, i, o, per_model)
        self.tokens.add(self.last_tokens)

    def finish(self, ended: float | None) -> None:
        last_t = self.last = ended if ended is not None and ended >= self.last else self.last
        if self.task is not None:
            self.end_task(None, _cut_off(self.task["outcome"]))
        self.end_nudge(False)
        if last_t > self.since:
            self.stretch(Stretch(self.name, self.since, last_t, self.kind, self.why))
        self.night.stretches += self.stretches
        points = self.tokens.items
        if self.last_tokens is not None and (not points or points[-1] is not self.last_tokens):
            points.append(self.last_tokens)  # the session's last totals always count
        self.night.token_points += points


def _merged(a: Stretch, b: Stretch) -> Stretch:
    """Two neighbouring stretches as one, of the kind that took longer."""
    if a.kind == b.kind:
        return Stretch(a.session, a.start, b.end, a.kind, a.why)
    kind = a.kind if a.seconds >= b.seconds else b.kind
    return Stretch(a.session, a.start, b.end, kind, f"mostly {kind} (shown at a coarser scale)")


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


def _typed_again(e: Mapping[str, Any]) -> bool:
    """A delivery that needed another go: a paste the agent never showed (or emptied), an Enter
    it dropped (core/supervise/delivery.py's notes)."""
    note = e.get("note")
    return isinstance(note, str) and note.startswith(("pasted again", "enter re-sent"))


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


#: At most this many tasks or restarts are listed in the terminal (evenly spread).
LISTED = 40


def summary_lines(night: Night, clock: Any) -> list[str]:
    """The terminal summary; ``clock(t)`` shows a time (the shell passes local time). What came
    from the events is shown, never acted on (``one_line``)."""
    if not night.sessions:
        return ["no events in the sessions asked for"]
    lines = [
        one_line(", ".join(night.sessions)),
        f"from {clock(night.start)} to {clock(night.end)} ({duration(night.end - night.start)})",
        "",
        "time spent:",
    ]
    seconds = night.seconds()
    for kind, share in night.shares().items():
        lines.append(f"  {kind:<14} {share * 100:5.1f} %  {duration(seconds[kind])}")
    tasks = [f"  {clock(t.start)}  {one_line(t.task_id)}  {t.outcome}" for t in night.tasks]
    restarts = [f"  {clock(r.t)}  after {one_line(r.after)}: {one_line(r.reason)}" for r in night.restarts]
    kept = [f"  {clock(k.t)}  {one_line(k.what)}  {k.how}" for k in night.kept]
    lines += [
        "",
        f"tasks served: {night.count('tasks')}",
        *_listed(tasks, night.count("tasks")),
        *(
            [
                f"tasks the session kept or brought back: {night.count('kept')}",
                *_listed(kept, night.count("kept")),
            ]
            if night.count("kept")
            else []
        ),
        f"nudges: {night.count('nudges')} ({night.count('answered')} answered: the agent was back in its "
        "loop before the next)",
        f"restarts: {night.count('restarts')}",
        *_listed(restarts, night.count("restarts")),
        *(
            [
                f"prompts typed again: {night.count('typed again')} (a paste the agent never showed, "
                "or an Enter it dropped)"
            ]
            if night.count("typed again")
            else []
        ),
    ]
    if night.tokens:
        _, i, o = night.tokens[-1]
        lines.append(f"tokens: {i:,} in, {o:,} out")
    if night.costs:
        unpriced = f" ({', '.join(night.unpriced)} at its highest prices)" if night.unpriced else ""
        lines.append(one_line(f"cost: ${night.costs[-1][1]:,.2f} at your price table's prices{unpriced}"))
    return lines


def _listed(lines: list[str], total: int) -> list[str]:
    """``lines`` (a sample of ``total``), at most :data:`LISTED` of them, saying so when not all."""
    if len(lines) > LISTED:
        lines = lines[:: -(-len(lines) // LISTED)]
    return (
        lines
        if len(lines) == total
        else [*lines, f"  ({len(lines)} of {total} listed, spread over the night)"]
    )
