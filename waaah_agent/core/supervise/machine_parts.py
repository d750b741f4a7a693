"""The machine's state and its leaf handlers: what one run of the agent remembers, the
helpers that emit actions, and the handlers that need no policy order (deadlines saved by an
earlier run, usage limits, the user's keys and the Ctrl+C menu, the MCP tap, hooks, the
server, the end). :class:`waaah_agent.core.supervise.machine.Machine` adds the policy on top. Pure like
it: nothing here reads a clock, a file or the environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from waaah_agent.core import limits
from waaah_agent.core.mcp.inbox_records import HookRecord, TapEvent, TapOutcome, TapRecord
from waaah_agent.core.supervise.delivery import Delivery
from waaah_agent.core.supervise.detect import AgentState, Reading
from waaah_agent.core.supervise.events import (
    CTRL_C,
    Action,
    Due,
    ExitInfo,
    Finish,
    Instant,
    LimitStated,
    Look,
    Menu,
    Notice,
    Outcome,
    Record,
    Save,
    Say,
    ServerChanged,
    SignalAgent,
    StopReason,
    Title,
    Type,
)
from waaah_agent.core.supervise.policy import (
    CONTINUE_PROMPT,
    Nudger,
    PolicyConfig,
    StallWatch,
)
from waaah_agent.core.supervise.termanswers import is_report

MENU_TIMEOUT = 20.0
STALL_LOOK = 30.0  # while busy, look at the screen at least this often (stall detection)
KILL_AGAIN = 1.0  # after SIGKILL, how long before it is sent again
LOOP_ANSWER_AGAIN = 3.0  # the loop-detector question still up this long after the answer: again


@dataclass(frozen=True)
class MachineConfig:
    agent: str  # the CLI's name, for messages
    interactive: bool
    enter_delay: float = 0.5
    limit_resume_keys: bytes = b""  # keys that take the CLI's limit screen back to work
    loop_dialog_keys: bytes = b""  # keys that turn the CLI's loop detector off when it asks
    login_hint: str = ""
    workflow: str = ""  # the workflow's text, sent again when the agent may have lost it
    # What works instead when the CLI's login failed for good (Reading.login_refused).
    refused_hint: str = ""
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
    paused: bool = False  # `waaah pause`: no continue prompts or heartbeats until `waaah resume`
    queued: tuple[str, ...] = ()  # prompts of `waaah send` not typed yet, oldest first


class MachineParts:
    """What one run of the agent remembers, and the handlers that need no policy order."""

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
        self.owe_workflow = ""  # why the next prompt is the workflow again ("" while it is not)
        self.loop_answered: float | None = None  # when the loop-detector question was answered
        self.loop_halt_seen = False  # its halt message is on the screen (recorded once)
        self.loop_halted = False  # ... and the next continue prompt says that was the cause
        self.paused = saved.paused
        self.queued = list(saved.queued)
        self.queued_chars = sum(map(len, self.queued))
        self.budget_spent = ""  # why the token budget is spent ("" while it is not)
        self.resumed_by_user = False  # the continue prompt owed comes from `waaah resume`
        self.send_esc_at = -1e9  # when a wait was last ended with Esc for a queued prompt
        self.stopping: StopReason | None = None
        self.stop_detail = ""
        self.finished = False
        self._out: list[Action] = []

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

    def _limit_stated(self, event: LimitStated, t: Instant) -> None:
        """The CLI stated its reset elsewhere (codex's session file): a wait in progress ends at
        that time (+ the margin) instead of the one guessed or read from the banner."""
        if self.limit_deadline is None or self.stopping is not None:
            return
        margin = timedelta(seconds=self.cfg.limit_margin)
        until = min(event.until + margin, t.wall + timedelta(days=7))
        seconds = max(0.0, (until - t.wall).total_seconds())
        if abs(t.mono + seconds - self.limit_deadline) < 30:
            return  # what the wait already ends at
        how = f"stated in {event.source}: resets {event.until.isoformat(timespec='seconds')}, plus the margin"
        self._wait_for_limit(t, until, how, self.limit_banner or "")

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
        if is_report(data):  # the terminal answering the agent's queries: nobody is typing
            self._emit(Type(data))
            return
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
            self._emit(Finish(Outcome(StopReason.AGENT_EXIT, status, reached_prompt=self.past_start)))
