"""The supervisor as a pure state machine: events and the time in, actions out.

The I/O shell (``runtime/loop.py``) turns what happens (a screen reading, keys typed, an
MCP tap record, a hook, the child's exit, a signal, a deadline reached) into events and
applies the actions that come back (bytes for the agent, a look at the screen, a record
for ``events.jsonl``, a save, a signal to the agent's group, the end of the run). Nothing
here reads a clock, a file or the environment: every event comes with an :class:`Instant`.

The order of the checks in :meth:`Machine._observe` is the policy: login stops the run,
a usage limit holds everything, a stall is looked for, then a prompt is delivered or a
nudge chosen. See docs/architecture.md for the diagram.
"""

from __future__ import annotations

from datetime import timedelta

from waaah_agent.core.mcp.inbox_records import (
    ControlCommand,
    ControlRecord,
    HookRecord,
    TapRecord,
    queue_full,
)
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
    Enqueue,
    Event,
    HideInput,
    Instant,
    Keys,
    LimitStated,
    Observed,
    Resized,
    Save,
    ServerChanged,
    SignalAgent,
    StopAsked,
    StopReason,
    Tick,
    Title,
    TokensCounted,
    Type,
)
from waaah_agent.core.supervise.machine_parts import (
    KILL_AGAIN,
    LOOP_ANSWER_AGAIN,
    STALL_LOOK,
    MachineConfig,
    MachineParts,
    Saved,
)
from waaah_agent.core.supervise.policy import (
    CONTINUE_PROMPT,
    HEARTBEAT_PROMPT,
    WORKFLOW_AGAIN_AFTER,
    Now,
    NudgeKind,
    StallVerdict,
    workflow_again,
)

__all__ = ["Machine", "MachineConfig", "Saved"]

#: Seconds before a wait that a `waaah send` ended with Esc gets another Esc.
SEND_ESC_AGAIN = 10.0


