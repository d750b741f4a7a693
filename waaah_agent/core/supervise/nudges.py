"""Which prompt an agent idle outside its loop gets, if any: the continue prompt, the heartbeat,
or the workflow again. A part of the supervisor machine (machine.py asks it only when no prompt
is being typed and nothing holds the nudges); the spacing and the counts are the
:class:`~waaah_agent.core.supervise.policy.Nudger`'s. Pure: nothing here reads a clock, a file or
the environment.
"""

from __future__ import annotations

from waaah_agent.core.supervise.delivery import Delivery
from waaah_agent.core.supervise.detect import AgentState
from waaah_agent.core.supervise.events import EventKind, Instant
from waaah_agent.core.supervise.machine_inputs import LoopDetector, Nudging
from waaah_agent.core.supervise.machine_parts import MachineConfig, Memory, Out
from waaah_agent.core.supervise.policy import (
    CONTINUE_PROMPT,
    HEARTBEAT_PROMPT,
    WORKFLOW_AGAIN_AFTER,
    Now,
    NudgeKind,
    Nudger,
    workflow_again,
)


class Nudges:
    """The nudge chosen for what the screen shows now; the machine types what :meth:`choose` returns."""

    def __init__(
        self,
        cfg: MachineConfig,
        out: Out,
        nudger: Nudger,
        holds: Nudging,
        loop: LoopDetector,
        memory: Memory,
    ) -> None:
        self.cfg, self.out, self.nudger, self.holds, self.loop, self.memory = (
            cfg,
            out,
            nudger,
            holds,
            loop,
            memory,
        )

    def choose(self, t: Instant, facts: Now) -> Delivery | None:
        """The prompt to type now, or None (then the next look and heartbeat are asked for)."""
        holds, nudger, now, state = self.holds, self.nudger, t.mono, facts.state
        if holds.owe_continue:
            if state in (AgentState.BUSY, AgentState.TOOL):
                holds.owe_continue = False  # on its way already
            elif nudger.may_type(facts):
                holds.owe_continue = False
                nudger.sent(now)
                if holds.owe_workflow and self.cfg.workflow:
                    return self._workflow(now)
                why = (
                    "nudges resumed (waaah unpause)"
                    if holds.resumed_by_user
                    else "the WAAAH server is reachable again"
                )
                holds.resumed_by_user = False
                return self._prompt(NudgeKind.CONTINUE, CONTINUE_PROMPT, why, now)
        kind = nudger.decide(facts)
        if kind is None:
            if state is AgentState.READY:
                self.out.look(nudger.next_check(facts))
                self.memory.heartbeat(t, nudger.next_heartbeat(facts))
            return None
        ignored = nudger.ignored_continues() if kind is NudgeKind.CONTINUE else 0
        if ignored >= WORKFLOW_AGAIN_AFTER and not holds.owe_workflow:
            holds.owe_workflow = f"{ignored} continue prompts in a row were ignored"
        if holds.owe_workflow and self.cfg.workflow:
            return self._workflow(now)
        if kind is NudgeKind.CONTINUE:
            why = "the turn ended outside wait_for_prompt"
            if self.loop.halted:
                why = f"{self.cfg.agent}'s loop detector halted the turn"
            self.loop.halted = False
            return self._prompt(kind, CONTINUE_PROMPT, why, now)
        return self._prompt(kind, HEARTBEAT_PROMPT, "idle at the prompt", now)

    def _workflow(self, now: float) -> Delivery:
        """The workflow again instead of a bare continue prompt (policy.py says when)."""
        why, self.holds.owe_workflow = self.holds.owe_workflow, ""
        self.nudger.continues = 0
        self.out.record(EventKind.NUDGE, kind="workflow", reason=why, next_gap=self.nudger.gap)
        self.out.notice(f"workflow sent again: {why}")
        self.out.look(now)
        return Delivery("workflow-again", workflow_again(self.cfg.workflow, why), self.cfg.enter_delay)

    def _prompt(self, kind: NudgeKind, text: str, why: str, now: float) -> Delivery:
        self.out.record(EventKind.NUDGE, kind=kind.value, reason=why, next_gap=self.nudger.gap)
        self.out.notice(f"{kind.value} prompt: {why}")
        self.out.look(now)
        return Delivery(kind.value, text, enter_delay=self.cfg.enter_delay)
