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

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from waaah_agent.core import limits
from waaah_agent.core.delivery import Delivery, Observation, Phase
from waaah_agent.core.detect import AgentState, Evidence, Reading, classify
from waaah_agent.core.events import (
    CTRL_C,
    Action,
    AgentStatusChanged,
    Began,
    ChildExited,
    Due,
    Event,
    ExitInfo,
    Finish,
    HideInput,
    Instant,
    Keys,
    Look,
    Menu,
    Notice,
    Observed,
    Outcome,
    Record,
    Resized,
    Save,
    Say,
    ServerChanged,
    SignalAgent,
    StopAsked,
    StopReason,
    Tick,
    Title,
    Type,
)
from waaah_agent.core.inbox_records import HookRecord, TapEvent, TapOutcome, TapRecord
from waaah_agent.core.policy import (
    CONTINUE_PROMPT,
    HEARTBEAT_PROMPT,
    Now,
    NudgeKind,
    Nudger,
    PolicyConfig,
    StallVerdict,
    StallWatch,
)

MENU_TIMEOUT = 20.0
STALL_LOOK = 30.0  # while busy, look at the screen at least this often (stall detection)
KILL_AGAIN = 1.0  # after SIGKILL, how long before it is sent again


@dataclass(frozen=True)
class MachineConfig:
    agent: str  # the CLI's name, for messages
    interactive: bool
    enter_delay: float = 0.5
    limit_resume_keys: bytes = b""  # keys that take the CLI's limit screen back to work
    login_hint: str = ""
    stop_grace: float = 5.0
    settle: float = 0.8  # the screen must be quiet this long before the first prompt is typed
    policy: PolicyConfig | None = None  # None: no continue prompts, heartbeats or stall handling
    limit_margin: float = 60.0  # seconds added to a usage limit's stated reset time
    limit_default: float = 1800.0  # wait when a limit banner states no reset time
    server_down: str = ""  # the WAAAH server was not reachable when the run began: why


@dataclass(frozen=True)
class Saved:
    """What the machine needs from session.json at the start of a run."""

    workflow_delivered: bool = False
    limit_until: str = ""  # ISO time; a deadline an earlier supervisor was waiting for
    next_heartbeat: str = ""


