"""The supervisor as a pure state machine: events and the time in, actions out.

The I/O shell (``runtime/loop.py``) turns what happens (a screen reading, keys typed, an
MCP tap record, a hook, the child's exit, a signal, a deadline reached) into events and
applies the actions that come back (bytes for the agent, a look at the screen, a record
for ``events.jsonl``, a save, a signal to the agent's group, the end of the run). Nothing
here reads a clock, a file or the environment: every event comes with an :class:`Instant`.

The machine is composed of small parts (machine_parts.py, machine_inputs.py), each with its
own few attributes; it orders them. The order of the checks in :meth:`Machine._observe` is
the policy: login stops the run, a usage limit holds everything, a stall is looked for, then
a prompt is delivered or a nudge chosen. After each event the run's phase (phases.py) is read
from the parts and moved through the one checked :func:`transition`. See
docs/architecture.md for the diagram.
"""

from __future__ import annotations

from waaah_agent.core.mcp.inbox_records import ControlCommand, ControlRecord, HookRecord, TapRecord
from waaah_agent.core.supervise.delivery import Delivery, Observation, Phase
from waaah_agent.core.supervise.detect import AgentState, Evidence, Reading, classify
from waaah_agent.core.supervise.events import (
    Action,
    AgentStatusChanged,
    Began,
    ChildExited,
    Compacted,
    Dequeue,
    Due,
    Event,
    EventKind,
    HideInput,
    Instant,
    Keys,
    LimitStated,
    Observed,
    Resized,
    Save,
    ServerChanged,
    StopAsked,
    StopReason,
    Tick,
    TokensCounted,
    Type,
)
from waaah_agent.core.supervise.machine_inputs import (
    CliReports,
    Login,
    LoopDetector,
    Nudging,
    SendQueue,
    Stalls,
)
from waaah_agent.core.supervise.machine_parts import (
    CtrlMenu,
    Ending,
    LimitWait,
    MachineConfig,
    Memory,
    Out,
    Saved,
    Seen,
)
from waaah_agent.core.supervise.nudges import Nudges
from waaah_agent.core.supervise.phases import Facts, IllegalTransition, RunPhase, phase_of, transition
from waaah_agent.core.supervise.policy import CONTINUE_PROMPT, Now, Nudger, StallWatch

__all__ = ["Machine", "MachineConfig", "Saved"]


