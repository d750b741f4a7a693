"""What ``/healthz``, ``/readyz`` and ``/metrics`` tell of a supervised session. Pure.

``Vitals`` folds the session's events (the records written to events.jsonl, secrets masked)
into a frozen ``Snapshot``; the loop's thread feeds it and publishes a new snapshot only when an
event changed something. The metrics server's thread reads the newest snapshot and asks
:func:`readiness`, :func:`liveness` and :func:`families` about it, with its own clock: it never
reaches into the loop. Names follow Prometheus' conventions (``waaah_`` prefix, base units,
``_total`` on counters, ``_seconds`` for times).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from waaah_agent.core.supervise.detect import STATES
from waaah_agent.core.supervise.events import EventKind

#: The supervisor's own state between two runs of the CLI (not one the screen can show).
RESTARTING = "restarting"
AGENT_STATES = (*STATES, RESTARTING)
#: States in which the agent is in its loop: waiting in wait_for_prompt, or working on a task.
IN_LOOP = frozenset({"tool", "busy"})
#: /healthz: the supervisor's loop must have answered a ping within this many seconds.
ANSWER_WITHIN = 5.0
WAIT_TOOL = "wait_for_prompt"


@dataclass(frozen=True)
class Snapshot:
    """The session as the metrics server shows it. Times are epoch seconds."""

    agent: str
    workflow: str
    session: str
    state: str = "starting"
    ended: str = ""  # the stop reason once the session is over
    restart_at: float | None = None  # restarting: when the next run starts
    paused: bool = False
    server_down: str = ""  # why the WAAAH server cannot be reached ("" when it can)
    limit_until: float | None = None  # a usage limit's end
    looped: bool = False  # a wait_for_prompt was seen since this run of the CLI started
    waiting: bool = False  # a wait_for_prompt call is in flight
    last_wait: float | None = None  # when a wait_for_prompt call last started or ended
    restarts: int = 0
    tasks: int = 0
    nudges: tuple[tuple[str, int], ...] = ()
    tokens: tuple[tuple[str, int], ...] = ()  # from the CLI's transcript: input, output, cached
    cost_usd: float | None = None  # at the user's price table; None where nothing is priced

    @property
    def shown(self) -> str:
        """The state as the machine classifies it: a wait in flight is ``tool`` whatever the
        screen showed last (the screen is not even looked at while the CLI only redraws)."""
        return "tool" if self.waiting and self.state not in ("exiting", "exited", RESTARTING) else self.state


def epoch(value: Any) -> float | None:
    """An ISO time (as events and session.json write them) as epoch seconds; None if it is not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def _bump(pairs: tuple[tuple[str, int], ...], key: str) -> tuple[tuple[str, int], ...]:
    counts = dict(pairs)
    counts[key] = counts.get(key, 0) + 1
    return tuple(sorted(counts.items()))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


