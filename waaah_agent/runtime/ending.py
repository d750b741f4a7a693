"""How a session ends: the restart notice between runs, the final status, the lines the user reads.

Also the user's side of the supervisor (``Console``): what it says outside the agent's screen.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from waaah_agent.adapters.base import Adapter
from waaah_agent.core.backoff import RestartDecision
from waaah_agent.core.events import Outcome, StopReason
from waaah_agent.core.lifecycle import SessionStatus, final_status
from waaah_agent.errors import AgentFailed, LoginRequired, RestartBudgetExhausted
from waaah_agent.runtime.logs import SessionLogs
from waaah_agent.runtime.signals import wait_interruptibly
from waaah_agent.runtime.store import CorruptSession, SessionDir, SessionState


@dataclass
class Console:
    """Where the supervisor talks to the user outside the agent's screen."""

    interactive: bool
    ask: Callable[[str], str]
    say: Callable[[str], None]


def tokens_line(tokens: dict[str, int]) -> str:
    return f"input {tokens.get('input', 0):,}, output {tokens.get('output', 0):,}, cached {tokens.get('cached', 0):,}"


def announce_and_wait(
    adapter: Adapter,
    outcome: Outcome,
    decision: RestartDecision,
    state: SessionState,
    session: SessionDir,
    logs: SessionLogs,
    console: Console,
) -> str | None:
    """Record the restart, say so, and wait out the backoff; return why the wait was cut short."""
    why = outcome.detail or (outcome.status.describe() if outcome.status else "it vanished")
    state.restarts += 1
    state.status = SessionStatus.RESTARTING.value
    session.save(state)
    session.event("restart", after=why, delay=round(decision.delay, 2), reason=decision.reason)
    message = f"{adapter.name} stopped ({why}); restarting in {decision.delay:.1f}s ({decision.reason})"
    logs.notice(message)
    if console.interactive:  # also in the terminal title, where a glance at the tmux pane finds it
        console.say(f"\x1b]0;waaah: restarting {adapter.name} ({state.restarts} so far)\x07")
    console.say(f"\r[waaah] {message}; Ctrl+C to stop" if console.interactive else f"[waaah] {message}")
    return wait_interruptibly(decision.delay, sys.stdin.fileno() if console.interactive else None)


def finish(
    outcome: Outcome,
    adapter: Adapter,
    state: SessionState,
    session: SessionDir,
    console: Console,
) -> int:
    status = outcome.status
    state.exit_code = status.code if status else None
    state.status = final_status(outcome.reason).value
    saved = session.save(state)
    kept = saved_line(saved, state, session)
    session.event(
        "end", reason=outcome.reason.value, detail=outcome.detail, exit=status.describe() if status else None
    )
    if adapter.tokens is not None:
        console.say(
            f"Tokens this session: {tokens_line(state.tokens)} (from {adapter.name}'s own transcript)"
        )
    if outcome.reason is StopReason.LOGIN:
        raise LoginRequired(outcome.detail)
    if outcome.reason is StopReason.GAVE_UP:
        how = outcome.status.describe() if outcome.status else "an unknown status"
        raise RestartBudgetExhausted(
            f"{adapter.name} keeps stopping (last: {how}); {outcome.detail}. See {state.log_path}. {kept}"
        )
    if outcome.reason is StopReason.AGENT_EXIT:
        how = status.describe() if status else "an unknown status"
        if status is None or not status.ok:
            raise AgentFailed(f"{adapter.name} exited with {how}. {kept}")
        console.say(f"{adapter.name} exited ({how}). {kept}")
        return 0
    console.say(f"Stopped ({outcome.detail}). {kept}")
    return 0


def saved_line(saved: bool, state: SessionState, session: SessionDir) -> str:
    """ "Session X saved. Resume with: ..." only when it was saved and can be loaded back."""
    if saved:
        try:
            session.load()
        except (OSError, CorruptSession) as err:
            return f"Session {state.id} was saved but cannot be read back ({err}); it cannot be resumed."
        return f"Session {state.id} saved. Resume with: {resume_command(state)}"
    return (
        f"Session {state.id} could NOT be saved to {session.state_file} (see the warning above); "
        "its last saved state is older, so a --resume may repeat work."
    )


def resume_command(state: SessionState) -> str:
    parts = ["waaah", "agent", f"--start={state.agent}", f"--as={state.workflow}", "--resume"]
    if Path(state.workspace) != Path.cwd().resolve():
        parts += ["--workspace", state.workspace]
    return shlex.join(parts)
