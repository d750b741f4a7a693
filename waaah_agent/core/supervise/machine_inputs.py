"""More parts of the supervisor machine (see machine_parts.py): the CLI's login screen and
loop detector, the MCP tap and hooks, the prompts of `waaah send`, what holds or owes a
nudge, and stall handling. Pure: nothing here reads a clock, a file or the environment.
"""

from __future__ import annotations

from waaah_agent.core.mcp.inbox_records import HookRecord, TapEvent, TapOutcome, TapRecord, queue_full
from waaah_agent.core.supervise.detect import AgentState, Reading
from waaah_agent.core.supervise.events import (
    Compacted,
    Due,
    Enqueue,
    EventKind,
    Instant,
    Save,
    Say,
    ServerChanged,
    StopReason,
    Title,
    TokensCounted,
    Type,
)
from waaah_agent.core.supervise.machine_parts import (
    LOOP_ANSWER_AGAIN,
    STALL_LOOK,
    MachineConfig,
    Out,
    Saved,
    Stop,
)
from waaah_agent.core.supervise.policy import Nudger, StallVerdict, StallWatch

#: Seconds before a wait that a `waaah send` ended with Esc gets another Esc.
SEND_ESC_AGAIN = 10.0


class Login:
    """The CLI's own login or auth screen.

    On a terminal the user is there to answer it: nothing is typed and nothing is stopped, the
    title and the log say what waaah waits for, and the workflow follows once the CLI is ready.
    Headless nobody can: stop with the steps to run from a shell.
    """

    def __init__(self, cfg: MachineConfig, out: Out, stop: Stop) -> None:
        self.cfg, self.out, self.stop = cfg, out, stop
        self.awaiting = False  # the login screen is up and the user is answering it

    def shown(self, now: float, reading: Reading) -> None:
        cfg, refused = self.cfg, reading.login_refused
        if refused is not None:
            # No login on this screen can work: one clear stop (the login exit code, no restart).
            self.out.record(EventKind.LOGIN_REFUSED, screen=refused)
            said = refused if len(refused) <= 240 else refused[:237] + "..."
            tail = f"; {cfg.refused_hint}" if cfg.refused_hint else ""
            self.stop(StopReason.LOGIN, f"{cfg.agent} cannot log in ({said}){tail}", now)
            return
        if not cfg.interactive:
            self.stop(
                StopReason.LOGIN, f"{cfg.agent} requires login. Run: {cfg.login_hint or cfg.agent}", now
            )
            return
        if not self.awaiting:
            self.awaiting = True
            self.out.record(EventKind.LOGIN_WAIT, screen=reading.login)
            self.out.notice(f"{cfg.agent} asks for a login on its screen: waiting for you to finish it")
            self.out.emit(Title(f"waaah: log in to {cfg.agent} on its screen (waaah waits)", hold=True))

    def gone(self, state: AgentState) -> None:
        """The CLI moved on from its login screen: the user is done."""
        if self.awaiting:
            self.awaiting = False
            self.out.record(EventKind.LOGIN_DONE, state=state.value)
            self.out.notice(f"{self.cfg.agent} is past its login screen; carrying on")
            self.out.emit(Title(f"waaah: {self.cfg.agent}"))


