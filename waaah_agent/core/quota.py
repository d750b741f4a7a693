"""The last known usage limit of each CLI (pure): from `waaah run` results and supervised
sessions' ``limit`` events, the newest per CLI, and whether it still holds at ``now``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

#: A limit that named no reset time is taken to hold this long after it was seen.
UNKNOWN_RESET = timedelta(minutes=30)


@dataclass(frozen=True)
class LimitSeen:
    agent: str
    seen_at: datetime  # aware
    reset_at: datetime | None  # aware; None: the CLI named no reset time
    source: str  # "waaah run", "session <id>"


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
    ahead = (until - now).total_seconds()
    return {
        "state": "limited" if ahead > 0 else "ok",
        "reset_at": limit.reset_at.isoformat(timespec="seconds") if limit.reset_at else None,
        "seen_at": limit.seen_at.isoformat(timespec="seconds"),
        "source": limit.source,
        "resets_in_s": max(0, int(ahead)) if ahead > 0 else None,
    }


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
    reset = until(found)
    if found["state"] == "limited":
        return f"{agent}: LIMITED until {reset} (seen {found['seen_at']} by {found['source']})"
    return f"{agent}: ok (last limit seen {found['seen_at']} by {found['source']}, reset {reset})"