@dataclass
class Vitals:
    """The fold: :meth:`see` takes one event and says whether the snapshot changed."""

    snapshot: Snapshot
    _handlers: Mapping[str, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._handlers = {
            EventKind.START: self._start,
            EventKind.STATE: self._state,
            EventKind.RESTART: self._restart,
            EventKind.LIMIT: self._limit,
            EventKind.LIMIT_OVER: lambda s, e, now: replace(s, limit_until=None),
            EventKind.SERVER: self._server,
            EventKind.CONTROL: self._control,
            EventKind.NUDGE: lambda s, e, now: replace(
                s, nudges=_bump(s.nudges, str(e.get("kind") or "other"))
            ),
            EventKind.MCP_TOOL_START: self._tool,
            EventKind.MCP_TOOL_END: self._tool,
            EventKind.TOKENS: self._tokens,
            EventKind.END: lambda s, e, now: replace(s, ended=str(e.get("reason") or "ended"), waiting=False),
        }

    def see(self, event: Mapping[str, Any], now: float) -> bool:
        handler = self._handlers.get(str(event.get("event")))
        if handler is None:
            return False
        after = handler(self.snapshot, event, now)
        changed: bool = after != self.snapshot
        self.snapshot = after
        return changed

    @staticmethod
    def _start(s: Snapshot, e: Mapping[str, Any], now: float) -> Snapshot:
        return replace(s, state="starting", restart_at=None, looped=False, waiting=False, ended="")

    @staticmethod
    def _state(s: Snapshot, e: Mapping[str, Any], now: float) -> Snapshot:
        state = str(e.get("state"))
        return replace(s, state=state) if state in STATES else s

    @staticmethod
    def _restart(s: Snapshot, e: Mapping[str, Any], now: float) -> Snapshot:
        delay = e.get("delay")
        wait = float(delay) if isinstance(delay, (int, float)) and not isinstance(delay, bool) else 0.0
        return replace(s, state=RESTARTING, restart_at=now + max(0.0, wait), restarts=s.restarts + 1)

    @staticmethod
    def _limit(s: Snapshot, e: Mapping[str, Any], now: float) -> Snapshot:
        return replace(s, limit_until=epoch(e.get("until")))

    @staticmethod
    def _server(s: Snapshot, e: Mapping[str, Any], now: float) -> Snapshot:
        if e.get("ok") is True:
            return replace(s, server_down="")
        return replace(s, server_down=str(e.get("detail") or "unreachable"))

    @staticmethod
    def _control(s: Snapshot, e: Mapping[str, Any], now: float) -> Snapshot:
        command = e.get("command")
        if command in ("pause", "resume") and "action" not in e:
            return replace(s, paused=command == "pause")
        return s

    @staticmethod
    def _tool(s: Snapshot, e: Mapping[str, Any], now: float) -> Snapshot:
        started = e.get("event") == "mcp-tool_start"
        if e.get("tool") != WAIT_TOOL:
            return s
        tasks = s.tasks + (1 if not started and e.get("outcome") == "task" else 0)
        return replace(s, looped=True, waiting=started, last_wait=now, tasks=tasks)

    @staticmethod
    def _tokens(s: Snapshot, e: Mapping[str, Any], now: float) -> Snapshot:
        counts = tuple((k, _count(e.get(k))) for k in ("input", "output", "cached"))
        cost = e.get("cost_usd")
        usd = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else s.cost_usd
        return replace(s, tokens=counts, cost_usd=usd)


def readiness(s: Snapshot, now: float) -> tuple[bool, dict[str, Any]]:
    """Whether the agent is in its loop, and the one-line reason /readyz answers with."""
    if s.ended:
        return False, {"ready": False, "reason": "stopped", "detail": s.ended}
    if s.state == RESTARTING:
        at = _iso(s.restart_at) if s.restart_at is not None else None
        return False, {"ready": False, "reason": "restarting", "at": at}
    if s.state == "login":
        return False, {"ready": False, "reason": "login"}
    if s.state == "limited" or (s.limit_until is not None and s.limit_until > now):
        until = _iso(s.limit_until) if s.limit_until is not None else None
        return False, {"ready": False, "reason": "usage limit", "until": until}
    if s.server_down:
        return False, {"ready": False, "reason": "server down", "detail": s.server_down}
    if s.paused:
        return False, {"ready": False, "reason": "paused"}
    if s.state in ("exiting", "exited"):
        return False, {"ready": False, "reason": "stopping"}
    if s.waiting or s.state == "tool":  # the tap is the strongest evidence: whatever the screen shows
        return True, {"ready": True, "state": "waiting"}
    if s.state == "starting" or not s.looped:
        return False, {"ready": False, "reason": "starting", "state": s.state}
    if s.state in IN_LOOP:
        return True, {"ready": True, "state": "working"}
    return False, {"ready": False, "reason": "out of its loop", "state": s.state}


def liveness(s: Snapshot, now: float, answered_ago: float | None) -> tuple[bool, dict[str, Any]]:
    """/healthz: alive while the loop answered within ``ANSWER_WITHIN`` seconds, or while the
    supervisor waits out a restart's delay (no loop runs then; its end is known)."""
    if answered_ago is not None and answered_ago <= ANSWER_WITHIN:
        return True, {"alive": True}
    if s.state == RESTARTING and s.restart_at is not None and now <= s.restart_at + ANSWER_WITHIN:
        return True, {"alive": True, "restarting": True}
    silent = "never" if answered_ago is None else f"{answered_ago:.0f} s ago"
    return False, {"alive": False, "reason": f"the supervisor's loop last answered {silent}"}


def _iso(when: float) -> str:
    return datetime.fromtimestamp(when, timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Family:
    """One metric: its name as exposed, gauge or counter, help text, label names, samples."""

    name: str
    kind: str  # "gauge" | "counter"
    help: str
    labels: tuple[str, ...]
    samples: tuple[tuple[tuple[str, ...], float], ...]


#: (name, kind, extra label, help) of every metric, in the order of the docs' table.
METRICS = (
    ("waaah_agent_state", "gauge", "state", "1 for the state the agent is in, 0 for the others"),
    ("waaah_restarts_total", "counter", "", "Restarts of the CLI by this supervisor"),
    ("waaah_nudges_total", "counter", "kind", "Prompts typed to keep the agent in its loop, by kind"),
    ("waaah_tasks_total", "counter", "", "Tasks wait_for_prompt handed to the agent"),
    ("waaah_tokens_total", "counter", "direction", "Tokens the session used (input, output)"),
    ("waaah_cached_tokens_total", "counter", "", "Input tokens read from the model's cache"),
    ("waaah_cost_usd_total", "counter", "", "What the tokens cost at the user's price table"),
    ("waaah_usage_limit_until_seconds", "gauge", "", "When a usage limit ends (epoch); 0: none"),
    (
        "waaah_last_wait_timestamp_seconds",
        "gauge",
        "",
        "When the agent was last seen in wait_for_prompt (epoch; now while a wait is in flight)",
    ),
    ("waaah_ready", "gauge", "", "1 while the agent is in its loop (what /readyz answers)"),
)


def families(s: Snapshot, now: float) -> list[Family]:
    """Every metric of the snapshot at ``now``. Samples that have no value yet (no cost without
    prices, no wait seen) are left out rather than made up."""
    base = (s.agent, s.workflow, s.session)
    values: dict[str, tuple[tuple[tuple[str, ...], float], ...]] = {
        "waaah_agent_state": tuple(((*base, x), 1.0 if s.shown == x else 0.0) for x in AGENT_STATES),
        "waaah_restarts_total": ((base, float(s.restarts)),),
        "waaah_nudges_total": tuple(((*base, kind), float(n)) for kind, n in s.nudges),
        "waaah_tasks_total": ((base, float(s.tasks)),),
        "waaah_tokens_total": tuple(((*base, k), float(n)) for k, n in s.tokens if k in ("input", "output")),
        "waaah_cached_tokens_total": tuple((base, float(n)) for k, n in s.tokens if k == "cached"),
        "waaah_cost_usd_total": ((base, s.cost_usd),) if s.cost_usd is not None else (),
        "waaah_usage_limit_until_seconds": (
            (base, s.limit_until if s.limit_until is not None and s.limit_until > now else 0.0),
        ),
        "waaah_last_wait_timestamp_seconds": (
            ((base, now if s.waiting else s.last_wait),) if s.last_wait is not None else ()
        ),
        "waaah_ready": ((base, 1.0 if readiness(s, now)[0] else 0.0),),
    }
    out = []
    for name, kind, extra, text in METRICS:
        labels = ("agent", "workflow", "session", *((extra,) if extra else ()))
        out.append(Family(name, kind, text, labels, values[name]))
    return out