class LoopDetector:
    """The CLI's own loop detector fights an agent waiting in its loop (identical wait_for_prompt
    calls): its question is answered by turning it off for the rest of the CLI's session (again
    if the keys went unheard), and a halt it made is the cause told with the next continue prompt."""

    def __init__(self, cfg: MachineConfig, out: Out) -> None:
        self.cfg, self.out = cfg, out
        self.answered: float | None = None  # when its question was answered
        self.halt_seen = False  # its halt message is on the screen (recorded once)
        self.halted = False  # ... and the next continue prompt says that was the cause

    def check(self, now: float, reading: Reading, may_type: bool) -> None:
        answered = self.answered
        if reading.loop_dialog is None:
            self.answered = None
        elif (
            self.cfg.loop_dialog_keys
            and may_type
            and (answered is None or now >= answered + LOOP_ANSWER_AGAIN)
        ):
            self.answered = now
            self.out.record(
                EventKind.LOOP_DETECTOR, action="turned off for this session", again=answered is not None
            )
            self.out.notice(f"{self.cfg.agent}'s loop detector asked: turning it off for this session")
            self.out.emit(Type(self.cfg.loop_dialog_keys))
            self.out.look(now + LOOP_ANSWER_AGAIN)
        if reading.loop_halted is not None and not self.halt_seen:
            self.halted = True
            self.out.record(EventKind.LOOP_DETECTOR, action="halted the turn", screen=reading.loop_halted)
        self.halt_seen = reading.loop_halted is not None


class CliReports:
    """What the CLI tells beside its screen: wait_for_prompt calls in flight (the MCP tap) and
    its own hooks, the strongest evidence of a prompt taken and a turn ended."""

    def __init__(self, out: Out, nudger: Nudger | None, stall: StallWatch | None, stop: Stop) -> None:
        self.out, self.nudger, self.stall, self.stop = out, nudger, stall, stop
        self.waits: dict[tuple[int, int], float] = {}  # (proxy pid, call id) -> started
        self.hook_confirmed = False  # a UserPromptSubmit hook arrived for the prompt in flight

    def tap(self, tap: TapRecord, now: float) -> None:
        kind = EventKind.MCP_TOOL_START if tap.event is TapEvent.START else EventKind.MCP_TOOL_END
        self.out.record(kind, **tap.event_fields())
        if self.stall is not None:
            self.stall.saw_activity(now)
        if tap.tool == "wait_for_prompt":
            call = (tap.pid, tap.call_id)
            if tap.event is TapEvent.START:
                self.waits[call] = now
                if self.nudger is not None:
                    self.nudger.saw_wait()
                if self.stall is not None:  # exempt from stalls until the tool's own timeout
                    self.out.look(now + self.stall.config.wait_timeout)
            else:
                self.waits.pop(call, None)
                # The screen may have been read while the wait was still in flight: read it
                # again, so a freeze right after the wait is seen (and the stall clock runs).
                self.out.look(now)
        if tap.outcome is TapOutcome.EVICT:
            action = tap.evict_action or "SHUTDOWN"
            reason = StopReason.EVICT if action == "SHUTDOWN" else StopReason.RESTART
            self.stop(reason, f"the WAAAH server evicted this agent ({action})", now)

    def hook(self, hook: HookRecord, now: float, delivering: bool) -> None:
        name = hook.hook_event_name or "unknown"
        self.out.record(f"hook-{name}", **hook.event_fields())
        if self.stall is not None:
            self.stall.saw_activity(now)
        if name == "UserPromptSubmit" and delivering:
            self.hook_confirmed = True
            self.out.look(now)
        elif name == "Stop" and self.nudger is not None:
            self.nudger.turn_ended(now)
            self.out.look(now + 0.1)


