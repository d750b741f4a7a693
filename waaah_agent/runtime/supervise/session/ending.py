"""How a session ends: the restart notice between runs, the final status, the lines the user reads.

Also the user's side of the supervisor (``Console``): what it says outside the agent's screen.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waaah_agent import settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core.supervise.backoff import RestartDecision
from waaah_agent.core.supervise.events import EventKind, Outcome, StopReason
from waaah_agent.core.supervise.lifecycle import SessionStatus, final_status
from waaah_agent.errors import AgentFailed, BudgetReached, LoginRequired, RestartBudgetExhausted, UsageError
from waaah_agent.runtime.store import CorruptSession, SessionDir, SessionState
from waaah_agent.runtime.supervise.logs import SessionLogs
from waaah_agent.runtime.supervise.signals import wait_interruptibly


@dataclass
class Console:
    """Where the supervisor talks to the user outside the agent's screen."""

    interactive: bool
    ask: Callable[[str], str]
    say: Callable[[str], None]
    events_as_json: bool = False  # headless --log-format json: each event printed as its record


def _short(value: Any, size: int = 160) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= size else text[: size - 1] + "…"


def _detail(e: dict[str, Any]) -> str | None:
    """The short detail of an event a person reading a headless log wants, else None."""
    name = e.get("event")
    if name == EventKind.START:
        how = "resumed" if e.get("native_resume") else "fresh"
        return f"pid {e.get('pid')} ({how}); session {e.get('session')}; log {e.get('log')}"
    if name == EventKind.STATE:
        return f"{e.get('previous')} -> {e.get('state')}"
    if name == EventKind.DELIVERY:
        phase = e.get("phase")
        return f"{e.get('kind')} prompt {phase}" if phase in ("confirmed", "failed") else None
    if name == EventKind.NUDGE:
        return f"{e.get('kind')} prompt ({e.get('reason')})"
    if name == EventKind.RESTART:
        return f"after {e.get('after')}; in {e.get('delay')}s ({e.get('reason')})"
    if name == EventKind.STALL:
        return f"{e.get('action')} after {e.get('minutes')} min busy with no change"
    if name == EventKind.LIMIT:
        return f"usage limit until {e.get('until')}"
    if name in (EventKind.LIMIT_OVER, EventKind.LIMIT_RESUME):
        return "the usage limit is over"
    if name == EventKind.LIMIT_IGNORED:
        return f"a saved limit ({e.get('until')}) is {e.get('why')}"
    if name in (EventKind.STOP, EventKind.END):
        return ", ".join(str(e[k]) for k in ("reason", "detail", "exit") if e.get(k))
    if name == EventKind.KILL:
        return f"SIGKILL after {e.get('after_seconds')}s"
    if name == EventKind.SERVER:
        return f"{e.get('url')} {'reachable' if e.get('ok') else e.get('detail')}"
    if name == EventKind.AGENT_STATUS:
        return f"{e.get('status')}"
    if name == EventKind.TOKENS:
        return tokens_line(e)
    if name in (EventKind.LEFTOVERS, EventKind.DESCENDANTS_ENDED):
        return f"pids {e.get('pids')}"
    if name == EventKind.WORKFLOW_SETTLED:
        return f"delivered={e.get('delivered')} ({e.get('why')})"
    if name == EventKind.SECRET_ENTRY:
        return "input hidden" if e.get("shown") else "input shown again"
    if name == EventKind.MCP_TOOL_END and e.get("outcome") in ("task", "evict", "error"):
        extra = e.get("task_id") or e.get("evict_action") or e.get("error") or ""
        return f"{e.get('tool')} {e.get('outcome')} {extra}".rstrip()
    return None


def headless_line(event: dict[str, Any]) -> str | None:
    """One line for a person reading a headless (nohup) log, or None for an event that is not
    one (screen readings, hooks, every tool call): ``[waaah] <ISO time> <event>: <detail>``.
    ``event`` is the record as written to events.jsonl, secrets already masked."""
    detail = _detail(event)
    if detail is None:
        return None
    return f"[waaah] {event.get('ts')} {event.get('event')}: {_short(detail)}"


def tokens_line(tokens: Mapping[str, Any]) -> str:
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
    session.event(EventKind.RESTART, after=why, delay=round(decision.delay, 2), reason=decision.reason)
    message = f"{adapter.name} stopped ({why}); restarting in {decision.delay:.1f}s ({decision.reason})"
    logs.notice(message)
    if console.interactive:  # also in the terminal title, where a glance at the tmux pane finds it
        console.say(f"\x1b]0;waaah: restarting {adapter.name} ({state.restarts} so far)\x07")
    if not console.interactive:  # headless, the restart event is the line (headless_line)
        return wait_interruptibly(decision.delay, None)
    # One row, never wrapped, so that it can be taken back exactly before the agent draws again.
    width = shutil.get_terminal_size((80, 24)).columns
    console.say("\r\x1b[2K" + _short(f"[waaah] {message}; Ctrl+C to stop", max(10, width - 1)))
    interrupted = wait_interruptibly(decision.delay, sys.stdin.fileno())
    if interrupted is None:  # the restarted agent's screen holds only the agent's output
        console.say("\r\x1b[2K")
    return interrupted


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
        EventKind.END,
        reason=outcome.reason.value,
        detail=outcome.detail,
        exit=status.describe() if status else None,
    )
    if adapter.tokens is not None:
        console.say(
            f"Tokens this session: {tokens_line(state.tokens)} (from {adapter.name}'s own transcript)"
        )
    if outcome.reason is StopReason.LOGIN:
        raise LoginRequired(outcome.detail)
    if outcome.reason is StopReason.REJECTED:
        tested = f" {adapter.tested_version}" if adapter.tested_version else ""
        raise UsageError(
            f"{adapter.name} refused its command line: {outcome.detail} (started as: {shlex.join(state.argv)}). "
            f"Check the arguments given after `--`; an older {adapter.name} than the one waaah is tested "
            f"with{tested} lacks options waaah passes: update it with {adapter.install_hint}. {kept}"
        )
    if outcome.reason is StopReason.BUDGET:
        raise BudgetReached(
            f"{adapter.name} reached its {'cost' if '--max-cost' in outcome.detail else 'token'} budget ({outcome.detail}) and stopped after the task in hand. {kept}"
        )
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
    """The command that resumes the session, as it runs when pasted into the user's shell.

    ``waaah`` when that name runs this very program, else its full path (a newcomer's waaah is in
    the checkout's .venv, not on PATH); started by `make run`, the make form is offered too.
    """
    me = waaah_command()
    parts = [me, "agent", f"--start={state.agent}", f"--as={state.workflow}", "--resume"]
    if Path(state.workspace) != Path.cwd().resolve():
        parts += ["--workspace", state.workspace]
    command = shlex.join(parts)
    if os.environ.get(settings.VIA_MAKE) and Path(state.workspace) == Path.cwd().resolve():
        command += " (or: make run ARGS=--resume)"
    return command


def waaah_command() -> str:
    """How the user's shell reaches this waaah: ``waaah`` when that is on PATH, else its full path."""
    here = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    on_path = shutil.which("waaah")
    if here is None or here.name != "waaah" or (on_path and Path(on_path).resolve() == here):
        return "waaah"
    return str(here)
