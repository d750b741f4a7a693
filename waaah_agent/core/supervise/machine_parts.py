"""The parts the supervisor machine is composed of, each with its own few attributes.

:class:`waaah_agent.core.supervise.machine.Machine` owns one of each and orders them (the
policy); a part knows only what it is handed at its construction: the :class:`Out` it emits
into, the machine's deadlines, and the parts it acts through (a part that stops the agent is
handed :meth:`Ending.stop`). Here: what is emitted, what is kept in session.json, the end of a
run, usage limits, and the Ctrl+C menu (machine_inputs.py holds the rest). Pure: nothing here
reads a clock, a file or the environment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from waaah_agent.core import limits
from waaah_agent.core.supervise.detect import AgentState, Reading
from waaah_agent.core.supervise.events import (
    CTRL_C,
    Action,
    Due,
    EventKind,
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
    SignalAgent,
    StopReason,
    Title,
    Type,
)
from waaah_agent.core.supervise.policy import PolicyConfig
from waaah_agent.core.supervise.termanswers import is_report

MENU_TIMEOUT = 20.0
STALL_LOOK = 30.0  # while busy, look at the screen at least this often (stall detection)
KILL_AGAIN = 1.0  # after SIGKILL, how long before it is sent again
LOOP_ANSWER_AGAIN = 3.0  # the loop-detector question still up this long after the answer: again

#: How a part stops the agent (:meth:`Ending.stop`).
Stop = Callable[[StopReason, str, float], None]


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
    paused: bool = False  # `waaah pause`: no continue prompts or heartbeats until `waaah unpause`
    queued: tuple[str, ...] = ()  # prompts of `waaah send` not typed yet, oldest first


class Out:
    """The actions the event in hand asks of the shell, in order."""

    def __init__(self) -> None:
        self.actions: list[Action] = []

    def begin(self) -> list[Action]:
        self.actions = []
        return self.actions

    def emit(self, action: Action) -> None:
        self.actions.append(action)

    def record(self, name: str, **fields: Any) -> None:
        self.emit(Record(name, fields))

    def notice(self, text: str) -> None:
        self.emit(Notice(text))

    def look(self, at: float) -> None:
        self.emit(Look(at))


class Memory:
    """What the machine keeps in session.json for the next supervisor (read back as :class:`Saved`)."""

    def __init__(self, saved: Saved, out: Out) -> None:
        self.out = out
        self.workflow_delivered = saved.workflow_delivered
        self.limit_until = saved.limit_until
        self.next_heartbeat = saved.next_heartbeat

    def heartbeat(self, t: Instant, due: float) -> None:
        """For `waaah status`: saved only when it moves, so an idle agent costs no writes."""
        when = t.wall + timedelta(seconds=due - t.mono)
        text = when.isoformat(timespec="seconds")
        if self.next_heartbeat[:16] != text[:16]:  # minute resolution is plenty
            self.next_heartbeat = text
            self.out.emit(Save({"next_heartbeat": text}))


class Seen:
    """What the machine knows of the agent from its screen and the user's keys."""

    def __init__(self, now: float) -> None:
        self.state = AgentState.STARTING
        self.past_start = False  # the CLI has shown its prompt or worked in this run
        self.worked = False  # busy since the agent was last ready
        self.last_output = now
        self.last_reading = Reading()
        self.last_user_input: float | None = None
        self.hiding = False  # a secret-entry screen is up: its echo is not recorded


class Ending:
    """Stopping the agent's process group (SIGTERM now, SIGKILL at the deadline), and the
    outcome once it exited."""

    def __init__(self, out: Out, due: dict[Due, float], grace: float) -> None:
        self.out, self.due, self.grace = out, due, grace
        self.stopping: StopReason | None = None
        self.detail = ""
        self.finished = False

    def stop(self, reason: StopReason, detail: str, now: float) -> None:
        if self.stopping is not None or self.finished:
            return
        self.stopping, self.detail = reason, detail
        self.out.record(EventKind.STOP, reason=reason.value, detail=detail)
        self.out.notice(f"stopping the agent: {detail}")
        self.out.emit(SignalAgent())
        self.due[Due.KILL] = now + self.grace

    def kill(self, now: float) -> None:
        """The stop's deadline passed and the agent is still there."""
        self.out.record(EventKind.KILL, signal="SIGKILL", after_seconds=self.grace)
        self.out.notice(f"the agent ignored SIGTERM for {self.grace:.0f}s: SIGKILL")
        self.out.emit(SignalAgent(kill=True))
        self.due[Due.KILL] = now + KILL_AGAIN

    def exited(self, status: ExitInfo | None, reached_prompt: bool) -> None:
        if self.finished:
            return
        self.finished = True
        self.due.clear()
        self.out.emit(SignalAgent())  # whatever else still runs in its process group (MCP servers...)
        if self.stopping is not None:
            self.out.emit(Finish(Outcome(self.stopping, status, self.detail)))
        else:
            self.out.emit(Finish(Outcome(StopReason.AGENT_EXIT, status, reached_prompt=reached_prompt)))