class SendQueue:
    """The prompts of `waaah send` not typed yet, oldest first (kept in session.json)."""

    def __init__(self, out: Out, saved: Saved) -> None:
        self.out = out
        self.prompts = list(saved.queued)
        self.chars = sum(map(len, self.prompts))
        self.esc_at = -1e9  # when a wait was last ended with Esc for a queued prompt

    def add(self, text: str, now: float, sent: float = 0.0) -> None:
        full = queue_full(len(self.prompts), self.chars, len(text))
        if full:
            self.out.record(EventKind.CONTROL, command="send", refused=full)
            self.out.notice(f"a prompt from waaah send is dropped: {full}")
            return
        self.prompts.append(text)
        self.chars += len(text)
        self.out.emit(Enqueue(text, sent))
        self.out.notice(f"a prompt from waaah send ({len(text)} characters): typed once the agent is ready")
        if len(self.prompts) == 1:  # the first: its delivery starts (the others follow it)
            self.out.look(now)

    def end_wait(self, now: float, state: AgentState) -> None:
        """An agent in its loop sits in wait_for_prompt and is never at its prompt: a prompt of
        `waaah send` ends that wait with Esc (once, again if the wait is still on after a while);
        an agent working on something is left to finish its turn."""
        if state is not AgentState.TOOL or now < self.esc_at + SEND_ESC_AGAIN:
            return
        self.esc_at = now
        self.out.record(EventKind.CONTROL, command="send", action="esc: ends the wait_for_prompt in flight")
        self.out.notice("ending the wait_for_prompt in flight (Esc) to type the prompt of waaah send")
        self.out.emit(Type(b"\x1b"))
        self.out.look(now + SEND_ESC_AGAIN)

    def typed(self, now: float) -> None:
        """The first prompt's delivery is over: it was submitted (its Enter went out and
        ``Dequeue`` with it), whether or not the screen confirmed it; never typed again. A
        paste that never showed is not over: it goes in again (delivery.py)."""
        if self.prompts:
            self.chars -= len(self.prompts.pop(0))
            self.out.look(now)


class Nudging:
    """What holds the nudges (a pause, the server down, a spent budget) and what is owed once
    they may go again (a continue prompt, the workflow)."""

    def __init__(self, cfg: MachineConfig, out: Out, saved: Saved) -> None:
        self.cfg, self.out = cfg, out
        self.paused = saved.paused  # `waaah pause`: no continue prompts or heartbeats
        # The WAAAH server is down (why): no nudge toward a loop whose tool cannot work. When it
        # is back, one continue prompt is owed to an agent idle at its prompt.
        self.server_down = cfg.server_down
        self.budget_spent = ""  # why the token budget is spent ("" while it is not)
        self.owe_continue = False
        self.owe_workflow = ""  # why the next prompt is the workflow again ("" while it is not)
        self.resumed_by_user = False  # the continue prompt owed comes from `waaah unpause`

    def pause(self) -> None:
        if not self.paused:
            self.paused = True
            self.out.emit(Save({"paused": True}))
            self.out.notice("waaah pause: no continue prompts or heartbeats until waaah unpause")
            self.out.emit(Title(f"waaah: {self.cfg.agent}, nudges paused (waaah unpause)", hold=True))

    def resume(self, now: float) -> None:
        if self.paused:
            self.paused = False
            self.owe_continue = self.resumed_by_user = True  # one continue prompt first, if idle
            self.out.emit(Save({"paused": False}))
            self.out.notice("waaah unpause: continue prompts and heartbeats again")
            self.out.emit(Title(f"waaah: {self.cfg.agent}"))
            self.out.look(now)

    def began(self) -> None:
        if self.server_down:
            self.out.emit(
                Title(f"waaah: {self.cfg.agent} waits for the WAAAH server ({self.server_down})", hold=True)
            )

    def server(self, event: ServerChanged, t: Instant, idle: bool) -> None:
        """The WAAAH server went down or came back (``idle``: at the prompt, no wait in flight)."""
        self.out.record(EventKind.SERVER, ok=event.ok, detail=event.detail, url=event.url)
        was_down = bool(self.server_down)
        if event.ok:
            text = f"WAAAH server at {event.url} is reachable again"
            self.server_down = ""
        else:
            text = f"WAAAH server at {event.url}: {event.detail}; continue prompts held until it is back"
            self.server_down = event.detail
        self.out.notice(text)
        if not self.cfg.interactive:
            self.out.emit(Say(f"[waaah] {text}"))
        if not event.ok:
            since = t.wall.isoformat(timespec="seconds")
            self.out.emit(
                Save({"server_down": event.detail} | ({} if was_down else {"server_down_since": since}))
            )
            self.out.emit(
                Title(f"waaah: {self.cfg.agent} waits for the WAAAH server ({event.detail})", hold=True)
            )
        elif was_down:
            self.out.emit(Save({"server_down": "", "server_down_since": ""}))
            self.out.emit(Title(f"waaah: {self.cfg.agent}"))
            self.owe_continue = idle
            self.out.look(t.mono)

    def compacted(self, event: Compacted) -> None:
        """The CLI compacted its conversation: the workflow may be gone from what the model
        sees, so the next prompt sends it again (an agent in its loop needs none meanwhile)."""
        agent = self.cfg.agent
        self.out.record(EventKind.COMPACTED, source=event.source)
        self.out.notice(
            f"{agent} compacted its conversation ({event.source}): its next prompt is the workflow"
        )
        self.owe_workflow = f"{agent} compacted its conversation"

    def tokens(self, event: TokensCounted, now: float) -> None:
        """--max-tokens / --max-cost: once reached, no more nudges; the run stops when the agent
        is done with what it works on (idle at its prompt, or back in wait_for_prompt)."""
        if self.budget_spent:
            return
        if event.limit is not None and event.total >= event.limit:
            self.budget_spent = f"{event.total:,} tokens used, --max-tokens {event.limit:,}"
            what = "token"
            self.out.record(EventKind.BUDGET, tokens=event.total, limit=event.limit)
        elif event.cost_limit is not None and event.cost is not None and event.cost >= event.cost_limit:
            self.budget_spent = f"${event.cost:,.2f} spent, --max-cost ${event.cost_limit:,.2f}"
            what = "cost"
            self.out.record(
                EventKind.BUDGET,
                cost_usd=round(event.cost, 4),
                cost_limit=event.cost_limit,
                tokens=event.total,
            )
        else:
            return
        agent = self.cfg.agent
        self.out.notice(
            f"{what} budget reached ({self.budget_spent}): stopping once the task in hand is done"
        )
        self.out.emit(Title(f"waaah: {agent} reached its {what} budget; stopping after this task", hold=True))
        self.out.look(now)


