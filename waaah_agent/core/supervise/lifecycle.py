"""Decisions between two runs of the agent: the first prompt, restart or not, the final status.

Pure, like the machine that decides within a run (``core/machine.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from waaah_agent.core.failures import rejected_arguments
from waaah_agent.core.supervise.backoff import RestartDecision, Restarts
from waaah_agent.core.supervise.delivery import Delivery
from waaah_agent.core.supervise.events import Outcome, StopReason
from waaah_agent.core.supervise.policy import CONTINUE_PROMPT


class SessionStatus(str, Enum):
    """``status`` in session.json."""

    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    LOGIN_REQUIRED = "login-required"
    FAILED = "failed"  # the restart budget was spent
    EVICTED = "evicted"
    EXITED = "exited"  # the agent exited on its own
    STOPPED = "stopped"  # the user, a signal or the terminal ended it


@dataclass(frozen=True)
class FirstPrompt:
    delivery: Delivery | None  # None: nothing to type first (a continue prompt held by a pause)
    why: str
    settled: bool = False  # an unconfirmed workflow delivery was found in the transcript


def first_prompt(
    workflow_text: str,
    enter_delay: float,
    *,
    native_resume: bool,
    workflow_delivered: bool,
    workflow_pending: bool,
    transcript_has_workflow: bool | None,
    paused: bool = False,
) -> FirstPrompt:
    """The prompt a start of the agent begins with.

    A fresh conversation gets the workflow. A resumed one that already has it gets the
    continue prompt, unless `waaah pause` holds the nudges (a pause outlives restarts and
    resumes: `waaah unpause` sends it). A workflow that was typed but never confirmed (the
    supervisor died in between) is settled from the CLI's own transcript: there, it was
    delivered; not there (or no transcript to tell), it is typed again.
    """
    workflow = Delivery("workflow", workflow_text, enter_delay=enter_delay)

    def carry_on(why: str, settled: bool = False) -> FirstPrompt:
        if paused:
            return FirstPrompt(None, f"{why}; the continue prompt waits for waaah unpause", settled)
        return FirstPrompt(Delivery("continue", CONTINUE_PROMPT, enter_delay=enter_delay), why, settled)

    if not native_resume:
        return FirstPrompt(workflow, "a new conversation")
    if workflow_delivered:
        return carry_on("resumed; workflow delivered")
    if workflow_pending and transcript_has_workflow:
        return carry_on("resumed; the workflow typed before the last stop is in the transcript", settled=True)
    return FirstPrompt(workflow, "resumed; the workflow never arrived")


def rejected_command_line(outcome: Outcome, output: Iterable[str]) -> str | None:
    """The CLI's own line when it exited with an error before ever showing its prompt because it
    refused its command line (an unknown option: an older release, a wrong argument after `--`):
    a configuration error to report, never a crash to restart."""
    failed = outcome.status is not None and not outcome.status.ok
    if outcome.reason is not StopReason.AGENT_EXIT or not failed or outcome.reached_prompt:
        return None
    return rejected_arguments("\n".join(output))


def restart_decision(outcome: Outcome, restarts: Restarts, now: float, rand: float) -> RestartDecision | None:
    """None when the run ended for good; else whether (and when) to start the agent again."""
    crashed = outcome.reason is StopReason.AGENT_EXIT and (outcome.status is None or not outcome.status.ok)
    if not crashed and outcome.reason not in (StopReason.STALLED, StopReason.RESTART):
        return None  # a clean exit (the user's own /quit), a stop, a login, an eviction
    return restarts.on_exit(now, rand)


def final_status(reason: StopReason) -> SessionStatus:
    return {
        StopReason.LOGIN: SessionStatus.LOGIN_REQUIRED,
        StopReason.GAVE_UP: SessionStatus.FAILED,
        StopReason.REJECTED: SessionStatus.FAILED,
        StopReason.EVICT: SessionStatus.EVICTED,
        StopReason.AGENT_EXIT: SessionStatus.EXITED,
    }.get(reason, SessionStatus.STOPPED)
