"""The supervisor loop: one thread, one ``selectors`` loop, timers as deadlines.

It relays bytes between the user's terminal and the agent's PTY unchanged and as they
arrive; everything else (logs, the screen model, detection, typing prompts) happens
beside that path. Signal handlers do nothing but wake the loop through
``signal.set_wakeup_fd``; no work happens inside a handler. Timers are named deadlines,
so a quiet agent costs no CPU: the loop sleeps in ``select`` until something happens.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import selectors
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from waaah_agent.adapters.base import Adapter
from waaah_agent.core import limits
from waaah_agent.core.delivery import Delivery, Observation, Phase
from waaah_agent.core.detect import Evidence, detect
from waaah_agent.core.inbox_records import HookRecord, TapEvent, TapOutcome
from waaah_agent.core.policy import CONTINUE_PROMPT, HEARTBEAT_PROMPT, Now, Nudger, PolicyConfig, StallWatch
from waaah_agent.core.screen import Screen, ScreenView
from waaah_agent.runtime.background import Mailbox
from waaah_agent.runtime.child import AgentProcess, ExitStatus
from waaah_agent.runtime.inbox import Inbox
from waaah_agent.runtime.logs import SessionLogs
from waaah_agent.runtime.store import SessionDir, SessionState
from waaah_agent.runtime.terminal import DEFAULT_SIZE, TerminalOut, terminal_size

log = logging.getLogger(__name__)

CTRL_C = (b"\x03", b"\x1b[99;5u")  # plain, and the kitty keyboard protocol's form
SCREEN_DELAY = 0.03  # coalesce output bursts before updating the screen model
# Beyond this much unprocessed output, keep only the tail. Generous: TUIs redraw only what
# changed, so a screen rebuilt from a short tail can stay wrong until the next full redraw.
SCREEN_BACKLOG = 256 * 1024
SCREEN_SHARE = 0.05  # under sustained output, the screen model gets at most this share of the time
SCREEN_FLOOD_SHARE = 0.01  # ... and this much once its backlog overflowed, until the output pauses
SCREEN_SLICE = 0.0005  # pyte work done in one go before the loop serves the PTY and stdin again
SCREEN_PIECE = 256  # bytes fed to pyte between two looks at the clock (pyte: ~1-5 µs per byte)
TERMINAL_HIGH_WATER = 1024 * 1024  # stop reading the agent while this much waits for the terminal
RELAY_READS = 16  # PTY reads per wake-up at most, before the loop looks at everything else
FLUSH_EVERY = 1.0
MENU_TIMEOUT = 20.0
MENU = " waaah: [c] continue   [s] save and exit   [p] pass Ctrl+C to the agent "
WATCHED_SIGNALS = (signal.SIGWINCH, signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGCHLD)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


@dataclass
class Outcome:
    """How a supervised run ended."""

    reason: str  # "agent-exit", "user", "signal", "login", "terminal-closed"
    status: ExitStatus | None = None
    detail: str = ""


@dataclass
class LoopConfig:
    adapter: Adapter
    interactive: bool
    initial_prompt: Delivery | None
    stop_grace: float = 5.0
    settle: float = 0.8  # the screen must be quiet this long before we type into it
    policy: PolicyConfig | None = None  # None: no continue prompts, heartbeats or stall handling
    limit_margin: float = 60.0  # seconds added to a usage limit's stated reset time
    limit_default: float = 1800.0  # wait when a limit banner states no reset time


@dataclass
class Timers:
    """Named deadlines on the monotonic clock."""

    due: dict[str, float] = field(default_factory=dict)

    def set(self, name: str, when: float) -> None:
        self.due[name] = when

    def set_min(self, name: str, when: float) -> None:
        """Fire at ``when`` unless already due earlier."""
        self.due[name] = min(when, self.due.get(name, when))

    def cancel(self, name: str) -> None:
        self.due.pop(name, None)

    def timeout(self, now: float) -> float | None:
        return max(0.0, min(self.due.values()) - now) if self.due else None

    def pop_due(self, now: float) -> list[str]:
        names = [n for n, t in self.due.items() if t <= now]
        for n in names:
            del self.due[n]
        return names


class Supervisor:
    """Runs one agent process to its end. Build it, call :meth:`run` once."""

    def __init__(
        self,
        cfg: LoopConfig,
        child: AgentProcess,
        session: SessionDir,
        state: SessionState,
        logs: SessionLogs,
        *,
        stdin_fd: int,
        stdout_fd: int,
        notify: Callable[[str], None],
        mailbox: Mailbox | None = None,
        inbox: Inbox | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mailbox = mailbox
        self.inbox = inbox
        self.cfg = cfg
        self.child = child
        self.session = session
        self.state = state
        self.logs = logs
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.notify = notify
        self.clock = clock
        self.timers = Timers()
        self.size = (terminal_size(stdout_fd) if cfg.interactive else None) or DEFAULT_SIZE
        self.term = TerminalOut(stdout_fd) if cfg.interactive else None
        self.screen = Screen(*self.size)
        self.backlog = bytearray()
        self.screen_not_before = 0.0  # the earliest next piece of pyte work (bounds pyte's share)
        self.screen_todo = b""  # output taken from the backlog for the screen update in progress
        self.screen_done = 0  # how much of it pyte has been fed
        self.screen_flooded = False  # output outran the screen model: its backlog was cut
        self.last_output = clock()
        self.delivery = cfg.initial_prompt
        self.nudger = Nudger(cfg.policy) if cfg.policy else None
        self.stall = StallWatch(cfg.policy) if cfg.policy else None
        self.waits_in_flight: set[tuple[object, object]] = set()
        self.last_user_input: float | None = None
        self.limit_deadline: float | None = None  # monotonic time a usage limit ends
        self.limit_banner: str | None = None  # the banner already handled
        self.hook_confirmed = False  # a UserPromptSubmit hook arrived for the prompt in flight
        self.worked = False  # busy since the agent was last ready
        self.agent_state = "starting"
        self.menu_open = False
        self.stopping: str | None = None
        self.outcome: Outcome | None = None
        self.child_gone = False
        self._stop_detail = ""
        self._wake_r = -1
        self.interest: Interest | None = None  # the loop's selector, while it runs

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> Outcome:
        sel = selectors.DefaultSelector()
        self.interest = interest = Interest(sel)
        with signal_pipe() as wake_r:
            self._wake_r = wake_r
            try:
                interest.want(self.child.fd, selectors.EVENT_READ, self._on_pty)
                interest.want(wake_r, selectors.EVENT_READ, self._on_signal)
                if self.cfg.interactive:
                    interest.want(self.stdin_fd, selectors.EVENT_READ, self._on_stdin)
                if self.mailbox is not None:
                    interest.want(self.mailbox.read_fd, selectors.EVENT_READ, self._on_mail)
                self.resume_limit()
                self._check_child()  # it may have died before the handlers were in place
                while self.outcome is None:
                    self._iterate(interest)
            finally:
                sel.close()
                self.interest = None
                if self.term is not None:
                    self._drain_terminal()
                    self.term.close()
        return self.outcome

    def _iterate(self, interest: Interest) -> None:
        term = self.term
        pty_events = selectors.EVENT_WRITE if self.child.wants_write else 0
        if term is None or term.pending < TERMINAL_HIGH_WATER:
            pty_events |= selectors.EVENT_READ
        interest.want(self.child.fd, pty_events, self._on_pty)
        if term is not None:
            interest.want(term.fd, selectors.EVENT_WRITE if term.pending else 0, self._on_terminal)
        for key, mask in interest.sel.select(self.timers.timeout(self.clock())):
            key.data(mask)
            if self.outcome is not None:
                return
        for name in self.timers.pop_due(self.clock()):
            getattr(self, f"_timer_{name}")()

    # -- agent output ----------------------------------------------------------------------
    def _on_pty(self, mask: int) -> None:
        if mask & selectors.EVENT_WRITE:
            self.child.flush()
        if mask & selectors.EVENT_READ:
            # A PTY hands out at most 4 KiB per read. What it has ready is read in the same
            # wake-up (up to RELAY_READS reads) and goes to the terminal and the logs in one go.
            room = TERMINAL_HIGH_WATER - (self.term.pending if self.term else 0)
            data, batch, size = self.child.read(), [], 0
            while data:
                batch.append(data)
                size += len(data)
                if len(batch) >= RELAY_READS or size >= room:
                    break
                data = self.child.read()
            if batch:
                self._relay(batch[0] if len(batch) == 1 else b"".join(batch))
            if data is None:
                self._agent_gone()

    def _relay(self, data: bytes) -> None:
        self._show(data)
        self._record(data)

    def _show(self, data: bytes) -> None:
        if self.cfg.interactive:
            self._write_stdout(data)

    def _record(self, data: bytes) -> None:
        self.logs.output(data)
        self.last_output = self.clock()
        self.timers.set_min("flush", self.last_output + FLUSH_EVERY)  # a quiet agent: no timer
        self.backlog += data
        if len(self.backlog) > 4 * SCREEN_BACKLOG:
            # The screen model is far behind: bound memory, and start afresh from the recent
            # past. The update in progress is stale now, and so would the next be before it
            # ends, as long as the flood lasts: pyte keeps a token share until the output pauses.
            del self.backlog[:-SCREEN_BACKLOG]
            self.screen.reset()
            self.screen_todo, self.screen_done = b"", 0
            self.screen_flooded = True
        self.timers.set_min("screen", max(self.last_output + SCREEN_DELAY, self.screen_not_before))

    def _write_stdout(self, data: bytes) -> None:
        if self.term is None:
            return
        try:
            self.term.write(data)
        except OSError as err:
            self._terminal_gone(err)

    def _title(self, text: str) -> None:
        """A notice in the terminal title (the agent's screen itself is never written to)."""
        if self.cfg.interactive:
            self._write_stdout(f"\x1b]0;{text}\x07".encode())

    def _on_terminal(self, mask: int) -> None:
        if self.term is None:  # gone earlier in this same wake-up
            return
        try:
            self.term.flush()
        except OSError as err:
            self._terminal_gone(err)

    def _terminal_gone(self, err: OSError) -> None:
        if err.errno not in (errno.EIO, errno.EPIPE, errno.EBADF, errno.ENXIO):
            raise err
        term, self.term = self.term, None  # nowhere left to show the agent's screen
        if term is not None:
            if self.interest is not None:
                self.interest.want(term.fd, 0, self._on_terminal)
            term.close()
        self._stop("terminal-closed", "the terminal went away")

    def _drain_terminal(self, stalled_after: float = 1.0) -> None:
        """At the end, let the terminal take the agent's last words, at the terminal's pace.

        It may hold up to TERMINAL_HIGH_WATER queued. A terminal that takes nothing for
        ``stalled_after`` seconds (paused, gone) is given up on; so is the rest when a stop
        signal comes meanwhile.
        """
        term = self.term
        give_up = self.clock() + stalled_after
        while term is not None and term.pending:
            before = term.pending
            try:
                term.flush()
            except OSError:
                return
            now = self.clock()
            if term.pending < before:
                give_up = now + stalled_after
            if not term.pending or now >= give_up:
                return
            ready, _, _ = select.select([self._wake_r], [term.fd], [], give_up - now)
            if self._wake_r in ready and any(s in STOP_SIGNALS for s in os.read(self._wake_r, 512)):
                return

    # -- the screen, detection, delivery -------------------------------------------------
    def _timer_screen(self) -> None:
        """Bring the screen model up to date, in slices that never hold up the relay for long.

        pyte costs 1-5 s of CPU per MB. It is fed in small pieces; after SCREEN_SLICE of work
        the loop serves the PTY and stdin before going on. While output keeps coming, every
        slice is followed by a pause 1/SCREEN_SHARE - 1 times as long, from the first slice
        of an update on, so pyte takes at most SCREEN_SHARE of the time even when one update
        has a long backlog to work through. Output faster than pyte can ever follow overflows
        the backlog, which is then cut with the update in progress (see ``_record``): until
        the output pauses, pyte gets only SCREEN_FLOOD_SHARE, as its work would be cut again.
        Once the agent is quiet, pyte catches up at once.
        """
        now = self.clock()
        if self.screen_todo and now < self.screen_not_before:
            self.timers.set("screen", self.screen_not_before)  # woken early: keep to the share
            return
        started = time.perf_counter()
        if not self.screen_todo:
            if len(self.backlog) > SCREEN_BACKLOG:
                # A flood or a huge dump: the screen model only needs the recent past.
                del self.backlog[:-SCREEN_BACKLOG]
                self.screen.reset()
            self.screen_todo, self.screen_done = bytes(self.backlog), 0
            self.backlog.clear()
        todo = self.screen_todo
        while self.screen_done < len(todo):
            self.screen.feed(todo[self.screen_done : self.screen_done + SCREEN_PIECE])
            self.screen_done += SCREEN_PIECE
            if self.screen_done < len(todo) and time.perf_counter() - started > SCREEN_SLICE:
                self._pace_screen(time.perf_counter() - started)
                self.timers.set("screen", self.screen_not_before)  # go on after a select at least
                return
        self.screen_todo = b""
        view = self.screen.view()
        self._pace_screen(time.perf_counter() - started)
        if self.backlog:  # output that came in while this update ran: its own update follows
            self.timers.set_min("screen", max(self.clock() + SCREEN_DELAY, self.screen_not_before))
        self._observe(view)

    def _pace_screen(self, work: float) -> None:
        """After ``work`` seconds of pyte: while the agent is writing, pause in proportion."""
        now = self.clock()
        if now - self.last_output >= SCREEN_DELAY:  # the agent is quiet: catch up at once
            self.screen_flooded = False
            self.screen_not_before = now
            return
        share = SCREEN_FLOOD_SHARE if self.screen_flooded else SCREEN_SHARE
        self.screen_not_before = now + work * (1 / share - 1)

    def _observe(self, view: ScreenView) -> None:
        adapter, now = self.cfg.adapter, self.clock()
        self._check_limit(now, view)
        # A banner already waited out stays on the screen for a while: it is history then.
        facts = Evidence(wait_in_flight=bool(self.waits_in_flight), limits=self.limit_deadline is not None)
        label, evidence = detect(adapter.rules, view, facts)
        if label != self.agent_state:
            self.session.event("state", state=label, previous=self.agent_state, evidence=evidence)
            self.agent_state = label
        if label in ("busy", "tool"):
            self.worked = True
        elif label == "ready" and self.worked:  # a turn ended (even via a screen in between)
            self.worked = False
            if self.nudger is not None:
                self.nudger.turn_ended(now)
        if label == "login" and self.stopping is None:
            self._login_required()
            return
        if self.limit_deadline is not None:
            return  # waiting out a usage limit: no prompts, no stall handling
        self._check_stall(now, label, view)
        if self.delivery is None or self.delivery.done:
            self._maybe_nudge(now, label, adapter.input_is_empty(view))
            return
        quiet_for = now - self.last_output
        if self.delivery.phase is Phase.WAITING and quiet_for < self.cfg.settle:
            self.timers.set_min("screen", self.last_output + self.cfg.settle)
            return
        seen = Observation(
            ready=label == "ready", busy=label in ("busy", "tool"), input_empty=adapter.input_is_empty(view)
        )
        steps_before = len(self.delivery.log)
        confirmed_by_hook, self.hook_confirmed = self.hook_confirmed, False
        for chunk in self.delivery.step(now, seen, confirmed_by_hook=confirmed_by_hook):
            self.child.queue(chunk)
        self._after_delivery_step(steps_before, now)

    def _after_delivery_step(self, steps_before: int, now: float) -> None:
        delivery = self.delivery
        assert delivery is not None
        for note in delivery.log[steps_before:]:
            self.session.event("delivery", kind=delivery.kind, phase=delivery.phase.value, note=note)
            self.logs.notice(f"{delivery.kind} prompt: {note}")
        if delivery.done:
            if delivery.phase is Phase.CONFIRMED and delivery.kind == "workflow":
                self.state.workflow_delivered = True
                self.session.save(self.state)
            return
        deadline = delivery.next_deadline(now)
        if deadline is not None:
            self.timers.set_min("screen", deadline)

    def _check_limit(self, now: float, view: ScreenView) -> None:
        """A usage-limit banner: wait until its reset time (+ a margin), then continue."""
        match = self.cfg.adapter.shows_limit(view)
        if match is None:
            self.limit_banner = None  # gone from the screen: the next one is news
            return
        banner = _line_of(view, match.group(0))
        if self.limit_deadline is not None or banner == self.limit_banner:
            return
        self.limit_banner = banner
        local = datetime.now().astimezone()
        margin = timedelta(seconds=self.cfg.limit_margin)
        default = timedelta(seconds=self.cfg.limit_default)
        until, how = limits.wait_until(
            banner, local, local.tzinfo or timezone.utc, default=default, margin=margin
        )
        self._wait_for_limit(now, until, how, banner)

    def _wait_for_limit(self, now: float, until: datetime, how: str, banner: str) -> None:
        seconds = max(0.0, (until - datetime.now().astimezone()).total_seconds())
        self.limit_deadline = now + seconds
        self.state.limit_until = until.isoformat(timespec="seconds")
        self.session.save(self.state)  # survives a supervisor restart
        self.session.event("limit", until=self.state.limit_until, how=how, banner=banner)
        self.logs.notice(f"usage limit: waiting until {self.state.limit_until} ({how})")
        self._title(f"waaah: {self.cfg.adapter.name} usage limit, waiting until {until:%H:%M}")
        self.timers.set("limit", self.limit_deadline)

    def _timer_limit(self) -> None:
        self.limit_deadline = None
        self.state.limit_until = ""
        self.session.save(self.state)
        self.session.event("limit-over")
        self.logs.notice("usage limit over: asking the agent to continue")
        keys = self.cfg.adapter.limit_resume_keys
        if keys and self.cfg.adapter.shows_limit(self.screen.view()):
            self.session.event("limit-resume", keys=keys.decode("latin-1"))
            self.child.queue(keys)  # the CLI's own "keep trying" on its limit screen
        if self.state.workflow_delivered and (self.delivery is None or self.delivery.done):
            self.delivery = Delivery("continue", CONTINUE_PROMPT, enter_delay=self.cfg.adapter.enter_delay)
        self.timers.set_min("screen", self.clock())

    def resume_limit(self) -> None:
        """A deadline saved by an earlier supervisor still holds: keep waiting for it."""
        if not self.state.limit_until:
            return
        until = datetime.fromisoformat(self.state.limit_until)
        if until > datetime.now().astimezone():
            self._wait_for_limit(self.clock(), until, "saved by an earlier run", "")

    def _maybe_nudge(self, now: float, label: str, input_empty: bool) -> None:
        if self.nudger is None or self.stopping is not None:
            return
        facts = Now(
            time=now,
            state=label,
            input_empty=input_empty,
            wait_in_flight=bool(self.waits_in_flight),
            last_activity=max(self.last_output, self.last_user_input or 0.0),
            last_user_input=self.last_user_input,
            workflow_delivered=self.state.workflow_delivered,
            delivering=self.delivery is not None and not self.delivery.done,
        )
        kind = self.nudger.decide(facts)
        if kind is None:
            if label == "ready":
                self.timers.set_min("screen", self.nudger.next_check(facts))
                self._note_next_heartbeat(now, self.nudger.next_heartbeat(facts))
            return
        text = CONTINUE_PROMPT if kind == "continue" else HEARTBEAT_PROMPT
        why = "the turn ended outside wait_for_prompt" if kind == "continue" else "idle at the prompt"
        self.session.event("nudge", kind=kind, reason=why, next_gap=self.nudger.gap)
        self.logs.notice(f"{kind} prompt: {why}")
        self.delivery = Delivery(kind, text, enter_delay=self.cfg.adapter.enter_delay)
        self.timers.set_min("screen", now)

    def _note_next_heartbeat(self, now: float, due: float) -> None:
        """For `waaah status`: saved only when it moves, so an idle agent costs no writes."""
        when = datetime.now().astimezone() + timedelta(seconds=due - now)
        text = when.isoformat(timespec="seconds")
        if self.state.next_heartbeat[:16] != text[:16]:  # minute resolution is plenty
            self.state.next_heartbeat = text
            self.session.save(self.state)

    def _check_stall(self, now: float, label: str, view: ScreenView) -> None:
        if self.stall is None or self.stopping is not None:
            return
        verdict = self.stall.observe(now, label == "busy", view.text(), bool(self.waits_in_flight))
        if label == "busy":
            self.timers.set_min("stall", now + 30.0)
        if verdict == "esc":
            self.session.event("stall", action="esc", minutes=self.stall.config.stall_timeout / 60)
            self.logs.notice("busy with nothing changing: sending Esc")
            self.child.queue(b"\x1b")
        elif verdict == "restart":
            self._stop("stalled", "still stalled after Esc: restarting the agent")

    def _timer_stall(self) -> None:
        self._observe(self.screen.view())

    def _login_required(self) -> None:
        adapter = self.cfg.adapter
        self._stop("login", f"{adapter.name} requires login. Run: {adapter.login_hint or adapter.binary}")

    # -- user input ----------------------------------------------------------------------
    def _on_stdin(self, mask: int) -> None:
        try:
            data = os.read(self.stdin_fd, 65536)
        except OSError:
            data = b""
        if not data:
            self._stop("terminal-closed", "the terminal closed")
            return
        self._user_input(data)

    def _user_input(self, data: bytes) -> None:
        """Forward keys byte for byte, except Ctrl+C (the menu) and keys meant for the menu."""
        self.last_user_input = self.clock()
        while data:
            if self.menu_open:
                data = self._menu_key(data)
                continue
            at, seq = min(((data.find(s), s) for s in CTRL_C if s in data), default=(-1, b""))
            if at < 0:
                self.child.queue(data)
                return
            self.child.queue(data[:at])
            self._open_menu()
            data = data[at + len(seq) :]

    def _open_menu(self) -> None:
        self.menu_open = True
        self.timers.set("menu", self.clock() + MENU_TIMEOUT)
        rows = self.size[1]
        self._write_stdout(f"\x1b7\x1b[{rows};1H\x1b[2K\x1b[7m{MENU}\x1b[0m\x1b8".encode())
        self.session.event("menu", action="open")

    def _menu_key(self, data: bytes) -> bytes:
        """Act on the first key typed into the menu; return the keys after it."""
        for seq in CTRL_C:  # Ctrl+C twice: the user means the agent
            if data.startswith(seq):
                self._close_menu("pass Ctrl+C")
                self.child.queue(b"\x03")
                return data[len(seq) :]
        key, rest = data[:1].lower(), data[1:]
        if key == b"s":
            self._close_menu("save and exit")
            self._stop("user", "you chose save and exit")
            return b""
        if key == b"p":
            self._close_menu("pass Ctrl+C")
            self.child.queue(b"\x03")
        elif key in (b"c", b"\r", b"\x1b", b"q"):
            self._close_menu("continue")
        return rest

    def _close_menu(self, choice: str) -> None:
        self.menu_open = False
        self.timers.cancel("menu")
        rows = self.size[1]
        self._write_stdout(f"\x1b7\x1b[{rows};1H\x1b[2K\x1b8".encode())
        self.session.event("menu", action=choice)
        self.logs.notice(f"Ctrl+C menu: {choice}")
        # Make the agent redraw the line the menu covered: a resize makes every TUI repaint.
        cols, rows = self.size
        self.child.set_size(cols, rows - 1)
        self.child.set_size(cols, rows)

    def _timer_menu(self) -> None:
        if self.menu_open:
            self._close_menu("continue (no choice made)")

    # -- background reports ----------------------------------------------------------------
    def _on_mail(self, mask: int) -> None:
        assert self.mailbox is not None
        for message in self.mailbox.drain():
            if message.kind == "inbox":
                self._read_inbox()
                continue
            self.session.event(message.kind, **message.data)
            if message.kind == "server":
                url = message.data["url"]
                if message.data["ok"]:
                    text = f"WAAAH server at {url} is reachable again"
                else:
                    text = f"WAAAH server at {url}: {message.data['detail']}"
                self.logs.notice(text)
                if not self.cfg.interactive:
                    self.notify(f"[waaah] {text}")
            elif message.kind == "agent-status":
                self.logs.notice(f"WAAAH server reports this agent {message.data['status'] or 'unknown'}")

    def _read_inbox(self) -> None:
        for record in self.inbox.read_new() if self.inbox else []:
            if isinstance(record, HookRecord):
                self._hook(record)
                continue
            self.session.event(f"mcp-{record.event}", **record.event_fields())
            if record.tool == "wait_for_prompt":
                key = (record.pid, record.call_id)
                if record.event is TapEvent.START:
                    self.waits_in_flight.add(key)
                    if self.nudger is not None:
                        self.nudger.saw_wait()
                else:
                    self.waits_in_flight.discard(key)
            if record.outcome is TapOutcome.EVICT:
                self._evicted(record.evict_action or "SHUTDOWN")

    def _hook(self, record: HookRecord) -> None:
        """The CLI's own hooks: the strongest evidence of a prompt taken and a turn ended."""
        name = record.hook_event_name or "unknown"
        self.session.event(f"hook-{name}", **record.event_fields())
        now = self.clock()
        if name == "UserPromptSubmit" and self.delivery is not None and not self.delivery.done:
            self.hook_confirmed = True
            self.timers.set_min("screen", now)
        elif name == "Stop" and self.nudger is not None:
            self.nudger.turn_ended(now)
            self.timers.set_min("screen", now + 0.1)

    def _evicted(self, action: str) -> None:
        if action == "SHUTDOWN":
            self._stop("evict", "the WAAAH server evicted this agent (SHUTDOWN)")
        else:
            self._stop("restart", f"the WAAAH server evicted this agent ({action})")

    # -- signals -------------------------------------------------------------------------
    def _on_signal(self, mask: int) -> None:
        try:
            raw = os.read(self._wake_r, 512)
        except BlockingIOError:
            raw = b""
        for signum in raw:
            self._handle_signal(signum)

    def _handle_signal(self, signum: int) -> None:
        if signum == signal.SIGWINCH:
            self._resize()
        elif signum == signal.SIGCHLD:
            self._check_child()
        elif signum in STOP_SIGNALS:
            name = signal.Signals(signum).name
            self._stop("signal", f"received {name}")

    def _resize(self) -> None:
        size = terminal_size(self.stdout_fd) if self.cfg.interactive else None
        if size is None or size == self.size:
            return
        self.size = size
        self.child.set_size(*size)
        self.screen.resize(*size)
        self.logs.resize(*size)
        self.session.event("resize", cols=size[0], rows=size[1])

    # -- the agent's end -----------------------------------------------------------------
    def _check_child(self) -> None:
        if not self.child_gone and not self.child.alive():
            self._agent_gone()

    def _agent_gone(self) -> None:
        """The agent exited (or closed its terminal): drain its last output, then finish."""
        if self.child_gone:
            return
        self.child_gone = True
        while True:
            data = self.child.read()
            if not data:
                break
            self._relay(data)
        deadline = self.clock() + 2.0
        while self.child.alive() and self.clock() < deadline:
            time.sleep(0.02)  # the PTY closed first; the exit status follows in a moment
        if self.child.alive():
            self.child.signal_group(signal.SIGKILL)
        status = self.child.status() if not self.child.alive() else None
        # Whatever else still runs in the agent's process group (MCP servers...) goes too.
        self.child.signal_group(signal.SIGTERM)
        if self.stopping is not None:
            self.outcome = Outcome(self.stopping, status, self._stop_detail)
        else:
            self.outcome = Outcome("agent-exit", status)

    def _stop(self, reason: str, detail: str) -> None:
        """Stop the agent's process group: SIGTERM now, SIGKILL at the deadline."""
        if self.stopping is not None:
            return
        self.stopping, self._stop_detail = reason, detail
        self.session.event("stop", reason=reason, detail=detail)
        self.logs.notice(f"stopping the agent: {detail}")
        self.child.signal_group(signal.SIGTERM)
        self.timers.set("kill", self.clock() + self.cfg.stop_grace)

    def _timer_kill(self) -> None:
        if not self.child_gone:
            self.session.event("kill", signal="SIGKILL", after_seconds=self.cfg.stop_grace)
            self.logs.notice(f"the agent ignored SIGTERM for {self.cfg.stop_grace:.0f}s: SIGKILL")
            self.child.signal_group(signal.SIGKILL)
            self.timers.set("kill", self.clock() + 1.0)

    def _timer_flush(self) -> None:
        self.logs.flush()
        if self.logs.skipping:  # its note on output left out of the text log is due later
            self.timers.set("flush", self.clock() + FLUSH_EVERY)


def _line_of(view: ScreenView, fragment: str) -> str:
    """The whole screen line holding ``fragment`` (the banner's reset time may follow it)."""
    for line in view.lines:
        if fragment[:40] in line:
            return line.strip(" │")
    return fragment


class Interest:
    """The events the loop's selector waits for on each fd; the selector hears only of changes.

    The agent's PTY and the terminal change what they wait for as queues fill and empty;
    asking the selector each time (and registering and unregistering) costs more than the
    wake-up it serves under a flood of output.
    """

    def __init__(self, sel: selectors.BaseSelector) -> None:
        self.sel = sel
        self.events: dict[int, int] = {}

    def want(self, fd: int, events: int, callback: Callable[[int], None]) -> None:
        """Make the selector wait for exactly ``events`` on ``fd`` (0: not at all)."""
        had = self.events.get(fd, 0)
        if events == had:
            return
        if not had:
            self.sel.register(fd, events, callback)
        elif events:
            self.sel.modify(fd, events, callback)
        else:
            self.sel.unregister(fd)
        self.events[fd] = events


def _ignore_in_handler(signum: int, frame: object) -> None:
    """The wake-up fd carries the signal number to the loop; the handler does nothing."""


@contextlib.contextmanager
def signal_pipe() -> Iterator[int]:
    """Route the watched signals to a pipe (yielded: its read end); restore everything after."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    old_wakeup = signal.set_wakeup_fd(wake_w)
    old_handlers = {s: signal.signal(s, _ignore_in_handler) for s in WATCHED_SIGNALS}
    try:
        yield wake_r
    finally:
        signal.set_wakeup_fd(old_wakeup)
        for signum, handler in old_handlers.items():
            signal.signal(signum, handler)
        os.close(wake_r)
        os.close(wake_w)


def wait_interruptibly(seconds: float, stdin_fd: int | None) -> str | None:
    """Sleep ``seconds`` unless a stop signal or Ctrl+C comes first; return what came."""
    deadline = time.monotonic() + seconds
    with signal_pipe() as wake_r:
        fds = [wake_r] if stdin_fd is None else [wake_r, stdin_fd]
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(fds, [], [], left)
            if wake_r in ready:
                for signum in os.read(wake_r, 512):
                    if signum in STOP_SIGNALS:
                        return f"received {signal.Signals(signum).name}"
            if stdin_fd is not None and stdin_fd in ready:
                keys = os.read(stdin_fd, 1024)
                if not keys:
                    return "the terminal closed"
                if any(seq in keys for seq in CTRL_C):
                    return "Ctrl+C"
    return None
