"""Which moments of a night are worth a notification, and how many a bad night may send.

Pure: an event of ``events.jsonl`` (as its observers get it) in, an :class:`Alert` or None out;
:class:`RateLimit` decides on a clock what goes now and what is held back. runtime/alerts.py
sends them (apprise) off the relay's path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Alert:
    kind: str  # "gave-up", "login", "limit", "limit-over", "evicted", "stall"
    title: str
    body: str
    level: str = "warning"  # apprise's notify type: info, success, warning, failure


@dataclass(frozen=True)
class Where:
    """What every alert says besides what happened: the session and how to carry on."""

    agent: str
    session: str
    workspace: str
    resume: str  # the command that resumes the session


def alert_for(event: Mapping[str, Any], where: Where) -> Alert | None:
    name = event.get("event")
    agent = where.agent
    tail = f"\n\nWorkspace: {where.workspace}\nSession: {where.session}\nResume: {where.resume}"
    if name == "end" and event.get("reason") == "gave-up":
        why = f"{agent} kept stopping; the restart budget is spent: {event.get('detail', '')}"
        return Alert("gave-up", f"waaah: {agent} gave up", why + tail, "failure")
    if name == "end" and event.get("reason") == "budget":
        which = "cost" if "--max-cost" in str(event.get("detail", "")) else "token"
        text = f"{agent} reached its {which} budget and stopped after the task in hand: {event.get('detail', '')}"
        return Alert("budget", f"waaah: {agent} reached its {which} budget", text + tail, "failure")
    if name == "end" and event.get("reason") == "login":
        return Alert("login", f"waaah: {agent} needs a login", f"{event.get('detail', '')}" + tail, "failure")
    if name == "login-wait":
        text = f"{agent} shows its login screen; waaah waits for you to finish it at the terminal."
        return Alert("login", f"waaah: {agent} needs a login", text + tail)
    if name == "limit":
        text = f"{agent} reached a usage limit; waaah waits until {event.get('until', '?')}, then carries on."
        return Alert("limit", f"waaah: {agent} waits out a usage limit", text + tail, "info")
    if name == "limit-over":
        return Alert(
            "limit-over", f"waaah: {agent} back at work", "The usage-limit wait is over." + tail, "info"
        )
    if name == "stop" and event.get("reason") in ("evict", "restart"):
        text = f"The WAAAH server evicted {agent}: {event.get('detail', '')}"
        return Alert("evicted", f"waaah: {agent} evicted", text + tail)
    if name == "stall":
        text = f"{agent} made no progress for {event.get('minutes', '?')} minutes: waaah sent Esc (a restart follows if that does not help)."
        return Alert("stall", f"waaah: {agent} stalled", text + tail)
    return None


@dataclass
class RateLimit:
    """At most ``per_hour`` alerts an hour, and one of a kind per ``kind_gap`` seconds; what is
    held back is counted and said in the next one sent. An alert that ends a session
    (``gave-up``, a login at the end) always goes."""

    per_hour: int = 12
    kind_gap: float = 600.0
    sent: deque[float] = field(default_factory=deque)
    last_of_kind: dict[str, float] = field(default_factory=dict)
    held: int = 0

    def admit(self, alert: Alert, now: float) -> Alert | None:
        while self.sent and self.sent[0] <= now - 3600:
            self.sent.popleft()
        final = alert.level == "failure"
        last = self.last_of_kind.get(alert.kind)
        if not final and (
            len(self.sent) >= self.per_hour or (last is not None and now - last < self.kind_gap)
        ):
            self.held += 1
            return None
        self.sent.append(now)
        self.last_of_kind[alert.kind] = now
        if self.held:
            more = f"\n\n({self.held} more alert{'s' if self.held > 1 else ''} held back since the last one; see events.jsonl)"
            alert = Alert(alert.kind, alert.title, alert.body + more, alert.level)
            self.held = 0
        return alert