class Machine(MachineParts):
    """One run of the agent, from spawn to exit. Feed :meth:`handle`; wake it at :meth:`next_due`."""

    # -- the interface -------------------------------------------------------------------
    def handle(self, event: Event, t: Instant) -> list[Action]:
        """Everything to do about ``event``, in order."""
        self._out = out = list[Action]()
        if isinstance(event, Observed):
            self._observe(event, t)
        elif isinstance(event, Tick):
            self._tick(t)
        elif isinstance(event, Keys):
            self._keys(event.data, t.mono)
        elif isinstance(event, TapRecord):
            self._tap(event, t.mono)
        elif isinstance(event, HookRecord):
            self._hook(event, t.mono)
        elif isinstance(event, ControlRecord):
            self._control(event, t.mono)
        elif isinstance(event, ChildExited):
            self._exited(event.status)
        elif isinstance(event, StopAsked):
            self._stop(event.reason, event.detail, t.mono)
        elif isinstance(event, ServerChanged):
            self._server(event, t)
        elif isinstance(event, AgentStatusChanged):
            self._record("agent-status", status=event.status)
            self._notice(f"WAAAH server reports this agent {event.status or 'unknown'}")
        elif isinstance(event, TokensCounted):
            self._tokens(event, t.mono)
        elif isinstance(event, LimitStated):
            self._limit_stated(event, t)
        elif isinstance(event, Compacted):
            self._compacted(event)
        elif isinstance(event, Resized):
            self._record("resize", cols=event.cols, rows=event.rows)
        elif isinstance(event, Began):
            self._began(t)
        return out

    def next_due(self) -> float | None:
        return min(self.due.values()) if self.due else None

    def _tick(self, t: Instant) -> None:
        now = t.mono
        for due in [d for d, at in self.due.items() if at <= now]:
            del self.due[due]
            if due is Due.STALL:
                self._look(now)
            elif due is Due.LIMIT:
                self._limit_over(now)
            elif due is Due.MENU and self.menu_open:
                self._close_menu("continue (no choice made)")
            elif due is Due.KILL and not self.finished:
                grace = self.cfg.stop_grace
                self._record("kill", signal="SIGKILL", after_seconds=grace)
                self._notice(f"the agent ignored SIGTERM for {grace:.0f}s: SIGKILL")
                self._emit(SignalAgent(kill=True))
                self.due[Due.KILL] = now + KILL_AGAIN

    # -- the screen: the order of these checks is the policy ----------------------------
    def _observe(self, event: Observed, t: Instant) -> None:
        now, reading = t.mono, event.reading
        self.last_output = event.last_output
        self.last_reading = reading
        if (reading.secret_entry is not None) != self.hiding:
            self.hiding = not self.hiding
            self._emit(HideInput(self.hiding))
            self._record("secret-entry", shown=self.hiding, screen=reading.secret_entry)
        self._check_limit(t, reading)
        self._check_loop_detector(now, reading)
        # A banner already waited out stays on the screen for a while: it is history then.
        facts = Evidence(wait_in_flight=bool(self.waits_in_flight), limits=self.limit_deadline is not None)
        state, why = classify(reading, facts)
        if state is not self.state:
            self._record("state", state=state.value, previous=self.state.value, evidence=why)
            self.state = state
        if state in (AgentState.BUSY, AgentState.TOOL, AgentState.READY):
            self.past_start = True
        if state in (AgentState.BUSY, AgentState.TOOL):
            self.worked = True
        elif state is AgentState.READY and self.worked:  # a turn ended (even via a screen in between)
            self.worked = False
            if self.nudger is not None:
                self.nudger.turn_ended(now)
        if state is AgentState.LOGIN:
            self._login(now)
            return
        if self.awaiting_login:  # the CLI moved on from its login screen: the user is done
            self.awaiting_login = False
            self._record("login-done", state=state.value)
            self._notice(f"{self.cfg.agent} is past its login screen; carrying on")
            self._emit(Title(f"waaah: {self.cfg.agent}"))
        if self.limit_deadline is not None:
            return  # waiting out a usage limit: no prompts, no stall handling
        self._check_stall(now, state, reading)
        typing = self.delivering and self.delivery is not None and self.delivery.phase is not Phase.WAITING
        if (
            self.budget_spent
            and self.stopping is None
            and state in (AgentState.READY, AgentState.TOOL)
            and not typing
        ):
            self._stop(StopReason.BUDGET, self.budget_spent, now)  # the task in hand is done
            return
        if self.queued and self.stopping is None and not self.menu_open:
            if not self.delivering:
                self.delivery = Delivery("send", self.queued[0], enter_delay=self.cfg.enter_delay)
            if (
                self.delivery is not None
                and self.delivery.kind == "send"
                and self.delivery.phase is Phase.WAITING
            ):
                self._end_wait_for_send(now, state)
        if not self.delivering:
            self._maybe_nudge(t, state, reading.input_empty)
            return
        self._deliver(now, state, reading)

    def _end_wait_for_send(self, now: float, state: AgentState) -> None:
        """An agent in its loop sits in wait_for_prompt and is never at its prompt: a prompt of
        `waaah send` ends that wait with Esc (once, again if the wait is still on after a while);
        an agent working on something is left to finish its turn."""
        if state is not AgentState.TOOL or now < self.send_esc_at + SEND_ESC_AGAIN:
            return
        self.send_esc_at = now
        self._record("control", command="send", action="esc: ends the wait_for_prompt in flight")
        self._notice("ending the wait_for_prompt in flight (Esc) to type the prompt of waaah send")
        self._emit(Type(b"\x1b"))
        self._look(now + SEND_ESC_AGAIN)

    def _tokens(self, event: TokensCounted, now: float) -> None:
        """--max-tokens / --max-cost: once reached, no more nudges; the run stops when the agent
        is done with what it works on (idle at its prompt, or back in wait_for_prompt)."""
        if self.budget_spent:
            return
        if event.limit is not None and event.total >= event.limit:
            self.budget_spent = f"{event.total:,} tokens used, --max-tokens {event.limit:,}"
            what = "token"
            self._record("budget", tokens=event.total, limit=event.limit)
        elif event.cost_limit is not None and event.cost is not None and event.cost >= event.cost_limit:
            self.budget_spent = f"${event.cost:,.2f} spent, --max-cost ${event.cost_limit:,.2f}"
            what = "cost"
            self._record(
                "budget", cost_usd=round(event.cost, 4), cost_limit=event.cost_limit, tokens=event.total
            )
        else:
            return
        self._notice(f"{what} budget reached ({self.budget_spent}): stopping once the task in hand is done")
        self._emit(
            Title(f"waaah: {self.cfg.agent} reached its {what} budget; stopping after this task", hold=True)
        )
        self._look(now)

    def _control(self, record: ControlRecord, now: float) -> None:
        """A command of the user's from another shell (`waaah send|pause|resume|stop`)."""
        self._record("control", **record.event_fields())
        command = record.command
        if command is ControlCommand.SEND and record.text is not None:
            full = queue_full(len(self.queued), self.queued_chars, len(record.text))
            if full:
                self._record("control", command="send", refused=full)
                self._notice(f"a prompt from waaah send is dropped: {full}")
                return
            self.queued.append(record.text)
            self.queued_chars += len(record.text)
            self._emit(Enqueue(record.text))
            self._notice(
                f"a prompt from waaah send ({len(record.text)} characters): typed once the agent is ready"
            )
            if len(self.queued) == 1:  # the first: its delivery starts (the others follow it)
                self._look(now)
        elif command is ControlCommand.PAUSE and not self.paused:
            self.paused = True
            self._emit(Save({"paused": True}))
            self._notice("waaah pause: no continue prompts or heartbeats until waaah resume")
            self._emit(Title(f"waaah: {self.cfg.agent}, nudges paused (waaah resume)", hold=True))
        elif command is ControlCommand.RESUME and self.paused:
            self.paused = False
            self.owe_continue = self.resumed_by_user = True  # one continue prompt first, if idle
            self._emit(Save({"paused": False}))
            self._notice("waaah resume: continue prompts and heartbeats again")
            self._emit(Title(f"waaah: {self.cfg.agent}"))
            self._look(now)
        elif command is ControlCommand.STOP:
            self._stop(StopReason.USER, "waaah stop from another shell: saved, exiting", now)

    def _check_loop_detector(self, now: float, reading: Reading) -> None:
        """The CLI's own loop detector fights an agent waiting in its loop (identical
        wait_for_prompt calls): its question is answered by turning it off for the rest of the
        CLI's session (again if the keys went unheard), and a halt it made is the cause told
        with the continue prompt that follows."""
        answered = self.loop_answered
        if reading.loop_dialog is None:
            self.loop_answered = None
        elif (
            self.cfg.loop_dialog_keys
            and self.stopping is None
            and not self.menu_open
            and (answered is None or now >= answered + LOOP_ANSWER_AGAIN)
        ):
            self.loop_answered = now
            self._record("loop-detector", action="turned off for this session", again=answered is not None)
            self._notice(f"{self.cfg.agent}'s loop detector asked: turning it off for this session")
            self._emit(Type(self.cfg.loop_dialog_keys))
            self._look(now + LOOP_ANSWER_AGAIN)
        if reading.loop_halted is not None and not self.loop_halt_seen:
            self.loop_halted = True
            self._record("loop-detector", action="halted the turn", screen=reading.loop_halted)
        self.loop_halt_seen = reading.loop_halted is not None

    def _login(self, now: float) -> None:
        """The CLI shows its own login or auth screen.

        On a terminal the user is there to answer it: nothing is typed and nothing is stopped,
        the title and the log say what waaah waits for, and the workflow follows once the CLI is
        ready. Headless nobody can: stop with the steps to run from a shell.
        """
        refused = self.last_reading.login_refused
        if refused is not None:
            # No login on this screen can work: one clear stop (the login exit code, no restart).
            self._record("login-refused", screen=refused)
            said = refused if len(refused) <= 240 else refused[:237] + "..."
            tail = f"; {self.cfg.refused_hint}" if self.cfg.refused_hint else ""
            self._stop(StopReason.LOGIN, f"{self.cfg.agent} cannot log in ({said}){tail}", now)
            return
        if not self.cfg.interactive:
            hint = self.cfg.login_hint or self.cfg.agent
            self._stop(StopReason.LOGIN, f"{self.cfg.agent} requires login. Run: {hint}", now)
            return
        if not self.awaiting_login:
            self.awaiting_login = True
            self._record("login-wait", screen=self.last_reading.login)
            self._notice(f"{self.cfg.agent} asks for a login on its screen: waiting for you to finish it")
            self._emit(Title(f"waaah: log in to {self.cfg.agent} on its screen (waaah waits)", hold=True))

    def _deliver(self, now: float, state: AgentState, reading: Reading) -> None:
        delivery = self.delivery
        assert delivery is not None
        if delivery.phase is Phase.WAITING and now < self.last_output + self.cfg.settle:
            self._look(self.last_output + self.cfg.settle)
            return
        if delivery.phase is Phase.WAITING and (self.stopping is not None or self.menu_open):
            return  # never start typing into an agent being stopped, or while the user is in the menu
        seen = Observation(
            ready=state is AgentState.READY,
            busy=state in (AgentState.BUSY, AgentState.TOOL),
            input_empty=reading.input_empty,
            draft=reading.input_ready and not reading.input_empty,
        )
        hook, self.hook_confirmed = self.hook_confirmed, False
        step = delivery.step(now, seen, confirmed_by_hook=hook)
        if step.note is not None and delivery.phase is Phase.PASTED and delivery.kind == "workflow":
            # Intent first: a supervisor killed between the paste and the save must not paste
            # the workflow again on --resume without checking the transcript first.
            self._emit(Save({"workflow_pending": True}))
        for chunk in step.writes:
            self._emit(Type(chunk))
        if (
            delivery.kind == "send"
            and delivery.phase is Phase.ENTERED
            and delivery.enters == 1
            and step.writes
        ):
            self._emit(Dequeue())  # submitted: never typed again, even by a later supervisor
        if step.note is not None:
            self._record("delivery", kind=delivery.kind, phase=delivery.phase.value, note=step.note)
            self._notice(f"{delivery.kind} prompt: {step.note}")
        if delivery.done:
            if delivery.kind == "send" and self.queued:  # typed (or given up on): not again
                self.queued_chars -= len(self.queued.pop(0))
                if delivery.enters == 0:  # given up on before it was submitted
                    self._emit(Dequeue())
                self._look(now)
            if delivery.phase is Phase.CONFIRMED and delivery.kind == "workflow":
                self.saved = Saved(True, self.saved.limit_until, self.saved.next_heartbeat)
                self._emit(Save({"workflow_delivered": True, "workflow_pending": False}))
            return
        deadline = delivery.next_deadline(now)
        if deadline is not None:
            self._look(deadline)

    def _maybe_nudge(self, t: Instant, state: AgentState, input_empty: bool) -> None:
        if (
            self.nudger is None
            or self.stopping is not None
            or self.server_down
            or self.paused
            or self.budget_spent
        ):
            return  # a prompt toward wait_for_prompt while the server is down is a wasted turn
        now = t.mono
        facts = Now(
            time=now,
            state=state,
            input_empty=input_empty,
            wait_in_flight=bool(self.waits_in_flight),
            last_activity=max(self.last_output, self.last_user_input or 0.0),
            last_user_input=self.last_user_input,
            workflow_delivered=self.saved.workflow_delivered,
            delivering=self.delivering,
        )
        if self.owe_continue:
            if state in (AgentState.BUSY, AgentState.TOOL):
                self.owe_continue = False  # on its way already
            elif self.nudger.may_type(facts):
                self.owe_continue = False
                self.nudger.sent(now)
                if self.owe_workflow and self.cfg.workflow:
                    self._nudge_workflow(now)
                    return
                why = (
                    "nudges resumed (waaah resume)"
                    if self.resumed_by_user
                    else "the WAAAH server is reachable again"
                )
                self.resumed_by_user = False
                self._nudge(NudgeKind.CONTINUE, CONTINUE_PROMPT, why, now)
                return
        kind = self.nudger.decide(facts)
        if kind is None:
            if state is AgentState.READY:
                self._look(self.nudger.next_check(facts))
                self._note_next_heartbeat(t, self.nudger.next_heartbeat(facts))
            return
        ignored = self.nudger.ignored_continues() if kind is NudgeKind.CONTINUE else 0
        if ignored >= WORKFLOW_AGAIN_AFTER and not self.owe_workflow:
            self.owe_workflow = f"{ignored} continue prompts in a row were ignored"
        if self.owe_workflow and self.cfg.workflow:
            self._nudge_workflow(now)
            return
        if kind is NudgeKind.CONTINUE:
            why = "the turn ended outside wait_for_prompt"
            if self.loop_halted:
                why = f"{self.cfg.agent}'s loop detector halted the turn"
            self.loop_halted = False
            self._nudge(kind, CONTINUE_PROMPT, why, now)
        else:
            self._nudge(kind, HEARTBEAT_PROMPT, "idle at the prompt", now)

    def _nudge_workflow(self, now: float) -> None:
        """The workflow again instead of a bare continue prompt (core/policy.py says when)."""
        assert self.nudger is not None
        why, self.owe_workflow = self.owe_workflow, ""
        self.nudger.continues = 0
        self._record("nudge", kind="workflow", reason=why, next_gap=self.nudger.gap)
        self._notice(f"workflow sent again: {why}")
        self.delivery = Delivery(
            "workflow-again", workflow_again(self.cfg.workflow, why), self.cfg.enter_delay
        )
        self._look(now)

    def _compacted(self, event: Compacted) -> None:
        """The CLI compacted its conversation: the workflow may be gone from what the model
        sees, so the next prompt sends it again (an agent in its loop needs none meanwhile)."""
        self._record("compacted", source=event.source)
        self._notice(
            f"{self.cfg.agent} compacted its conversation ({event.source}): its next prompt is the workflow"
        )
        self.owe_workflow = f"{self.cfg.agent} compacted its conversation"

    def _nudge(self, kind: NudgeKind, text: str, why: str, now: float) -> None:
        assert self.nudger is not None
        self._record("nudge", kind=kind.value, reason=why, next_gap=self.nudger.gap)
        self._notice(f"{kind.value} prompt: {why}")
        self.delivery = Delivery(kind.value, text, enter_delay=self.cfg.enter_delay)
        self._look(now)

    def _note_next_heartbeat(self, t: Instant, due: float) -> None:
        """For `waaah status`: saved only when it moves, so an idle agent costs no writes."""
        when = t.wall + timedelta(seconds=due - t.mono)
        text = when.isoformat(timespec="seconds")
        if self.saved.next_heartbeat[:16] != text[:16]:  # minute resolution is plenty
            self.saved = Saved(self.saved.workflow_delivered, self.saved.limit_until, text)
            self._emit(Save({"next_heartbeat": text}))

    def _progress_expected(self, now: float, state: AgentState) -> bool:
        """Should the agent be making progress now (so an unchanged screen is a stall)?

        Busy, yes. Inside wait_for_prompt, no, but only for as long as the tool's own timeout:
        a wait that never returns is a hang too. After a wait returned, the screen is looked at
        again: busy, or neither ready nor any screen that needs a person (a freeze between two
        waits shows just that), is a stall once it has lasted.
        """
        assert self.stall is not None
        if self.waits_in_flight:
            return now >= max(self.waits_in_flight.values()) + self.stall.config.wait_timeout
        if state in (AgentState.BUSY, AgentState.TOOL):
            return True
        return state is AgentState.STARTING and self.past_start

    def _check_stall(self, now: float, state: AgentState, reading: Reading) -> None:
        if self.stall is None or self.stopping is not None:
            return
        expected = self._progress_expected(now, state)
        verdict = self.stall.observe(now, expected, reading.fingerprint)
        due = self.stall.next_verdict()
        if due is not None:
            due = min(due, now + STALL_LOOK)
        elif self.waits_in_flight:  # look again when the wait's exemption ends
            due = max(self.waits_in_flight.values()) + self.stall.config.wait_timeout
        if due is not None:
            self.due[Due.STALL] = min(due, self.due.get(Due.STALL, due))
        if verdict is StallVerdict.ESC:
            self._record("stall", action="esc", minutes=self.stall.config.stall_timeout / 60)
            self._notice("busy with nothing changing: sending Esc")
            self._emit(Type(b"\x1b"))
        elif verdict is StallVerdict.RESTART:
            self._stop(StopReason.STALLED, "still stalled after Esc: restarting the agent", now)
