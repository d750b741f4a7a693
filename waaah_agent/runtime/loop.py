"""The supervisor loop: one thread, one ``selectors`` loop, timers as deadlines.

It relays bytes between the user's terminal and the agent's PTY unchanged and as they
arrive; everything else (logs, the screen model, detection, typing prompts) happens
beside that path. Signal handlers do nothing but wake the loop through
``signal.set_wakeup_fd``; no work happens inside a handler. Timers are named deadlines,
so a quiet agent costs no CPU: the loop sleeps in ``select`` until something happens.
"""

from __future__ import annotations

import errno
import logging
import os
import selectors
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from waaah_agent.adapters.base import Adapter
from waaah_agent.core.delivery import Delivery, Observation, Phase
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
SCREEN_BACKLOG = 512 * 1024  # beyond this much unprocessed output, keep only the tail
TERMINAL_HIGH_WATER = 1024 * 1024  # stop reading the agent while this much waits for the terminal
FLUSH_EVERY = 1.0
MENU_TIMEOUT = 20.0
MENU = " waaah: [c] continue   [s] save and exit   [p] pass Ctrl+C to the agent "
WATCHED_SIGNALS = (signal.SIGWINCH, signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGCHLD)


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
        self.last_output = clock()
        self.delivery = cfg.initial_prompt
        self.agent_state = "starting"
        self.menu_open = False
        self.stopping: str | None = None
        self.outcome: Outcome | None = None
        self.child_gone = False
        self._stop_detail = ""
        self._wake_r = -1

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> Outcome:
        wake_r, wake_w = os.pipe()
        self._wake_r = wake_r
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        old_wakeup = signal.set_wakeup_fd(wake_w)
        old_handlers = {s: signal.signal(s, _ignore_in_handler) for s in WATCHED_SIGNALS}
        sel = selectors.DefaultSelector()
        try:
            sel.register(self.child.fd, selectors.EVENT_READ, self._on_pty)
            sel.register(wake_r, selectors.EVENT_READ, self._on_signal)
            if self.cfg.interactive:
                sel.register(self.stdin_fd, selectors.EVENT_READ, self._on_stdin)
            if self.mailbox is not None:
                sel.register(self.mailbox.read_fd, selectors.EVENT_READ, self._on_mail)
            self.timers.set("flush", self.clock() + FLUSH_EVERY)
            self._check_child()  # it may have died before the handlers were in place
            while self.outcome is None:
                self._iterate(sel)
        finally:
            sel.close()
            if self.term is not None:
                self._drain_terminal()
                self.term.close()
            signal.set_wakeup_fd(old_wakeup)
            for signum, handler in old_handlers.items():
                signal.signal(signum, handler)
            os.close(wake_r)
            os.close(wake_w)
        return self.outcome

    def _iterate(self, sel: selectors.BaseSelector) -> None:
        term = self.term
        pty_events = selectors.EVENT_WRITE if self.child.wants_write else 0
        if term is None or term.pending < TERMINAL_HIGH_WATER:
            pty_events |= selectors.EVENT_READ
        _interest(sel, self.child.fd, pty_events, self._on_pty)
        if term is not None:
            _interest(sel, term.fd, selectors.EVENT_WRITE if term.pending else 0, self._on_terminal)
        for key, mask in sel.select(self.timers.timeout(self.clock())):
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
            data = self.child.read()
            if data is None:
                self._agent_gone()
            elif data:
                self._relay(data)

    def _relay(self, data: bytes) -> None:
        if self.cfg.interactive:
            self._write_stdout(data)
        self.logs.output(data)
        self.last_output = self.clock()
        self.backlog += data
        self.timers.set_min("screen", self.last_output + SCREEN_DELAY)

    def _write_stdout(self, data: bytes) -> None:
        if self.term is None:
            return
        try:
            self.term.write(data)
        except OSError as err:
            self._terminal_gone(err)

    def _on_terminal(self, mask: int) -> None:
        assert self.term is not None
        try:
            self.term.flush()
        except OSError as err:
            self._terminal_gone(err)

    def _terminal_gone(self, err: OSError) -> None:
        if err.errno not in (errno.EIO, errno.EPIPE, errno.EBADF, errno.ENXIO):
            raise err
        self.term = None  # nowhere left to show the agent's screen
        self._stop("terminal-closed", "the terminal went away")

    def _drain_terminal(self, seconds: float = 1.0) -> None:
        """At the end, give the terminal a moment to take the agent's last words."""
        deadline = self.clock() + seconds
        while self.term is not None and self.term.pending and self.clock() < deadline:
            try:
                self.term.flush()
            except OSError:
                return
            time.sleep(0.005)

    # -- the screen, detection, delivery -------------------------------------------------
    def _timer_screen(self) -> None:
        if len(self.backlog) > SCREEN_BACKLOG:
            # A binary blast or a huge dump: the screen model only needs the recent past.
            del self.backlog[:-SCREEN_BACKLOG]
            self.screen.reset()
        self.screen.feed(bytes(self.backlog))
        self.backlog.clear()
        self._observe(self.screen.view())

    def _observe(self, view: ScreenView) -> None:
        adapter, now = self.cfg.adapter, self.clock()
        label, evidence = classify(adapter, view)
        if label != self.agent_state:
            self.session.event("state", state=label, previous=self.agent_state, evidence=evidence)
            self.agent_state = label
        if label == "login" and self.stopping is None:
            self._login_required()
            return
        if self.delivery is None or self.delivery.done:
            return
        quiet_for = now - self.last_output
        if self.delivery.phase is Phase.WAITING and quiet_for < self.cfg.settle:
            self.timers.set_min("screen", self.last_output + self.cfg.settle)
            return
        seen = Observation(
            ready=label == "ready", busy=label == "busy", input_empty=adapter.input_is_empty(view)
        )
        steps_before = len(self.delivery.log)
        for chunk in self.delivery.step(now, seen):
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
            if record.get("source") != "mcp":
                continue
            fields = {k: v for k, v in record.items() if k not in ("source", "event", "ts")}
            self.session.event(f"mcp-{record.get('event', 'unknown')}", **fields)
            if record.get("outcome") == "evict":
                self._evicted(str(record.get("evict_action") or "SHUTDOWN"))

    def _evicted(self, action: str) -> None:
        if action == "SHUTDOWN":
            self._stop("evict", "the WAAAH server evicted this agent (SHUTDOWN)")
        else:
            self.logs.notice(f"the WAAAH server asked for {action}; the agent stays up")

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
        elif signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
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
        self.timers.set("flush", self.clock() + FLUSH_EVERY)


