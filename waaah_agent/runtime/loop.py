"""The supervisor loop: one thread, one ``selectors`` loop, timers as deadlines. I/O only.

It relays bytes between the user's terminal and the agent's PTY unchanged and as they
arrive; everything else happens beside that path. What the supervisor *decides* is the
pure machine's (``core/machine.py``): the loop turns what happens into its events
(a screen reading, keys, tap and hook records, the child's exit, signals, deadlines) and
applies the actions that come back. Signal handlers only wake the loop through
``signal.set_wakeup_fd``. A quiet agent costs no CPU: the loop sleeps in ``select`` until
the nearest deadline. Nothing in it sleeps.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from waaah_agent.core import events as ev
from waaah_agent.core.detect import ScreenRules, read
from waaah_agent.core.machine import Machine
from waaah_agent.runtime.background import OWN, Mailbox, Message
from waaah_agent.runtime.child import AgentProcess
from waaah_agent.runtime.inbox import Inbox
from waaah_agent.runtime.logs import SessionLogs
from waaah_agent.runtime.screenfeed import ScreenFeed
from waaah_agent.runtime.signals import STOP_SIGNALS, signal_pipe
from waaah_agent.runtime.store import SessionDir, SessionState
from waaah_agent.runtime.terminal import DEFAULT_SIZE, TerminalOut, terminal_size

TERMINAL_HIGH_WATER = 1024 * 1024  # stop reading the agent while this much waits for the terminal
RELAY_READS = 16  # PTY reads per wake-up at most, before the loop looks at everything else
FLUSH_EVERY = 1.0
REAP_EVERY = 0.02  # the PTY closed: look for the exit status this often ...
REAP_FOR = 2.0  # ... this long, then SIGKILL
# The Ctrl+C menu, longest first: the first that fits the width without its last column.
MENU_FORMS = (
    " waaah: [c] continue   [s] save and exit   [p] pass Ctrl+C to the agent ",
    " waaah: [c]ontinue [s]ave+exit [p]ass ^C ",
    " [c] [s] [p] ",
)
TAIL = 64  # bytes of the agent's output kept to tell whether it stopped inside a sequence
SETTLE_AT_END = 64 * 1024  # output the screen model may still take at the end (to find the frame)
# At the end, the modes a CLI may leave on: attributes, a hidden cursor, no autowrap, a scroll
# region, bracketed paste, mouse reports, focus events, application keys, the kitty keyboard.
LEAVE_MODES = (
    b"\x1b[0m\x1b[?25h\x1b[?7h\x1b7\x1b[r\x1b8\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l"
    b"\x1b[?1006l\x1b[?1004l\x1b[?1l\x1b>\x1b[<u"
)
REPAINT_AFTER = 0.05
# The smallest pane whose screen the rules can read: the input box and its placeholder on one
# row (gemini's box and hint need ~40 columns) and the bottom rows a dialog or footer takes.
MIN_COLS, MIN_ROWS = 40, 12  # the menu closed: the agent sees one row less for this long, then its size


class Timer(Enum):
    """The loop's own deadlines (the machine keeps its own: ``Machine.next_due``)."""

    SCREEN = "screen"  # bring the screen model up to date and show it to the machine
    FLUSH = "flush"  # flush the logs a second after output
    REAP = "reap"  # the PTY closed: is the exit status there yet?
    TEND = "tend"  # the slow look at the agent's process tree (the caller's ``tend``)
    REPAINT = "repaint"  # give the agent its size back: it repaints what the menu covered


@dataclass
class Timers:
    """Deadlines on the monotonic clock."""

    due: dict[Timer, float] = field(default_factory=dict)

    def set(self, timer: Timer, when: float) -> None:
        self.due[timer] = when

    def set_min(self, timer: Timer, when: float) -> None:
        """Fire at ``when`` unless already due earlier."""
        self.due[timer] = min(when, self.due.get(timer, when))

    def pop_due(self, now: float) -> list[Timer]:
        timers = [n for n, t in self.due.items() if t <= now]
        for n in timers:
            del self.due[n]
        return timers


