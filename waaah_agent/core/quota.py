"""The last known usage limit of each CLI (pure): from `waaah run` results and supervised
sessions' ``limit`` events, the newest per CLI, and whether it still holds at ``now``.

Only a stated limit is a limit: a usage quota, a limit banner, or a rate limit that named its
reset time. A rate limit (a 429) that named none is a limit only when it came again
(:data:`REPEATS` in a row, each within :data:`UNKNOWN_RESET` of the one before): one 429 that
the CLI's own retry answered seconds later must not keep a healthy CLI out of routing for half
an hour."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

#: A limit that named no reset time is taken to hold this long after it was seen.
UNKNOWN_RESET = timedelta(minutes=30)
#: How many rate limits without a reset time in a row make a limit.
REPEATS = 2


@dataclass(frozen=True)
class LimitSeen:
    agent: str
    seen_at: datetime  # aware
    reset_at: datetime | None  # aware; None: the CLI named no reset time
    source: str  # "waaah run", "session <id>"
    stated: bool = True  # False: a rate limit (429) that named no reset time
    repeats: int = 1  # such rate limits in a row, this one included


def repeats_after(previous: LimitSeen | None, seen_at: datetime) -> int:
    """How many unstated rate limits in a row a new one at ``seen_at`` makes."""
    if previous is None or previous.stated or seen_at - previous.seen_at > UNKNOWN_RESET:
        return 1
    return previous.repeats + 1


def holds(limit: LimitSeen) -> bool:
    """Whether ``limit`` counts as a usage limit at all (see the module's docstring)."""
    return limit.stated or limit.reset_at is not None or limit.repeats >= REPEATS


def latest(seen: Iterable[LimitSeen]) -> dict[str, LimitSeen]:
    """The newest limit seen per CLI."""
    out: dict[str, LimitSeen] = {}
    for limit in seen:
        known = out.get(limit.agent)
        if known is None or limit.seen_at > known.seen_at:
            out[limit.agent] = limit
    return out


def state(limit: LimitSeen | None, now: datetime) -> dict[str, Any]:
    """``{"state": "ok" | "limited", "reset_at", "seen_at", "source", "resets_in_s"}``: limited
    while the reset time (or, when none was named, 30 minutes after it was seen) is ahead."""
    if limit is None:
        return {"state": "ok", "reset_at": None, "seen_at": None, "source": None, "resets_in_s": None}
    until = limit.reset_at or (limit.seen_at + UNKNOWN_RESET)
    ahead = (until - now).total_seconds() if holds(limit) else 0.0
    found = {
        "state": "limited" if ahead > 0 else "ok",
        "reset_at": limit.reset_at.isoformat(timespec="seconds") if limit.reset_at else None,
        "seen_at": limit.seen_at.isoformat(timespec="seconds"),
        "source": limit.source,
        "resets_in_s": max(0, int(ahead)) if ahead > 0 else None,
    }
    if not holds(limit):
        found["note"] = "one rate limit (429) without a reset time: not taken as a usage limit"
    return found


def until(found: dict[str, Any]) -> str:
    """When the limit of a :func:`state` ends: its reset time, else the one assumed for it."""
    if found["reset_at"] or not found["seen_at"]:
        return str(found["reset_at"] or "")
    assumed = datetime.fromisoformat(found["seen_at"]) + UNKNOWN_RESET
    minutes = int(UNKNOWN_RESET.total_seconds() // 60)
    return f"{assumed.isoformat(timespec='seconds')} (no reset time given: {minutes} minutes assumed)"


def line(agent: str, found: dict[str, Any]) -> str:
    """One line of `waaah quota`."""
    if found["seen_at"] is None:
        return f"{agent}: ok (no usage limit seen)"
    if found.get("note"):
        return f"{agent}: ok ({found['note']}, seen {found['seen_at']} by {found['source']})"
    reset = until(found)
    if found["state"] == "limited":
        return f"{agent}: LIMITED until {reset} (seen {found['seen_at']} by {found['source']})"
    return f"{agent}: ok (last limit seen {found['seen_at']} by {found['source']}, reset {reset})"
