"""What the supervisor does next, decided from what it knows now. Pure: time is an argument.

Nudges (the continue-the-loop prompt and the heartbeat) are typed only into an agent that sits
at an empty input prompt, outside any wait_for_prompt call, with no human typing lately. A
nudge the agent ignores makes the next one wait twice as long (up to a cap), so an agent that
keeps ending its turn is not flooded; a wait_for_prompt call resets that.

A bare "continue" loses the task once the agent lost its instructions: after the CLI compacted
its conversation, or after :data:`WORKFLOW_AGAIN_AFTER` continue prompts in a row went
unanswered, the next prompt is the workflow itself again (:func:`workflow_again`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from waaah_agent.core.supervise.detect import AgentState, fingerprint

__all__ = [
    "CONTINUE_PROMPT",
    "WORKFLOW_AGAIN_AFTER",
    "HEARTBEAT_PROMPT",
    "Now",
    "NudgeKind",
    "Nudger",
    "PolicyConfig",
    "StallVerdict",
    "StallWatch",
    "fingerprint",
]

CONTINUE_PROMPT = (
    "Continue the WAAAH workflow loop: call the waaah tool wait_for_prompt now (timeout 290) and keep "
    "serving tasks. Never end your turn without calling wait_for_prompt."
)
HEARTBEAT_PROMPT = (
    "Heartbeat from the supervisor: you have been idle at the prompt. If you are not inside "
    "wait_for_prompt, call it now and keep looping."
)


#: Continue prompts in a row without a wait_for_prompt after which the workflow is sent again.
WORKFLOW_AGAIN_AFTER = 2


def workflow_again(workflow: str, why: str) -> str:
    """The workflow sent again, saying why first (the agent may have lost it)."""
    return (
        f"The supervisor sends your workflow again ({why}). Read it as your instructions for this "
        "session: take up its role and its loop, and call the waaah tool wait_for_prompt.\n\n"
        f"{workflow}"
    )


class NudgeKind(str, Enum):
    CONTINUE = "continue"  # the turn ended outside wait_for_prompt
    HEARTBEAT = "heartbeat"  # idle at the prompt for too long


class StallVerdict(str, Enum):
    ESC = "esc"  # busy with nothing changing for too long: interrupt
    RESTART = "restart"  # still stuck after Esc


@dataclass(frozen=True)
class PolicyConfig:
    heartbeat: float = 120.0  # idle at the prompt this long: heartbeat prompt
    settle: float = 2.0  # a turn must have ended this long ago before a continue prompt
    continue_gap: float = 10.0  # first spacing between nudges; doubles while ignored
    continue_gap_max: float = 600.0
    human_grace: float = 60.0  # no nudge this long after the user typed
    stall_timeout: float = 900.0  # busy with an unchanged screen this long: Esc
    stall_grace: float = 30.0  # still stalled this long after Esc: restart
    wait_timeout: float = 330.0  # a wait_for_prompt call is exempt from stalls this long (the
    # server caps a wait at 300 s; the rest is the call's way there and back)


@dataclass(frozen=True)
class Now:
    """What the loop knows at one moment."""

    time: float
    state: AgentState
    input_empty: bool
    wait_in_flight: bool  # a wait_for_prompt call is running (MCP tap)
    last_activity: float  # last output from the agent or input from the user
    last_user_input: float | None
    workflow_delivered: bool
    delivering: bool


class Nudger:
    """Chooses when to type the continue prompt or the heartbeat."""

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self.gap = config.continue_gap
        self.last_nudge: float | None = None
        self.last_turn_end: float | None = None
        self.continues = 0  # continue prompts since the agent last called wait_for_prompt

    def saw_wait(self) -> None:
        """The agent called wait_for_prompt: it is in its loop; nudges start afresh."""
        self.gap = self.config.continue_gap
        self.continues = 0

    def ignored_continues(self) -> int:
        """Continue prompts in a row before the one just decided that brought no wait_for_prompt."""
        return max(0, self.continues - 1)

    def turn_ended(self, now: float) -> None:
        self.last_turn_end = now

    def may_type(self, now: Now) -> bool:
        """Could a prompt be typed now: after the workflow, nothing in flight, an empty box at
        an idle prompt, and nobody typing lately?"""
        if not now.workflow_delivered or now.delivering or now.wait_in_flight:
            return False
        if now.state is not AgentState.READY or not now.input_empty:
            return False  # busy, a dialog, or a human's draft in the box: never type
        grace = self.config.human_grace
        return now.last_user_input is None or now.time >= now.last_user_input + grace

    def sent(self, now: float) -> None:
        """A prompt toward the loop went out for a reason of its own (the server came back):
        the spacing starts afresh from it."""
        self.gap, self.last_nudge = self.config.continue_gap, now

    def decide(self, now: Now) -> NudgeKind | None:
        cfg = self.config
        if not self.may_type(now):
            return None
        # Sums, never differences: the time next_check names is then exactly the time it is due.
        t, last = now.time, self.last_nudge
        if t >= now.last_activity + cfg.heartbeat and (
            last is None or t >= last + max(cfg.heartbeat, self.gap)
        ):
            return self._nudge(t, NudgeKind.HEARTBEAT)
        ended = self.last_turn_end
        turn_fresh = ended is not None and (last is None or ended > last)
        if turn_fresh and t >= now.last_activity + cfg.settle and (last is None or t >= last + self.gap):
            return self._nudge(t, NudgeKind.CONTINUE)
        return None

    def next_check(self, now: Now) -> float:
        """When :meth:`decide` could next say something, if nothing else happens."""
        cfg = self.config
        candidates = [now.last_activity + cfg.heartbeat, now.last_activity + cfg.settle]
        if self.last_nudge is not None:
            candidates += [self.last_nudge + self.gap, self.last_nudge + max(cfg.heartbeat, self.gap)]
        if now.last_user_input is not None:
            candidates.append(now.last_user_input + cfg.human_grace)
        future = [t for t in candidates if t > now.time]
        return min(future) if future else now.time + cfg.heartbeat

    def next_heartbeat(self, now: Now) -> float:
        """When the heartbeat is due if the agent stays idle at the prompt."""
        due = now.last_activity + self.config.heartbeat
        if self.last_nudge is not None:
            due = max(due, self.last_nudge + max(self.config.heartbeat, self.gap))
        return due

    def _nudge(self, now: float, kind: NudgeKind) -> NudgeKind:
        if self.last_nudge is not None:  # the previous nudge did not bring a wait_for_prompt
            self.gap = min(self.config.continue_gap_max, self.gap * 2)
        self.last_nudge = now
        if kind is NudgeKind.CONTINUE:
            self.continues += 1
        return kind


class StallWatch:
    """The agent should be making progress, yet its screen has not changed for a long time:
    Esc, then (still stuck) a restart.

    Which moments expect progress is the machine's call (busy, a wait that returned and nothing
    followed, a wait overdue past the tool's own timeout); the watch only keeps the clock. It
    starts when progress becomes expected, and anything visibly alive (a changed screen, an MCP
    call, a hook) starts it again.
    """

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self._print: str | None = None
        self._since = 0.0
        self._esc_at: float | None = None
        self._stuck = False  # the last observation expected progress

    def saw_activity(self, now: float) -> None:
        """The agent was visibly alive (an MCP call, a hook): the stall clock starts again."""
        self._since, self._esc_at = now, None

    def observe(self, now: float, expected: bool, screen_text: str) -> StallVerdict | None:
        """``expected``: the agent should be making progress now (the machine decides)."""
        current = fingerprint(screen_text)
        was_stuck, self._stuck = self._stuck, expected
        if not self._stuck or not was_stuck or current != self._print:
            # A long poll legitimately sits still; so does an idle agent. The clock starts
            # when progress becomes expected, not at the last time the screen was looked at.
            self._print, self._since, self._esc_at = current, now, None
            return None
        if self._esc_at is None:
            if now - self._since >= self.config.stall_timeout:
                self._esc_at = now
                return StallVerdict.ESC
            return None
        if now - self._esc_at >= self.config.stall_grace:
            self._print, self._since, self._esc_at = current, now, None
            return StallVerdict.RESTART
        return None

    def next_verdict(self) -> float | None:
        """When :meth:`observe` could next say Esc or restart if nothing changes (None: not stuck)."""
        if not self._stuck:
            return None
        if self._esc_at is None:
            return self._since + self.config.stall_timeout
        return self._esc_at + self.config.stall_grace
