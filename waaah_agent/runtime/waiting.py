"""The loop's bookkeeping: what its selector waits for on each fd, and its deadlines."""

from __future__ import annotations

import selectors
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass
class Timers(Generic[K]):
    """Deadlines on the monotonic clock."""

    due: dict[K, float] = field(default_factory=dict)

    def set(self, timer: K, when: float) -> None:
        self.due[timer] = when

    def set_min(self, timer: K, when: float) -> None:
        """Fire at ``when`` unless already due earlier."""
        self.due[timer] = min(when, self.due.get(timer, when))

    def pop_due(self, now: float) -> list[K]:
        timers = [n for n, t in self.due.items() if t <= now]
        for n in timers:
            del self.due[n]
        return timers


class Interest:
    """The events the loop's selector waits for on each fd; the selector hears only of changes.

    The agent's PTY and the terminal change what they wait for as queues fill and empty;
    asking the selector each time (and registering and unregistering) costs more than the
    wake-up it serves under a flood of output.
    """

    def __init__(self, sel: selectors.BaseSelector) -> None:
        self.sel = sel
        self.events: dict[int, int] = {}

    def want(self, fd: int, events: int, callback: Callable[[int], None]) -> None:
        """Make the selector wait for exactly ``events`` on ``fd`` (0: not at all)."""
        had = self.events.get(fd, 0)
        if events == had:
            return
        if not had:
            self.sel.register(fd, events, callback)
        elif events:
            self.sel.modify(fd, events, callback)
        else:
            self.sel.unregister(fd)
        self.events[fd] = events