@dataclass
class LoopConfig:
    rules: ScreenRules
    interactive: bool


def local_now() -> datetime:
    return datetime.now().astimezone()


class Supervisor:
    """Runs one agent process to its end. Build it, call :meth:`run` once."""

    def __init__(
        self,
        cfg: LoopConfig,
        machine: Machine,
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
        wall: Callable[[], datetime] = local_now,
        tend: Callable[[], float] | None = None,
    ) -> None:
        self.cfg, self.machine, self.child = cfg, machine, child
        self.session, self.state, self.logs = session, state, logs
        self.stdin_fd, self.stdout_fd, self.notify = stdin_fd, stdout_fd, notify
        self.mailbox, self.inbox = mailbox, inbox
        self.clock, self.wall = clock, wall
        self.timers = Timers()
        self.size = (terminal_size(stdout_fd) if cfg.interactive else None) or DEFAULT_SIZE
        self.term = TerminalOut(stdout_fd) if cfg.interactive else None
        self.feed = ScreenFeed(*self.size, clock=clock)
        self.outcome: ev.Outcome | None = None
        self.reap_until: float | None = None  # set once the PTY closed: the child is going
        self._wake_r = -1
        self.interest: Interest | None = None  # the loop's selector, while it runs
        self.tend = tend  # called on its own slow timer; returns the seconds until the next call
        self._on_timer = {
            Timer.SCREEN: self._update_screen,
            Timer.FLUSH: self._flush,
            Timer.REAP: self._reap,
            Timer.TEND: self._tend,
            Timer.REPAINT: self._repaint,
        }
        self.menu_shown = False
        self._tail = b""  # the end of the last output relayed (is an escape sequence open?)
        self._held = b""  # our own bytes, held until the agent's open escape sequence ends
        self.too_small = False  # the pane is too small to read the agent's screen (title says so)
        self._small_title = ""
        self._agent_title = ""
        self.alt_screen = False  # the agent is on the alternate screen (it sent CSI ?1049h)

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> ev.Outcome:
        sel = selectors.DefaultSelector()
        self.interest = interest = Interest(sel)
        with signal_pipe() as wake_r:
            self._wake_r = wake_r
            try:
                interest.want(wake_r, selectors.EVENT_READ, self._on_signal)
                if self.cfg.interactive:
                    interest.want(self.stdin_fd, selectors.EVENT_READ, self._on_stdin)
                if self.mailbox is not None:
                    interest.want(self.mailbox.read_fd, selectors.EVENT_READ, self._on_mail)
                self.tell(ev.Began())
                self._check_size()
                if self.tend is not None:
                    self._tend()
                self._check_child()  # it may have died before the handlers were in place
                while self.outcome is None:
                    self._iterate(interest)
            finally:
                sel.close()
                self.interest = None
                if self.term is not None:
                    self._write_stdout(self._held + self._leave_screen())
                    self.term.drain(self._wake_r)
                    self.term.close()
        return self.outcome

    def _iterate(self, interest: Interest) -> None:
        term = self.term
        pty_events = 0
        if self.reap_until is None:  # once the PTY closed it would read as ready forever
            pty_events = selectors.EVENT_WRITE if self.child.wants_write else 0
            if term is None or term.pending < TERMINAL_HIGH_WATER:
                pty_events |= selectors.EVENT_READ
        interest.want(self.child.fd, pty_events, self._on_pty)
        if term is not None:
            interest.want(term.fd, selectors.EVENT_WRITE if term.pending else 0, self._on_terminal)
        for key, mask in interest.sel.select(self._timeout()):
            key.data(mask)
            if self.outcome is not None:
                return
        now = self.clock()
        for timer in self.timers.pop_due(now):
            self._on_timer[timer]()
        due = self.machine.next_due()
        if due is not None and due <= now and self.outcome is None:
            self.tell(ev.Tick())

    def _timeout(self) -> float | None:
        deadlines = list(self.timers.due.values())
        if (due := self.machine.next_due()) is not None:
            deadlines.append(due)
        return max(0.0, min(deadlines) - self.clock()) if deadlines else None

    # -- the machine -----------------------------------------------------------------------
    def tell(self, event: ev.Event) -> None:
        """Hand ``event`` to the machine and carry out what it decides."""
        for action in self.machine.handle(event, ev.Instant(self.clock(), self.wall())):
            self._apply(action)

    def _apply(self, action: ev.Action) -> None:
        match action:
            case ev.Type(data):
                self.child.queue(data)
            case ev.Look(at):
                self.timers.set_min(Timer.SCREEN, self.feed.when(at))
            case ev.Record(name, fields):
                self.session.event(name, **fields)
            case ev.Notice(text):
                self.logs.notice(text)
            case ev.Say(text):
                self.notify(text)
            case ev.Title(text):
                if self.cfg.interactive:  # the agent's screen itself is never written to
                    self._write_own(f"\x1b]0;{self.session.redact(text)}\x07".encode())
            case ev.Save(changes):
                for name, value in changes.items():
                    setattr(self.state, name, value)
                self.session.save(self.state)
            case ev.SignalAgent(kill):
                self.child.signal_group(signal.SIGKILL if kill else signal.SIGTERM)
            case ev.Menu(open_):
                self._menu(open_)
            case ev.HideInput(hidden):
                self.logs.hide(hidden)
            case ev.Finish(outcome):
                self.outcome = outcome

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
        if self.term is not None:
            self._write_stdout(data)
            if (alt := data.rfind(b"\x1b[?1049")) >= 0 and alt + 7 < len(data):
                self.alt_screen = data[alt + 7] == ord("h")
            self._tail = data[-TAIL:] if len(data) >= TAIL else (self._tail + data)[-TAIL:]
            if (self.menu_shown or self._held) and not inside_sequence(self._tail):
                held, self._held = self._held, b""
                self._write_stdout(held)
                if self.menu_shown:  # the agent may have drawn over it
                    self._draw_menu()
        self.logs.output(data)
        now = self.clock()
        self.timers.set_min(Timer.FLUSH, now + FLUSH_EVERY)  # a quiet agent: no timer
        self.timers.set_min(Timer.SCREEN, self.feed.add(data, now))

    def _update_screen(self) -> None:
        view, again = self.feed.update()
        if again is not None:
            # Unfinished: go on at the paced time. Finished with more output waiting: soon.
            (self.timers.set if view is None else self.timers.set_min)(Timer.SCREEN, again)
        if view is not None:
            if view.title != self._agent_title:
                self._agent_title = view.title
                if self.too_small:  # the agent set its title over ours: say it again
                    self._write_own(f"\x1b]0;{self._small_title}\x07".encode())
            self.tell(ev.Observed(read(self.cfg.rules, view), self.feed.last_output))

    def _flush(self) -> None:
        self.logs.flush()
        if self.logs.skipping:  # its note on output left out of the text log is due later
            self.timers.set(Timer.FLUSH, self.clock() + FLUSH_EVERY)

    # -- the user's terminal -----------------------------------------------------------------
    def _on_stdin(self, mask: int) -> None:
        try:
            data = os.read(self.stdin_fd, 65536)
        except OSError:
            data = b""
        if not data:
            self.tell(ev.StopAsked(ev.StopReason.TERMINAL_CLOSED, "the terminal closed"))
            return
        if self.timers.due.pop(Timer.SCREEN, None) is not None:  # keys answer what is on the
            self._update_screen()  # screen: read it first (a key dialog's echo must be hidden)
        self.tell(ev.Keys(data))

    def _write_stdout(self, data: bytes) -> None:
        if self.term is None:
            return
        try:
            self.term.write(data)
        except OSError as err:
            self._terminal_gone(err)

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
        self.tell(ev.StopAsked(ev.StopReason.TERMINAL_CLOSED, "the terminal went away"))

    def _menu(self, show: bool) -> None:
        """Draw the Ctrl+C menu on the bottom row, or remove it and have the agent repaint.

        The menu never wraps or scrolls: one form or another fits the width without its
        last column (writing the bottom-right cell would scroll some terminals), and no
        newline is written. On close the row is cleared, then the agent is shown one row
        less and, a moment later, its size again: a size change makes a TUI repaint (a
        second size change at once would go unnoticed by a CLI that compares sizes).
        """
        self.menu_shown = show
        if self.term is None:
            return
        cols, rows = self.size
        if show:
            self._draw_menu()
            return
        self._write_own(f"\x1b7\x1b[{rows};1H\x1b[2K\x1b8".encode())
        self.child.set_size(cols, max(1, rows - 1))
        self.timers.set(Timer.REPAINT, self.clock() + REPAINT_AFTER)

    def _draw_menu(self) -> None:
        cols, rows = self.size
        self._write_own(f"\x1b7\x1b[{rows};1H\x1b[2K\x1b[7m{menu_text(cols)}\x1b[0m\x1b8".encode())

    def _leave_screen(self) -> bytes:
        """What leaves the terminal sane after the agent, with the cursor on a fresh line below
        its last frame: where our lines (the exit text, a restart notice) begin."""
        out = LEAVE_MODES
        if self.alt_screen:  # its frames go with it; the cursor is back where the agent began
            return out + b"\x1b[?1049l\r\n\x1b[J"
        below = self._rows_below_cursor()
        down = f"\x1b[{below}B" if below else ""  # CUD stops at the bottom row: never scrolls
        return out + f"{down}\r\n\x1b[J".encode()

    def _rows_below_cursor(self) -> int:
        """Rows of the agent's frame below its cursor (the bottom of the screen if not known)."""
        feed = self.feed
        rest = len(feed.todo) - feed.done + len(feed.backlog)
        if feed.flooded or rest > SETTLE_AT_END:
            return self.size[1]
        if feed.done < len(feed.todo):
            feed.screen.feed(feed.todo[feed.done :])
        feed.screen.feed(bytes(feed.backlog))
        feed.todo, feed.done = b"", 0
        feed.backlog.clear()
        view = feed.screen.view()
        last = max((i for i, line in enumerate(view.lines) if line.strip()), default=0)
        return max(0, last - view.cursor_row)

    def _write_own(self, data: bytes) -> None:
        """Bytes of ours for the terminal: now, or once the agent's open escape sequence ended."""
        if inside_sequence(self._tail):
            self._held += data
        else:
            self._write_stdout(data)

    def _repaint(self) -> None:
        self.child.set_size(*self.size)

    # -- background reports ----------------------------------------------------------------
    def _on_mail(self, mask: int) -> None:
        assert self.mailbox is not None
        for message in self.mailbox.drain():
            data = message.data
            if message.kind == "inbox":
                for record in self.inbox.read_new() if self.inbox else []:
                    self.tell(record)
            elif message.kind == "server":
                self.tell(ev.ServerChanged(bool(data["ok"]), str(data["detail"]), str(data["url"])))
            elif message.kind == "agent-status":
                self.tell(ev.AgentStatusChanged(data.get("status")))
            elif message.kind == OWN:
                record_own(message, self.logs, self.session)

    # -- signals -------------------------------------------------------------------------
    def _on_signal(self, mask: int) -> None:
        try:
            raw = os.read(self._wake_r, 512)
        except BlockingIOError:
            raw = b""
        for signum in raw:
            if signum == signal.SIGWINCH:
                self._resize()
            elif signum == signal.SIGCHLD:
                self._check_child()
            elif signum in STOP_SIGNALS:
                self.tell(ev.StopAsked(ev.StopReason.SIGNAL, f"received {signal.Signals(signum).name}"))

    def _resize(self) -> None:
        size = terminal_size(self.stdout_fd) if self.cfg.interactive else None
        if size is None or size == self.size:
            return
        self.size = size
        self.child.set_size(*size)
        self.feed.resize(*size)
        self.logs.resize(*size)
        self.tell(ev.Resized(*size))
        if self.menu_shown:
            self._draw_menu()  # on the new bottom row, in the form that fits
        self._check_size()

    def _check_size(self) -> None:
        """A pane too small to read the agent's screen is said in the title, the log and the
        events (never on the screen), at the start and at each resize; the title keeps saying
        it (the agent's own titles are answered with it again) until the pane is big enough."""
        if not self.cfg.interactive:
            return
        cols, rows = self.size
        small = cols < MIN_COLS or rows < MIN_ROWS
        if small:
            self._small_title = f"waaah: pane {cols}x{rows} too small, make it {MIN_COLS}x{MIN_ROWS}+"
            self._write_own(f"\x1b]0;{self._small_title}\x07".encode())
        if small == self.too_small and not small:
            return
        if small and not self.too_small:
            self.logs.notice(
                f"the pane ({cols}x{rows}) is too small to read the agent's screen; make it at least "
                f"{MIN_COLS}x{MIN_ROWS}: until then the workflow and nudges may wait"
            )
        elif not small:
            self.logs.notice(f"the pane ({cols}x{rows}) is big enough again")
            self._write_own(f"\x1b]0;{self._agent_title}\x07".encode())
        self.session.event("pane-size", cols=cols, rows=rows, too_small=small, need=f"{MIN_COLS}x{MIN_ROWS}")
        self.too_small = small

    # -- the agent's end -----------------------------------------------------------------
    def _check_child(self) -> None:
        if self.reap_until is None and not self.child.alive():
            self._agent_gone()

    def _agent_gone(self) -> None:
        """The agent exited (or closed its terminal): drain its last output, then reap it."""
        if self.reap_until is not None:
            return
        self.reap_until = self.clock() + REAP_FOR
        while data := self.child.read():
            self._relay(data)
        self._reap()

    def _tend(self) -> None:
        assert self.tend is not None
        self.timers.set(Timer.TEND, self.clock() + self.tend())

    def _reap(self) -> None:
        """The PTY closed first; the exit status follows in a moment (no sleep: a timer)."""
        assert self.reap_until is not None
        if self.child.alive():
            if self.clock() < self.reap_until:
                self.timers.set(Timer.REAP, self.clock() + REAP_EVERY)
                return
            self.child.signal_group(signal.SIGKILL)
        status = self.child.status() if not self.child.alive() else None
        self.tell(ev.ChildExited(status))


