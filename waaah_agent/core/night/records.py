"""The records of a night (core/night/report.py reads them from the events): the stretches of
time in each kind, the markers of our interventions, the tasks, nudges, restarts and kept tasks,
and the bounded sample that keeps each list short however long the night. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

#: The kinds in the order a legend shows them.
KINDS = ("working", "in the loop", "idle", "needs someone", "usage limit", "restarting", "starting")
TEXT_CAP = 300  # characters of a cause, a reason, a task id

T = TypeVar("T")


class Sample(Generic[T]):
    """At most ``cap`` of a stream of items, evenly spread over it: when full, every other one
    kept is dropped, and from then on only every other new one is kept (the stride doubles).
    ``seen`` counts them all."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.items: list[T] = []
        self.seen = 0
        self._stride = 1

    def add(self, item: T) -> None:
        if self.seen % self._stride == 0:
            self.items.append(item)
            if len(self.items) > self.cap:
                self.items = self.items[::2]
                self._stride *= 2
        self.seen += 1


def clipped(value: Any) -> str:
    text = str(value)
    return text if len(text) <= TEXT_CAP else text[: TEXT_CAP - 1] + "…"


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
    markers: list[Marker] = field(default_factory=list)  # a sample (see Sample)
    tasks: list[Task] = field(default_factory=list)  # a sample: the numbers are below
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
    # The exact numbers: seconds in each kind, and how many tasks, nudges (answered), restarts.
    spent: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def shares(self) -> dict[str, float]:
        """The share of the night (0..1) spent in each kind; kinds never seen are left out."""
        total = sum(self.spent.values())
        return {k: self.spent[k] / total for k in KINDS if k in self.spent and total > 0}

    def seconds(self) -> dict[str, float]:
        return {k: self.spent[k] for k in KINDS if k in self.spent}

    def count(self, what: str) -> int:
        """``tasks``, ``nudges``, ``answered``, ``restarts``, ``kept`` or ``typed again`` (prompts that
        needed another paste or Enter): all of them, not only those listed."""
        return self.counts.get(what, 0)
