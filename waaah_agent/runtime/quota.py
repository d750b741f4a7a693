"""The quota state of each CLI (`waaah quota`, `waaah doctor --json`): the last usage limit a
`waaah run` met (``quota/<cli>.json`` in the user's state folder, written when a run is rate
limited) or a supervised session of the workspace recorded (its ``limit`` events and the limit
its ``session.json`` is waiting out). No model is called."""

from __future__ import annotations

import contextlib
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent.core import quota as Q
from waaah_agent.core.nesting import loads_json
from waaah_agent.runtime.night.report import last_events
from waaah_agent.runtime.oneshot.breakers import state_dir
from waaah_agent.runtime.private import untrusted
from waaah_agent.runtime.store import SessionStore, atomic_write, event_time
from waaah_agent.safe_read import read_capped

QUOTA_CAP = 16 * 1024
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,40}$")


def folder() -> Path:
    return state_dir() / "quota"


def record(
    agent: str, reset_at: datetime | None, seen_at: datetime, source: str, stated: bool = True
) -> None:
    """Note that ``agent`` hit a usage limit (an ``OSError`` when the state folder cannot hold
    it); ``stated=False``: a rate limit that named no reset time (core/quota.py counts those)."""
    if not _NAME.match(agent):
        return
    where = folder()
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "seen_at": seen_at.isoformat(timespec="seconds"),
        "reset_at": reset_at.isoformat(timespec="seconds") if reset_at else None,
        "source": source,
    }
    if not stated and reset_at is None:
        data["stated"] = False
        data["repeats"] = Q.repeats_after(from_runs(agent), seen_at)
    atomic_write(where / f"{agent}.json", json.dumps(data) + "\n", 0o600)


def answered(agent: str) -> None:
    """``agent`` answered: a rate limit without a reset time noted before is over (a stated
    limit stays until its time)."""
    seen = from_runs(agent)
    if seen is not None and not seen.stated and _NAME.match(agent):
        with contextlib.suppress(OSError):
            (folder() / f"{agent}.json").unlink()


def from_runs(agent: str) -> Q.LimitSeen | None:
    """What `waaah run` last noted for ``agent``; whatever else is in the file counts as nothing."""
    if untrusted(folder()) or untrusted(folder() / f"{agent}.json"):
        return None  # someone else's (or anyone's) note: not used
    with contextlib.suppress(OSError, ValueError):
        data = loads_json(read_capped(folder() / f"{agent}.json", QUOTA_CAP, follow=False))
        if isinstance(data, dict):
            seen, reset = event_time(data.get("seen_at")), data.get("reset_at")
            reset_at = event_time(reset) if reset is not None else None
            if seen is not None and (reset is None or reset_at is not None):
                stated = data.get("stated") is not False
                repeats = data.get("repeats")
                count = repeats if isinstance(repeats, int) and not isinstance(repeats, bool) else 1
                source = str(data.get("source") or "waaah run")[:80]
                return Q.LimitSeen(agent, seen, reset_at, source, stated, max(1, min(count, 1000)))
    return None


def from_sessions(workspace: Path) -> list[Q.LimitSeen]:
    """The usage limits the supervised sessions of ``workspace`` recorded (the tail of each
    session's events, and the limit a session is waiting out)."""
    found: list[Q.LimitSeen] = []
    store = SessionStore(workspace / ".waaah" / "sessions")
    for state in store.all_states():
        source = f"session {state.id}"
        for event in last_events(store.root / state.id / "events.jsonl"):
            seen = event_time(event.get("ts"))
            if event.get("event") == "limit" and seen is not None:
                found.append(Q.LimitSeen(state.agent, seen, event_time(event.get("until")), source))
        waiting = event_time(state.limit_until) if state.limit_until else None
        if waiting is not None and not any(f.source == source for f in found):
            found.append(Q.LimitSeen(state.agent, waiting, waiting, source))
    return found


def states(agents: list[str], workspace: Path, now: datetime) -> dict[str, dict[str, Any]]:
    """Per CLI (``agents`` and those of the workspace's sessions): the newest limit known and
    whether it still holds."""
    seen = [s for s in (from_runs(a) for a in agents) if s is not None]
    sessions = from_sessions(workspace)
    newest = Q.latest([*seen, *sessions])
    names = dict.fromkeys([*agents, *(s.agent for s in sessions)])  # the demo agent's sessions too
    return {agent: Q.state(newest.get(agent), now) for agent in names}
