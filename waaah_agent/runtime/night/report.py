"""`waaah sessions` and `waaah status`: what each supervised session is doing, from its files."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from waaah_agent.core.nesting import loads_json
from waaah_agent.core.printable import one_line
from waaah_agent.runtime import reaper
from waaah_agent.runtime.locks import is_live
from waaah_agent.runtime.mcp import homes
from waaah_agent.runtime.private import check_state
from waaah_agent.runtime.store import SessionState, SessionStore, event_time
from waaah_agent.runtime.workspace import git_root
from waaah_agent.safe_read import read_tail


@dataclass(frozen=True)
class SessionReport:
    id: str
    agent: str
    workflow: str
    status: str
    live: bool  # a supervisor holds the session's lock right now
    agent_state: str  # the last state the detector recorded
    last_activity: str  # time of the last event
    restarts: int
    tokens: dict[str, int]
    native_session_id: str
    log_path: str
    last_event: str
    limit_until: str  # a usage limit being waited out, if any
    next_heartbeat: str
    server_down: str  # live and the WAAAH server unreachable: why and since when
    leftovers: list[dict[str, Any]]  # processes it started that outlived its killed supervisor
    created: str = ""
    ended: str = ""
    end_reason: str = ""
    nudges: int = 0
    first_prompt: str = ""
    first_task: str = ""
    homes: list[str] = field(default_factory=list)  # its per-run homes left behind (runtime/homes.py)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def last_events(path: Path, limit: int = 200) -> list[dict[str, Any]]:
    try:  # a FIFO, a device or a link in its place must not hang `waaah status`
        lines = read_tail(path, 64 * 1024, follow=False).splitlines()[-limit:]
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(loads_json(line))
        except ValueError:
            continue
    return out


def reports_for(folder: Path) -> list[SessionReport]:
    """The sessions of the workspace ``folder`` is in (its git root, else itself)."""
    start = folder.resolve()
    workspace = git_root(start) or start
    check_state(workspace / ".waaah")  # someone else's state: one line, nothing of it shown
    return reports(workspace)


def reports(workspace: Path) -> list[SessionReport]:
    store = SessionStore(workspace / ".waaah" / "sessions")
    found = []
    left = homes.leftovers(os.environ)  # the per-run homes of this user no supervisor holds
    for state in store.all_states():
        folder = store.root / state.id
        events = last_events(folder / "events.jsonl")
        states = [e for e in events if e.get("event") == "state"]
        last = events[-1] if events else {}
        live = is_live(folder)
        found.append(
            SessionReport(
                id=state.id,
                agent=state.agent,
                workflow=state.workflow,
                status=state.status if live or state.status != "running" else "supervisor gone",
                live=live,
                agent_state=str(states[-1].get("state")) if states else "unknown",
                last_activity=_when(last.get("ts")),
                restarts=state.restarts,
                tokens=dict(state.tokens),
                native_session_id=state.native_session_id,
                log_path=state.log_path,
                last_event=_describe(last),
                limit_until=state.limit_until,
                next_heartbeat=state.next_heartbeat if live and not state.server_down else "",
                server_down=f"{state.server_down} (since {state.server_down_since})"
                if live and state.server_down
                else "",
                leftovers=leftovers_of(state, live),
                created=state.created,
                ended="" if live else state.ended,
                end_reason="" if live else state.end_reason,
                nudges=state.nudges,
                first_prompt=state.first_prompt,
                first_task=state.first_task,
                homes=[] if live else [str(h.path) for h in left if h.session == state.id],
            )
        )
    return sorted(found, key=lambda r: r.last_activity, reverse=True)


def leftovers_of(state: SessionState, live: bool) -> list[dict[str, Any]]:
    """What a killed supervisor of this session left running, each still the same process (pid
    and start time): a pid now used by another process is not reported. While a supervisor is
    live, its own processes are its business; only an earlier one's leftovers count."""
    return reaper.still_running(state.leftovers if live else [*state.processes, *state.leftovers])


def leftover_line(session_id: str, records: list[dict[str, Any]]) -> str:
    return (
        f"warning: still running after the supervisor of session {session_id} was killed: "
        f"{reaper.describe(records)}; stop them with: {reaper.kill_command(records)}"
    )


def _when(ts: Any) -> str:
    """An event's time for people (to the second); old files' epoch floats read too."""
    when = event_time(ts)
    return when.isoformat(timespec="seconds") if when is not None else ""


def _describe(event: dict[str, Any]) -> str:
    if not event:
        return ""
    details = ", ".join(f"{k}={v}" for k, v in event.items() if k not in ("ts", "event", "evidence", "argv"))
    return f"{event.get('event')}: {details}"[:120]


def table(rows: list[SessionReport]) -> str:
    """One line per session; what came from its files is shown, never acted on (one_line)."""
    if not rows:
        return "no sessions in this workspace"
    lines = [
        f"{'SESSION':<38} {'AGENT':<9} {'STATUS':<16} {'STATE':<9} {'RESTARTS':>8} {'TOKENS in/out':>16}  LAST ACTIVITY"
    ]
    for r in rows:
        tokens = f"{r.tokens.get('input', 0)}/{r.tokens.get('output', 0)}"
        status = f"{r.status}{' (live)' if r.live else ''}"
        lines.append(
            one_line(
                f"{r.id:<38} {r.agent:<9} {status:<16} {r.agent_state:<9} {r.restarts:>8} {tokens:>16}  {r.last_activity}"
            )
        )
    return "\n".join(lines)


def detail(r: SessionReport) -> str:
    return "\n".join(
        one_line(line)
        for line in [
            f"session      {r.id} ({'live' if r.live else 'not running'})",
            f"agent        {r.agent} (its own session id {r.native_session_id})",
            f"status       {r.status}; screen state {r.agent_state}",
            f"started      {r.created}" + (f"; ended {r.ended} ({r.end_reason})" if r.ended else ""),
            f"restarts     {r.restarts}; nudges {r.nudges}",
            *([f"usage limit  waiting until {r.limit_until}"] if r.limit_until else []),
            *([f"heartbeat    next at {r.next_heartbeat} if it stays idle"] if r.next_heartbeat else []),
            *(
                [f"server       waiting for the WAAAH server: {r.server_down}; continue prompts held"]
                if r.server_down
                else []
            ),
            f"tokens       input {r.tokens.get('input', 0):,}, output {r.tokens.get('output', 0):,}, "
            f"cached {r.tokens.get('cached', 0):,}",
            f"last event   {r.last_activity} {r.last_event}",
            f"log          {r.log_path}",
            *(
                f"kept home    {home}: what {r.agent} wrote there is not all carried back; "
                f"{homes.SETTLE_COMMAND} carries it back"
                for home in r.homes
            ),
            *(
                [
                    f"leftovers    still running after its supervisor was killed: {reaper.describe(r.leftovers)}",
                    f"             stop them with: {reaper.kill_command(r.leftovers)}",
                ]
                if r.leftovers
                else []
            ),
        ]
    )