def menu_text(cols: int) -> str:
    """The Ctrl+C menu in the longest form that leaves the last column free."""
    for form in MENU_FORMS:
        if len(form) < cols:
            return form
    return MENU_FORMS[-1][: max(0, cols - 1)]


def inside_sequence(tail: bytes) -> bool:
    """Whether output ending in ``tail`` stopped inside an escape sequence or a UTF-8 character
    (our own bytes written now would be taken as part of it)."""
    esc = tail.rfind(b"\x1b")
    if esc >= 0:
        rest = tail[esc + 1 :]
        if not rest:
            return True
        if rest[:1] == b"[":  # CSI: parameters and intermediates, then a final byte
            return not any(0x40 <= b <= 0x7E for b in rest[1:])
        if rest[:1] in (b"]", b"P", b"_", b"^"):  # OSC, DCS...: until BEL or ST
            return b"\x07" not in rest
        if rest[:1] in (b"(", b")", b"*", b"+", b"#", b"%") and len(rest) < 2:
            return True
    for back in range(1, min(4, len(tail)) + 1):  # a multi-byte character cut short
        byte = tail[-back]
        if byte < 0x80:
            return False
        if byte >= 0xC0:
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return back < need
    return False


def record_own(message: Message, logs: SessionLogs, session: SessionDir) -> None:
    """A line of the supervisor's own (``OwnOutput``): the text log; a failure also the events."""
    logs.notice(str(message.data["text"]))
    if message.data.get("error"):
        session.event("internal-error", error=str(message.data["error"]))


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