class Machine:
    """One run of the agent, from spawn to exit. Feed :meth:`handle`; wake it at :meth:`next_due`.

    ``strict``: an illegal phase change raises :class:`IllegalTransition` (tests); otherwise it
    is recorded as a ``phase-illegal`` event and the run goes on.
    """

    def __init__(
        self, cfg: MachineConfig, first: Delivery | None, saved: Saved, now: float, strict: bool = False
    ) -> None:
        self.cfg, self.strict = cfg, strict
        self.out = out = Out()
        self.due: dict[Due, float] = {}
        self.memory = Memory(saved, out)
        self.delivery = first
        self.nudger = Nudger(cfg.policy) if cfg.policy else None
        stall = StallWatch(cfg.policy) if cfg.policy else None
        self.seen = Seen(now)
        self.ending = ending = Ending(out, self.due, cfg.stop_grace)
        self.limit = LimitWait(cfg, out, self.due, self.memory)
        self.menu = CtrlMenu(out, self.due, ending.stop, self.seen)
        self.login = Login(cfg, out, ending.stop)
        self.loop = LoopDetector(cfg, out)
        self.reports = CliReports(out, self.nudger, stall, ending.stop)
        self.queue = SendQueue(out, saved)
        self.nudging = Nudging(cfg, out, saved)
        self.stalls = Stalls(out, self.due, stall, ending.stop)
        self.nudges = (
            Nudges(cfg, out, self.nudger, self.nudging, self.loop, self.memory) if self.nudger else None
        )
        self.phase = RunPhase.STARTING

    @property
    def delivering(self) -> bool:
        return self.delivery is not None and not self.delivery.done

    @property
    def asks_unread(self) -> bool:
        """Whether the next screen reading should say what the agent has not read of what was typed."""
        return self.delivery is not None and self.delivery.asks_unread

    # -- the interface -------------------------------------------------------------------
    def handle(self, event: Event, t: Instant) -> list[Action]:
        """Everything to do about ``event``, in order."""
        out = self.out.begin()
        if isinstance(event, Observed):
            self._observe(event, t)
        elif isinstance(event, Tick):
            self._tick(t)
        elif isinstance(event, Keys):
            self.menu.keys(event.data, t.mono, event.typed)
        elif isinstance(event, TapRecord):
            self.reports.tap(event, t.mono)
        elif isinstance(event, HookRecord):
            self.reports.hook(event, t.mono, self.delivering)
        elif isinstance(event, ControlRecord):
            self._control(event, t.mono)
        elif isinstance(event, ChildExited):
            self.ending.exited(event.status, self.seen.past_start)
        elif isinstance(event, StopAsked):
            self.ending.stop(event.reason, event.detail, t.mono)
        elif isinstance(event, ServerChanged):
            idle = self.seen.state is AgentState.READY and not self.reports.waits
            self.nudging.server(event, t, idle)
        elif isinstance(event, AgentStatusChanged):
            self.out.record(EventKind.AGENT_STATUS, status=event.status)
            self.out.notice(f"WAAAH server reports this agent {event.status or 'unknown'}")
        elif isinstance(event, TokensCounted):
            self.nudging.tokens(event, t.mono)
        elif isinstance(event, LimitStated):
            if self.ending.stopping is None:
                self.limit.stated(event, t)
        elif isinstance(event, Compacted):
            self.nudging.compacted(event)
        elif isinstance(event, Resized):
            self.out.record(EventKind.RESIZE, cols=event.cols, rows=event.rows)
        elif isinstance(event, Began):
            self.nudging.began()
            self.limit.began(t)
        self._move()
        return out

    def passes(self, keys: bytes) -> bool:
        """Keys the machine would only type on to the agent (``Keys(typed=True)`` may follow them)."""
        return self.menu.passes(keys)

    def next_due(self) -> float | None:
        return min(self.due.values()) if self.due else None

    def facts(self) -> Facts:
        """What the run's phase is read from."""
        delivery = self.delivery
        return Facts(
            finished=self.ending.finished,
            stopping=self.ending.stopping is not None,
            awaiting_login=self.login.awaiting,
            limited=self.limit.deadline is not None,
            menu_open=self.menu.open,
            typing=delivery is not None and not delivery.done and delivery.phase is not Phase.WAITING,
            paused=self.nudging.paused,
            wait_in_flight=bool(self.reports.waits),
            working=self.seen.state in (AgentState.BUSY, AgentState.TOOL),
            past_start=self.seen.past_start or self.phase is not RunPhase.STARTING,
        )

    def _move(self) -> None:
        """The one place the phase changes: checked against the table (phases.ALLOWED)."""
        new = phase_of(self.facts())
        if new is self.phase:
            return
        try:
            self.phase = transition(self.phase, new)
        except IllegalTransition as err:
            if self.strict:
                raise
            self.out.record(EventKind.PHASE_ILLEGAL, previous=err.old.value, phase=err.new.value)
            self.phase = new

    def _tick(self, t: Instant) -> None:
        now = t.mono
        for due in [d for d, at in self.due.items() if at <= now]:
            del self.due[due]
            if due is Due.STALL:
                self.out.look(now)
            elif due is Due.LIMIT:
                self.limit.over(self.seen.last_reading)
                if self.memory.workflow_delivered and not self.delivering:
                    self.delivery = Delivery("continue", CONTINUE_PROMPT, enter_delay=self.cfg.enter_delay)
                self.out.look(now)
            elif due is Due.MENU and self.menu.open:
                self.menu.close("continue (no choice made)")
            elif due is Due.KILL and not self.ending.finished:
                self.ending.kill(now)

    # -- the screen: the order of these checks is the policy ----------------------------
    def _observe(self, event: Observed, t: Instant) -> None:
        now, reading, seen, out = t.mono, event.reading, self.seen, self.out
        seen.last_output = event.last_output
        seen.last_reading = reading
        if (reading.secret_entry is not None) != seen.hiding:
            seen.hiding = not seen.hiding
            out.emit(HideInput(seen.hiding))
            out.record(EventKind.SECRET_ENTRY, shown=seen.hiding, screen=reading.secret_entry)
        self.limit.check(t, reading)
        self.loop.check(now, reading, may_type=self.ending.stopping is None and not self.menu.open)
        # A banner already waited out stays on the screen for a while: it is history then.
        facts = Evidence(wait_in_flight=bool(self.reports.waits), limits=self.limit.deadline is not None)
        state, why = classify(reading, facts)
        if state is not seen.state:
            out.record(EventKind.STATE, state=state.value, previous=seen.state.value, evidence=why)
            seen.state = state
        if state in (AgentState.BUSY, AgentState.TOOL, AgentState.READY):
            seen.past_start = True
        if state in (AgentState.BUSY, AgentState.TOOL):
            seen.worked = True
        elif state is AgentState.READY and seen.worked:  # a turn ended (even via a screen in between)
            seen.worked = False
            if self.nudger is not None:
                self.nudger.turn_ended(now)
        if state is AgentState.LOGIN:
            self.login.shown(now, reading)
            return
        self.login.gone(state)
        if self.limit.deadline is not None:
            return  # waiting out a usage limit: no prompts, no stall handling
        if self.ending.stopping is None:
            self.stalls.check(now, state, reading, self.reports.waits, seen.past_start)
        typing = self.delivering and self.delivery is not None and self.delivery.phase is not Phase.WAITING
        budget_spent = self.nudging.budget_spent
        if (
            budget_spent
            and self.ending.stopping is None
            and state in (AgentState.READY, AgentState.TOOL)
            and not typing
        ):
            self.ending.stop(StopReason.BUDGET, budget_spent, now)  # the task in hand is done
            return
        queued = self.queue.prompts
        if queued and self.ending.stopping is None and not self.menu.open:
            if not self.delivering:
                self.delivery = Delivery("send", queued[0], enter_delay=self.cfg.enter_delay)
            if (
                self.delivery is not None
                and self.delivery.kind == "send"
                and self.delivery.phase is Phase.WAITING
            ):
                self.queue.end_wait(now, state)
        if not self.delivering:
            self._maybe_nudge(t, state, reading.input_empty)
            return
        self._deliver(now, state, reading, event.unread)

    def _control(self, record: ControlRecord, now: float) -> None:
        """A command of the user's from another shell (`waaah send|pause|resume|stop`)."""
        self.out.record(EventKind.CONTROL, **record.event_fields())
        command = record.command
        if command is ControlCommand.SEND and record.text is not None:
            self.queue.add(record.text, now, record.ts)
        elif command is ControlCommand.PAUSE:
            self.nudging.pause()
        elif command is ControlCommand.RESUME:
            self.nudging.resume(now)
        elif command is ControlCommand.STOP:
            self.ending.stop(StopReason.USER, "waaah stop from another shell: saved, exiting", now)

    def _deliver(self, now: float, state: AgentState, reading: Reading, unread: int | None) -> None:
        delivery, out = self.delivery, self.out
        assert delivery is not None
        settled = self.seen.last_output + self.cfg.settle
        if delivery.phase is Phase.WAITING and now < settled:
            out.look(settled)
            return
        if delivery.phase is Phase.WAITING and (self.ending.stopping is not None or self.menu.open):
            return  # never start typing into an agent being stopped, or while the user is in the menu
        seen = Observation(
            ready=state is AgentState.READY,
            busy=state in (AgentState.BUSY, AgentState.TOOL),
            input_empty=reading.input_empty,
            draft=reading.input_ready and not reading.input_empty,
            typed_at=self.seen.last_user_input,
            unread=unread,
        )
        hook, self.reports.hook_confirmed = self.reports.hook_confirmed, False
        step = delivery.step(now, seen, confirmed_by_hook=hook)
        if step.note is not None and delivery.phase is Phase.PASTED and delivery.kind == "workflow":
            # Intent first: a supervisor killed between the paste and the save must not paste
            # the workflow again on --resume without checking the transcript first.
            out.emit(Save({"workflow_pending": True}))
        for chunk in step.writes:
            out.emit(Type(chunk))
        if (
            delivery.kind == "send"
            and delivery.phase is Phase.ENTERED
            and delivery.enters == 1
            and step.writes
        ):
            out.emit(Dequeue())  # submitted: never typed again, even by a later supervisor
        if step.note is not None:
            out.record(EventKind.DELIVERY, kind=delivery.kind, phase=delivery.phase.value, note=step.note)
            out.notice(f"{delivery.kind} prompt: {step.note}")
        if delivery.done:
            if delivery.kind == "send":  # submitted: not again
                self.queue.typed(now)
            if delivery.phase is Phase.CONFIRMED and delivery.kind == "workflow":
                self.memory.workflow_delivered = True
                out.emit(Save({"workflow_delivered": True, "workflow_pending": False}))
            return
        deadline = delivery.next_deadline(now)
        if deadline is not None:
            out.look(deadline)

    def _maybe_nudge(self, t: Instant, state: AgentState, input_empty: bool) -> None:
        holds = self.nudging
        if (
            self.nudges is None
            or self.ending.stopping is not None
            or holds.server_down
            or holds.paused
            or holds.budget_spent
        ):
            return  # a prompt toward wait_for_prompt while the server is down is a wasted turn
        facts = Now(
            time=t.mono,
            state=state,
            input_empty=input_empty,
            wait_in_flight=bool(self.reports.waits),
            last_activity=max(self.seen.last_output, self.seen.last_user_input or 0.0),
            last_user_input=self.seen.last_user_input,
            workflow_delivered=self.memory.workflow_delivered,
            delivering=self.delivering,
        )
        self.delivery = self.nudges.choose(t, facts) or self.delivery