def classify(adapter: Adapter, view: ScreenView) -> tuple[str, str]:
    """The agent's state as far as the screen shows it, with the evidence."""
    if m := adapter.shows_login(view):
        return "login", f"screen: {m.group(0)!r}"
    if m := adapter.shows_exit(view):
        return "exiting", f"screen: {m.group(0)!r}"
    if m := adapter.shows_limit(view):  # gemini's limit dialog sits under a "Working…" title
        return "limited", f"screen: {m.group(0)!r}"
    if adapter.is_busy(view):
        return "busy", f"title {view.title!r}" if view.title else "screen: busy marker"
    if m := adapter.shows_dialog(view):
        return "dialog", f"screen: {m.group(0)!r}"
    if adapter.is_ready(view):
        return "ready", f"screen: input prompt (title {view.title!r})"
    return "starting", "no input prompt yet"


def _interest(sel: selectors.BaseSelector, fd: int, events: int, callback: Callable[[int], None]) -> None:
    """Register, modify or unregister ``fd`` so that the selector waits for exactly ``events``."""
    try:
        key = sel.get_key(fd)
    except KeyError:
        if events:
            sel.register(fd, events, callback)
        return
    if not events:
        sel.unregister(fd)
    elif key.events != events:
        sel.modify(fd, events, callback)


def _ignore_in_handler(signum: int, frame: object) -> None:
    """The wake-up fd carries the signal number to the loop; the handler does nothing."""