class LimitWait:
    """A usage limit: wait until its reset time (+ a margin), then continue."""

    def __init__(self, cfg: MachineConfig, out: Out, due: dict[Due, float], memory: Memory) -> None:
        self.cfg, self.out, self.due, self.memory = cfg, out, due, memory
        self.deadline: float | None = None  # monotonic time the limit ends
        self.banner: str | None = None  # the banner already handled

    def began(self, t: Instant) -> None:
        """A deadline saved by an earlier supervisor still holds: keep waiting for it."""
        saved = self.memory.limit_until
        if not saved:
            return
        try:
            until = datetime.fromisoformat(saved)
        except ValueError:
            self.out.record(EventKind.LIMIT_IGNORED, until=saved, why="not an ISO time")
            self.out.emit(Save({"limit_until": ""}))
            return
        if until.tzinfo is None:
            until = until.replace(tzinfo=t.wall.tzinfo)
        if until > t.wall:
            self.wait(t, until, "saved by an earlier run", "")

    def check(self, t: Instant, reading: Reading) -> None:
        """A usage-limit banner on the screen."""
        banner = reading.limit
        if banner is None:
            self.banner = None  # gone from the screen: the next one is news
            return
        if self.deadline is not None or banner == self.banner:
            return
        self.banner = banner
        margin = timedelta(seconds=self.cfg.limit_margin)
        default = timedelta(seconds=self.cfg.limit_default)
        tz = t.wall.tzinfo or timezone.utc
        until, how = limits.wait_until(banner, t.wall, tz, default=default, margin=margin)
        self.wait(t, until, how, banner)

    def wait(self, t: Instant, until: datetime, how: str, banner: str) -> None:
        seconds = max(0.0, (until - t.wall).total_seconds())
        self.deadline = t.mono + seconds
        text = until.isoformat(timespec="seconds")
        self.memory.limit_until = text
        self.out.emit(Save({"limit_until": text}))  # survives a supervisor restart
        self.out.record(EventKind.LIMIT, until=text, how=how, banner=banner)
        self.out.notice(f"usage limit: waiting until {text} ({how})")
        self.out.emit(Title(f"waaah: {self.cfg.agent} usage limit, waiting until {until:%H:%M}", hold=True))
        self.due[Due.LIMIT] = self.deadline

    def stated(self, event: LimitStated, t: Instant) -> None:
        """The CLI stated its reset elsewhere (codex's session file): a wait in progress ends at
        that time (+ the margin) instead of the one guessed or read from the banner."""
        if self.deadline is None:
            return
        margin = timedelta(seconds=self.cfg.limit_margin)
        until = min(event.until + margin, t.wall + timedelta(days=7))
        seconds = max(0.0, (until - t.wall).total_seconds())
        if abs(t.mono + seconds - self.deadline) < 30:
            return  # what the wait already ends at
        how = f"stated in {event.source}: resets {event.until.isoformat(timespec='seconds')}, plus the margin"
        self.wait(t, until, how, self.banner or "")

    def over(self, reading: Reading) -> None:
        """The wait is over: the CLI's own "keep trying" keys if its limit screen is still up."""
        self.deadline = None
        self.memory.limit_until = ""
        self.out.emit(Save({"limit_until": ""}))
        self.out.record(EventKind.LIMIT_OVER)
        self.out.emit(Title(f"waaah: {self.cfg.agent}"))
        self.out.notice("usage limit over: asking the agent to continue")
        keys = self.cfg.limit_resume_keys
        if keys and reading.limit is not None:
            self.out.record(EventKind.LIMIT_RESUME, keys=keys.decode("latin-1"))
            self.out.emit(Type(keys))


class CtrlMenu:
    """The Ctrl+C menu: the user's keys go to the agent byte for byte, except Ctrl+C (the menu)
    and the keys typed into it."""

    def __init__(self, out: Out, due: dict[Due, float], stop: Stop, seen: Seen) -> None:
        self.out, self.due, self.stop, self.seen = out, due, stop, seen
        self.open = False

    def passes(self, data: bytes) -> bool:
        """Whether ``data`` goes to the agent as it is, with nothing to decide on (the menu is
        closed and no Ctrl+C is in it): the shell may write it before telling the machine."""
        return not self.open and not any(s in data for s in CTRL_C)

    def keys(self, data: bytes, now: float, typed: bool = False) -> None:
        if is_report(data):  # the terminal answering the agent's queries: nobody is typing
            if not typed:
                self.out.emit(Type(data))
            return
        self.seen.last_user_input = now
        if typed:
            return
        while data:
            if self.open:
                data = self._key(data, now)
                continue
            at, seq = min(((data.find(s), s) for s in CTRL_C if s in data), default=(-1, b""))
            if at < 0:
                self.out.emit(Type(data))
                return
            if at:
                self.out.emit(Type(data[:at]))
            self._open(now)
            data = data[at + len(seq) :]

    def _open(self, now: float) -> None:
        self.open = True
        self.due[Due.MENU] = now + MENU_TIMEOUT
        self.out.emit(Menu(open=True))
        self.out.record(EventKind.MENU, action="open")

    def _key(self, data: bytes, now: float) -> bytes:
        """Act on the first key typed into the menu; return the keys after it."""
        for seq in CTRL_C:  # Ctrl+C twice: the user means the agent
            if data.startswith(seq):
                self.close("pass Ctrl+C")
                self.out.emit(Type(b"\x03"))
                return data[len(seq) :]
        key, rest = data[:1].lower(), data[1:]
        if key == b"s":
            self.close("save and exit")
            self.stop(StopReason.USER, "you chose save and exit", now)
            return b""
        if key == b"p":
            self.close("pass Ctrl+C")
            self.out.emit(Type(b"\x03"))
        elif key in (b"c", b"\r", b"\x1b", b"q"):
            self.close("continue")
        return rest

    def close(self, choice: str) -> None:
        self.open = False
        self.due.pop(Due.MENU, None)
        self.out.emit(Menu(open=False))
        self.out.record(EventKind.MENU, action=choice)
        self.out.notice(f"Ctrl+C menu: {choice}")