class Machine:
    """One run of the agent, from spawn to exit. Feed :meth:`handle`; wake it at :meth:`next_due`."""

    def __init__(self, cfg: MachineConfig, first: Delivery | None, saved: Saved, now: float) -> None:
        self.cfg = cfg
        self.saved = saved
        self.delivery = first
        self.nudger = Nudger(cfg.policy) if cfg.policy else None
        self.stall = StallWatch(cfg.policy) if cfg.policy else None
        self.due: dict[Due, float] = {}
        self.state = AgentState.STARTING
        self.waits_in_flight: dict[tuple[int, int], float] = {}  # (proxy pid, call id) -> started
        self.past_start = False  # the CLI has shown its prompt or worked in this run
        self.last_output = now
        self.last_user_input: float | None = None
        self.last_reading = Reading()
        self.limit_deadline: float | None = None  # monotonic time a usage limit ends
        self.limit_banner: str | None = None  # the banner already handled
        self.hook_confirmed = False  # a UserPromptSubmit hook arrived for the prompt in flight
        self.worked = False  # busy since the agent was last ready
        self.menu_open = False
        self.hiding = False  # a secret-entry screen is up: its echo is not recorded
        self.awaiting_login = False  # the CLI's login screen is up and the user is answering it
        # The WAAAH server is down (why): no nudge toward a loop whose tool cannot work. When it
        # is back, one continue prompt is owed to an agent idle at its prompt.
        self.server_down = cfg.server_down
        self.owe_continue = False
        self.stopping: StopReason | None = None
        self.stop_detail = ""
        self.finished = False
        self._out: list[Action] = []

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
        elif isinstance(event, ChildExited):
            self._exited(event.status)
        elif isinstance(event, StopAsked):
            self._stop(event.reason, event.detail, t.mono)
        elif isinstance(event, ServerChanged):
            self._server(event, t)
        elif isinstance(event, AgentStatusChanged):
            self._record("agent-status", status=event.status)
            self._notice(f"WAAAH server reports this agent {event.status or 'unknown'}")
        elif isinstance(event, Resized):
            self._record("resize", cols=event.cols, rows=event.rows)
        elif isinstance(event, Began):
            self._began(t)
        return out

    def next_due(self) -> float | None:
        return min(self.due.values()) if self.due else None

    @property
    def delivering(self) -> bool:
        return self.delivery is not None and not self.delivery.done

    # -- helpers that emit ---------------------------------------------------------------
    def _emit(self, action: Action) -> None:
        self._out.append(action)

    def _record(self, name: str, **fields: Any) -> None:
        self._emit(Record(name, fields))

    def _notice(self, text: str) -> None:
        self._emit(Notice(text))

    def _look(self, at: float) -> None:
        self._emit(Look(at))

    # -- start and deadlines -------------------------------------------------------------
    def _began(self, t: Instant) -> None:
        """A deadline saved by an earlier supervisor still holds: keep waiting for it."""
        if self.server_down:
            self._emit(
                Title(f"waaah: {self.cfg.agent} waits for the WAAAH server ({self.server_down})", hold=True)
            )
        if not self.saved.limit_until:
            return
        try:
            until = datetime.fromisoformat(self.saved.limit_until)
        except ValueError:
            self._record("limit-ignored", until=self.saved.limit_until, why="not an ISO time")
            self._emit(Save({"limit_until": ""}))
            return
        if until.tzinfo is None:
            until = until.replace(tzinfo=t.wall.tzinfo)
        if until > t.wall:
            self._wait_for_limit(t, until, "saved by an earlier run", "")

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
        if not self.delivering:
            self._maybe_nudge(t, state, reading.input_empty)
            return
        self._deliver(now, state, reading)

    def _login(self, now: float) -> None:
        """The CLI shows its own login or auth screen.

        On a terminal the user is there to answer it: nothing is typed and nothing is stopped,
        the title and the log say what waaah waits for, and the workflow follows once the CLI is
        ready. Headless nobody can: stop with the steps to run from a shell.
        """
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
        )
        hook, self.hook_confirmed = self.hook_confirmed, False
        step = delivery.step(now, seen, confirmed_by_hook=hook)
        if step.note is not None and delivery.phase is Phase.PASTED and delivery.kind == "workflow":
            # Intent first: a supervisor killed between the paste and the save must not paste
            # the workflow again on --resume without checking the transcript first.
            self._emit(Save({"workflow_pending": True}))
        for chunk in step.writes:
            self._emit(Type(chunk))
        if step.note is not None:
            self._record("delivery", kind=delivery.kind, phase=delivery.phase.value, note=step.note)
            self._notice(f"{delivery.kind} prompt: {step.note}")
        if delivery.done:
            if delivery.phase is Phase.CONFIRMED and delivery.kind == "workflow":
                self.saved = Saved(True, self.saved.limit_until, self.saved.next_heartbeat)
                self._emit(Save({"workflow_delivered": True, "workflow_pending": False}))
            return
        deadline = delivery.next_deadline(now)
        if deadline is not None:
            self._look(deadline)

    def _maybe_nudge(self, t: Instant, state: AgentState, input_empty: bool) -> None:
        if self.nudger is None or self.stopping is not None or self.server_down:
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
                self._nudge(NudgeKind.CONTINUE, CONTINUE_PROMPT, "the WAAAH server is reachable again", now)
                return
        kind = self.nudger.decide(facts)
        if kind is None:
            if state is AgentState.READY:
                self._look(self.nudger.next_check(facts))
                self._note_next_heartbeat(t, self.nudger.next_heartbeat(facts))
            return
        if kind is NudgeKind.CONTINUE:
            self._nudge(kind, CONTINUE_PROMPT, "the turn ended outside wait_for_prompt", now)
        else:
            self._nudge(kind, HEARTBEAT_PROMPT, "idle at the prompt", now)

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

    # -- usage limits ----------------------------------------------------------------------
    def _check_limit(self, t: Instant, reading: Reading) -> None:
        """A usage-limit banner: wait until its reset time (+ a margin), then continue."""
        banner = reading.limit
        if banner is None:
            self.limit_banner = None  # gone from the screen: the next one is news
            return
        if self.limit_deadline is not None or banner == self.limit_banner:
            return
        self.limit_banner = banner
        margin = timedelta(seconds=self.cfg.limit_margin)
        default = timedelta(seconds=self.cfg.limit_default)
        tz = t.wall.tzinfo or timezone.utc
        until, how = limits.wait_until(banner, t.wall, tz, default=default, margin=margin)
        self._wait_for_limit(t, until, how, banner)

    def _wait_for_limit(self, t: Instant, until: datetime, how: str, banner: str) -> None:
        seconds = max(0.0, (until - t.wall).total_seconds())
        self.limit_deadline = t.mono + seconds
        text = until.isoformat(timespec="seconds")
        self.saved = Saved(self.saved.workflow_delivered, text, self.saved.next_heartbeat)
        self._emit(Save({"limit_until": text}))  # survives a supervisor restart
        self._record("limit", until=text, how=how, banner=banner)
        self._notice(f"usage limit: waiting until {text} ({how})")
        self._emit(Title(f"waaah: {self.cfg.agent} usage limit, waiting until {until:%H:%M}", hold=True))
        self.due[Due.LIMIT] = self.limit_deadline

    def _limit_over(self, now: float) -> None:
        self.limit_deadline = None
        self.saved = Saved(self.saved.workflow_delivered, "", self.saved.next_heartbeat)
        self._emit(Save({"limit_until": ""}))
        self._record("limit-over")
        self._emit(Title(f"waaah: {self.cfg.agent}"))
        self._notice("usage limit over: asking the agent to continue")
        keys = self.cfg.limit_resume_keys
        if keys and self.last_reading.limit is not None:
            self._record("limit-resume", keys=keys.decode("latin-1"))
            self._emit(Type(keys))  # the CLI's own "keep trying" on its limit screen
        if self.saved.workflow_delivered and not self.delivering:
            self.delivery = Delivery("continue", CONTINUE_PROMPT, enter_delay=self.cfg.enter_delay)
        self._look(now)

    # -- the user's keys and the Ctrl+C menu ---------------------------------------------
    def _keys(self, data: bytes, now: float) -> None:
        """Forward keys byte for byte, except Ctrl+C (the menu) and keys meant for the menu."""
        self.last_user_input = now
        while data:
            if self.menu_open:
                data = self._menu_key(data, now)
                continue
            at, seq = min(((data.find(s), s) for s in CTRL_C if s in data), default=(-1, b""))
            if at < 0:
                self._emit(Type(data))
                return
            if at:
                self._emit(Type(data[:at]))
            self._open_menu(now)
            data = data[at + len(seq) :]

    def _open_menu(self, now: float) -> None:
        self.menu_open = True
        self.due[Due.MENU] = now + MENU_TIMEOUT
        self._emit(Menu(open=True))
        self._record("menu", action="open")

    def _menu_key(self, data: bytes, now: float) -> bytes:
        """Act on the first key typed into the menu; return the keys after it."""
        for seq in CTRL_C:  # Ctrl+C twice: the user means the agent
            if data.startswith(seq):
                self._close_menu("pass Ctrl+C")
                self._emit(Type(b"\x03"))
                return data[len(seq) :]
        key, rest = data[:1].lower(), data[1:]
        if key == b"s":
            self._close_menu("save and exit")
            self._stop(StopReason.USER, "you chose save and exit", now)
            return b""
        if key == b"p":
            self._close_menu("pass Ctrl+C")
            self._emit(Type(b"\x03"))
        elif key in (b"c", b"\r", b"\x1b", b"q"):
            self._close_menu("continue")
        return rest

    def _close_menu(self, choice: str) -> None:
        self.menu_open = False
        self.due.pop(Due.MENU, None)
        self._emit(Menu(open=False))
        self._record("menu", action=choice)
        self._notice(f"Ctrl+C menu: {choice}")

    # -- the MCP tap, hooks, the server ----------------------------------------------------
    def _tap(self, tap: TapRecord, now: float) -> None:
        self._record(f"mcp-{tap.event.value}", **tap.event_fields())
        if self.stall is not None:
            self.stall.saw_activity(now)
        if tap.tool == "wait_for_prompt":
            call = (tap.pid, tap.call_id)
            if tap.event is TapEvent.START:
                self.waits_in_flight[call] = now
                if self.nudger is not None:
                    self.nudger.saw_wait()
                if self.stall is not None:  # exempt from stalls until the tool's own timeout
                    self._look(now + self.stall.config.wait_timeout)
            else:
                self.waits_in_flight.pop(call, None)
                # The screen may have been read while the wait was still in flight: read it
                # again, so a freeze right after the wait is seen (and the stall clock runs).
                self._look(now)
        if tap.outcome is TapOutcome.EVICT:
            action = tap.evict_action or "SHUTDOWN"
            reason = StopReason.EVICT if action == "SHUTDOWN" else StopReason.RESTART
            self._stop(reason, f"the WAAAH server evicted this agent ({action})", now)

    def _hook(self, hook: HookRecord, now: float) -> None:
        """The CLI's own hooks: the strongest evidence of a prompt taken and a turn ended."""
        name = hook.hook_event_name or "unknown"
        self._record(f"hook-{name}", **hook.event_fields())
        if self.stall is not None:
            self.stall.saw_activity(now)
        if name == "UserPromptSubmit" and self.delivering:
            self.hook_confirmed = True
            self._look(now)
        elif name == "Stop" and self.nudger is not None:
            self.nudger.turn_ended(now)
            self._look(now + 0.1)

    def _server(self, event: ServerChanged, t: Instant) -> None:
        self._record("server", ok=event.ok, detail=event.detail, url=event.url)
        was_down = bool(self.server_down)
        if event.ok:
            text = f"WAAAH server at {event.url} is reachable again"
            self.server_down = ""
        else:
            text = f"WAAAH server at {event.url}: {event.detail}; continue prompts held until it is back"
            self.server_down = event.detail
        self._notice(text)
        if not self.cfg.interactive:
            self._emit(Say(f"[waaah] {text}"))
        if not event.ok:
            since = t.wall.isoformat(timespec="seconds")
            self._emit(
                Save({"server_down": event.detail} | ({} if was_down else {"server_down_since": since}))
            )
            self._emit(
                Title(f"waaah: {self.cfg.agent} waits for the WAAAH server ({event.detail})", hold=True)
            )
        elif was_down:
            self._emit(Save({"server_down": "", "server_down_since": ""}))
            self._emit(Title(f"waaah: {self.cfg.agent}"))
            self.owe_continue = self.state is AgentState.READY and not self.waits_in_flight
            self._look(t.mono)

    # -- the end ---------------------------------------------------------------------------
    def _stop(self, reason: StopReason, detail: str, now: float) -> None:
        """Stop the agent's process group: SIGTERM now, SIGKILL at the deadline."""
        if self.stopping is not None or self.finished:
            return
        self.stopping, self.stop_detail = reason, detail
        self._record("stop", reason=reason.value, detail=detail)
        self._notice(f"stopping the agent: {detail}")
        self._emit(SignalAgent())
        self.due[Due.KILL] = now + self.cfg.stop_grace

    def _exited(self, status: ExitInfo | None) -> None:
        if self.finished:
            return
        self.finished = True
        self.due.clear()
        self._emit(SignalAgent())  # whatever else still runs in its process group (MCP servers...)
        if self.stopping is not None:
            self._emit(Finish(Outcome(self.stopping, status, self.stop_detail)))
        else:
            self._emit(Finish(Outcome(StopReason.AGENT_EXIT, status)))
