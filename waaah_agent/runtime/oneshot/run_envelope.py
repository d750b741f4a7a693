"""What one `waaah run` reports: each attempt's record, the token figures of a resumed session,
and the envelope printed at the end (masked as the log is)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waaah_agent.core import failures as F
from waaah_agent.core.oneshot import outputs, present
from waaah_agent.core.oneshot.resilience import max_attempts
from waaah_agent.core.oneshot.streams import StreamSummary, Tokens
from waaah_agent.errors import run_exit_code
from waaah_agent.runtime.oneshot import run_reasoning, runlog

if TYPE_CHECKING:
    from waaah_agent.runtime.oneshot.run_attempts import Chain


@dataclass
class Attempt:
    agent: str
    session_id: str
    outcome: str  # "ok", an error type, or "skipped"
    exit_code: int | None = None
    duration_ms: int = 0
    error: str = ""
    waited_s: float = 0.0
    model_resolution: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "agent": self.agent,
            "session_id": self.session_id,
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "duration_ms": self.duration_ms,
        }
        if self.error:
            out["error"] = self.error
        if self.waited_s:
            out["waited_s"] = round(self.waited_s, 2)
        if self.model_resolution:
            out["model_resolution"] = self.model_resolution
        return out


def envelope(chain: Chain, error_type: F.ErrorType | None, error: str) -> dict[str, Any]:
    """The run's envelope from what its chain of attempts left."""
    agent, summary = chain.last if chain.last else (chain.tried[-1] if chain.tried else "", StreamSummary())
    last = next((a for a in reversed(chain.attempts) if a.outcome != "skipped"), None)
    skill = chain.opts.inputs.skill
    envelope: dict[str, Any] = {
        "version": present.ENVELOPE_VERSION,
        "ok": error_type is None,
        "response": summary.response if error_type is None else "",
        "session_id": summary.session_id or (last.session_id if last else ""),
        "reasoning": "",
        "tokens_used": {},
        "metadata": {},
        "model_resolution": chain.models[agent].text() if agent in chain.models else "",
        **({"skill": skill} if skill else {}),
        "agent": agent,
        "model": summary.model or chain.model_of(agent),
        "parent_id": None,
        "log_id": chain.log_id,
        "duration_ms": 0,
        "tokens": chain.tokens.to_json(),
        "tool_activity": summary.tools.to_json(),
        "attempts": [a.to_json() for a in chain.attempts],
        "fallback_chain": list(chain.tried),
        "used_fallback": any(a.agent != chain.primary and a.outcome != "skipped" for a in chain.attempts),
        "max_attempts": max_attempts(len(chain.chain), chain.opts.retry),
        "circuit_state": chain.breakers.state(agent, time.time()) if agent else "none",
        "stderr": outputs.stderr_tail(chain.last_stderr),
        "exit_code": 0,
    }
    if chain.budget:
        spent = chain.spent or chain.budget.spent(chain.tokens, chain.cost)
        envelope["budget"] = chain.budget.to_json(chain.tokens, chain.cost, spent)
        if spent and error_type is None:
            chain.warnings.append(f"the answer went over the run's budget ({spent})")
    if error_type is not None:
        outputs.add_error(envelope, error_type, chain.redact(error), run_exit_code(error_type))
    else:
        sid = envelope["session_id"]  # the reasoning: the stream's, else the CLI's session file's
        thought = run_reasoning.for_envelope(summary, agent, chain.env, chain.workspace, sid)
        outputs.add_fields(envelope, chain.tokens, summary.tools, *thought, agent=agent)
    # What is printed is masked as the log is: the answer may repeat a secret of the
    # environment (a model that read a file, a CLI that echoed a variable).
    masked: dict[str, Any] = chain.redact.value(envelope)  # type: ignore[assignment]
    return masked


def this_runs_tokens(
    log: runlog.RunLog, agent: str, summary: StreamSummary, resume: bool, earlier: Tokens | None
) -> None:
    """A CLI that reports its session's running total (codex) gets the total an earlier run
    of this log reported for the session taken off; without one the total stays, noted in
    the log."""
    if not (resume and summary.tokens_cumulative):
        return
    if earlier is None:
        log.write(
            "tokens_note",
            agent=agent,
            note="the CLI reports its session's running total and this log holds no earlier "
            "total of that session: the tokens include its earlier turns",
        )
        return
    summary.tokens = summary.tokens.since(earlier)


def session_total(path: Path, agent: str, session_id: str) -> Tokens | None:
    """The running token total that the last attempt logged in ``path`` with ``agent`` reported
    for ``session_id``, for CLIs whose usage is the session's running total (codex); else None."""
    found = None
    for name, summary in run_reasoning.replayed(path):  # in log order
        if name == agent and summary.tokens_cumulative and summary.session_id == session_id:
            found = summary.tokens
    return found