class Stalls:
    """Busy with nothing changing on the screen: Esc first, then a restart."""

    def __init__(self, out: Out, due: dict[Due, float], watch: StallWatch | None, stop: Stop) -> None:
        self.out, self.due, self.watch, self.stop = out, due, watch, stop

    def progress_expected(
        self, now: float, state: AgentState, waits: dict[tuple[int, int], float], past_start: bool
    ) -> bool:
        """Should the agent be making progress now (so an unchanged screen is a stall)?

        Busy, yes. Inside wait_for_prompt, no, but only for as long as the tool's own timeout:
        a wait that never returns is a hang too. After a wait returned, the screen is looked at
        again: busy, or neither ready nor any screen that needs a person (a freeze between two
        waits shows just that), is a stall once it has lasted.
        """
        assert self.watch is not None
        if waits:
            return now >= max(waits.values()) + self.watch.config.wait_timeout
        if state in (AgentState.BUSY, AgentState.TOOL):
            return True
        return state is AgentState.STARTING and past_start

    def check(
        self,
        now: float,
        state: AgentState,
        reading: Reading,
        waits: dict[tuple[int, int], float],
        past_start: bool,
    ) -> None:
        watch = self.watch
        if watch is None:
            return
        expected = self.progress_expected(now, state, waits, past_start)
        verdict = watch.observe(now, expected, reading.fingerprint)
        due = watch.next_verdict()
        if due is not None:
            due = min(due, now + STALL_LOOK)
        elif waits:  # look again when the wait's exemption ends
            due = max(waits.values()) + watch.config.wait_timeout
        if due is not None:
            self.due[Due.STALL] = min(due, self.due.get(Due.STALL, due))
        if verdict is StallVerdict.ESC:
            self.out.record(EventKind.STALL, action="esc", minutes=watch.config.stall_timeout / 60)
            self.out.notice("busy with nothing changing: sending Esc")
            self.out.emit(Type(b"\x1b"))
        elif verdict is StallVerdict.RESTART:
            self.stop(StopReason.STALLED, "still stalled after Esc: restarting the agent", now)
