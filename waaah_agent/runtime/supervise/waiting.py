"""The loop's settings and bookkeeping: what its selector waits for on each fd, and its deadlines."""

from __future__ import annotations

import math
import select
import selectors
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Generic, TypeVar

from waaah_agent.adapters.base import ScreenRules

K = TypeVar("K", bound=Hashable)
_READ_FLAGS = select.POLLIN  # what the selectors module counts as "ready to read" ...
_WRITE_FLAGS = select.POLLOUT  # ... and "ready to write" (anything else: both)


FLUSH_EVERY = 1.0
REAP_EVERY = 0.02  # the PTY closed: look for the exit status this often ...
REAP_FOR = 2.0  # ... this long, then SIGKILL
REPAINT_AFTER = 0.05  # the menu closed: the agent sees one row less for this long, then its size


class Timer(Enum):
    """The loop's own deadlines (the machine keeps its own: ``Machine.next_due``)."""

    SCREEN = "screen"  # bring the screen model up to date and show it to the machine
    FLUSH = "flush"  # flush the logs a second after output
    REAP = "reap"  # the PTY closed: is the exit status there yet?
    TEND = "tend"  # the slow look at the agent's process tree (the caller's ``tend``)
    REPAINT = "repaint"  # give the agent its size back: it repaints what the menu covered
    HELD = "held"  # bytes of ours waited long enough for the agent's open sequence (overlay.HOLD_MAX)


@dataclass
class LoopConfig:
    rules: ScreenRules
    interactive: bool
    # The CLI waits for a terminal's answers to its queries: with no terminal attached, the
    # loop gives them (core/termanswers.py); on a terminal they come from it through the relay.
    answer_queries: bool = False


def local_now() -> datetime:
    return datetime.now().astimezone()


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
    wake-up it serves under a flood of output. :meth:`poll` asks the system's ``epoll`` (or
    ``poll``) directly: the selectors module's own bookkeeping per wake-up was a measurable part
    of the relay's CPU under a flood.
    """

    def __init__(self, sel: selectors.BaseSelector) -> None:
        self.sel = sel
        self.events: dict[int, int] = {}
        self._callbacks: dict[int, Callable[[int], None]] = {}
        # The selector's own epoll/poll object (EpollSelector, PollSelector), if it has one.
        raw = getattr(sel, "_selector", None)
        self._raw = raw if isinstance(sel, (selectors.EpollSelector, selectors.PollSelector)) else None
        self._ms = isinstance(sel, selectors.PollSelector)  # poll() takes milliseconds

    def poll(self, timeout: float | None) -> list[tuple[Callable[[int], None], int]]:
        """The callbacks whose fds are ready, each with the events it waits for that happened."""
        if self._raw is None:
            return [(key.data, mask) for key, mask in self.sel.select(timeout)]
        if self._ms:
            ready = self._raw.poll(None if timeout is None else math.ceil(timeout * 1000))
        else:
            ready = self._raw.poll(
                -1 if timeout is None else math.ceil(timeout * 1000) / 1000, max(1, len(self.events))
            )
        out = []
        for fd, flags in ready:
            # As the selectors module reads them: an error or hang-up is ready both ways.
            mask = (0 if not flags & ~_WRITE_FLAGS else selectors.EVENT_READ) | (
                0 if not flags & ~_READ_FLAGS else selectors.EVENT_WRITE
            )
            if (callback := self._callbacks.get(fd)) is not None and (mask := mask & self.events.get(fd, 0)):
                out.append((callback, mask))
        return out

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
        self._callbacks[fd] = callback
