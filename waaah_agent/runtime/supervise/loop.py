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
import gc
import os
import select
import selectors
import signal
import time
from collections.abc import Callable
from datetime import datetime

from waaah_agent.core.supervise import events as ev
from waaah_agent.core.supervise.detect import ScreenReader
from waaah_agent.core.supervise.machine import Machine
from waaah_agent.core.supervise.termanswers import TerminalAnswers
from waaah_agent.runtime.store import SessionDir, SessionState
from waaah_agent.runtime.supervise import waiting
from waaah_agent.runtime.supervise.background import Mailbox
from waaah_agent.runtime.supervise.child import AgentProcess
from waaah_agent.runtime.supervise.inbox import Inbox
from waaah_agent.runtime.supervise.logs import SessionLogs
from waaah_agent.runtime.supervise.overlay import MIN_COLS, MIN_ROWS, Overlay
from waaah_agent.runtime.supervise.reports import Reports
from waaah_agent.runtime.supervise.screenfeed import SCREEN_DELAY, ScreenFeed
from waaah_agent.runtime.supervise.signals import STOP_SIGNALS, signal_pipe
from waaah_agent.runtime.supervise.terminal import DEFAULT_SIZE, HIGH_WATER, TerminalOut, terminal_size
from waaah_agent.runtime.supervise.waiting import Interest, LoopConfig, Timer, Timers, local_now

RELAY_READS = 16  # PTY reads per wake-up at most, before the loop looks at everything else


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
        self.reports = None  # what the background threads report (runtime/reports.py)
        if mailbox is not None:
            self.reports = Reports(mailbox, inbox, logs, session, self.tell, lambda: self.outcome is not None)
        self.clock, self.wall = clock, wall
        self.timers: Timers[Timer] = Timers()
        self.size = (terminal_size(stdout_fd) if cfg.interactive else None) or DEFAULT_SIZE
        self.term = TerminalOut(stdout_fd) if cfg.interactive else None
        self.feed = ScreenFeed(*self.size, clock=clock)
        self.reader = ScreenReader(cfg.rules)
        self.answers = TerminalAnswers(*self.size) if cfg.answer_queries and not cfg.interactive else None
        self.outcome: ev.Outcome | None = None
        self.reap_until: float | None = None  # set once the PTY closed: the child is going
        self._wake_r = -1
        self._keys_seq = 0  # the output the screen must have been read up to before the record goes on
        self.interest: Interest | None = None  # the loop's selector, while it runs
        self.tend = tend  # called on its own slow timer; returns the seconds until the next call
        self._on_timer = {
            Timer.SCREEN: self._update_screen,
            Timer.FLUSH: self._flush,
            Timer.REAP: self._reap,
            Timer.TEND: self._tend,
            Timer.REPAINT: self._repaint,
            Timer.HELD: self._overlay_overdue,
        }
        # The menu, titles, the sane end; bytes it holds for an open sequence go out in time.
        self.overlay = Overlay(
            self._write_stdout, self.size, clock, lambda at: self.timers.set(Timer.HELD, at)
        )
        self._stdin_poll: select.poll | None = None
        if cfg.interactive:
            self._stdin_poll = select.poll()
            self._stdin_poll.register(stdin_fd, select.POLLIN)

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
                if self.term is not None:  # its writer's news: drained, or the terminal gone
                    interest.want(self.term.wake_fd, selectors.EVENT_READ, self._on_terminal)
                if self.reports is not None:
                    interest.want(self.reports.mailbox.read_fd, selectors.EVENT_READ, self.reports.on_mail)
                self.tell(ev.Began())
                self._check_size()
                if self.tend is not None:
                    self._tend()
                self._check_child()  # it may have died before the handlers were in place
                # What start-up made (modules, the screen model, compiled patterns) lives all
                # night: the collector stops walking it, so its passes stay short (a pass over it
                # held the relay for tens of ms, the output latency's p99).
                gc.freeze()
                while self.outcome is None:
                    self._iterate(interest)
            finally:
                sel.close()
                self.interest = None
                self.logs.flush()  # the last reads recorded: the caller reads its last lines
                if self.term is not None:
                    self._write_stdout(self.overlay.leave(self.feed.rows_below_cursor()))
                    self.term.drain(self._wake_r)
                    self.term.close()
        return self.outcome

    def _iterate(self, interest: Interest) -> None:
        term = self.term
        if self.reap_until is None:  # once the PTY closed it would read as ready forever
            pty_events = selectors.EVENT_WRITE if self.child.wants_write else 0
            if term is None or term.pending < HIGH_WATER:
                pty_events |= selectors.EVENT_READ
            interest.want(self.child.fd, pty_events, self._on_pty)
        due = self.machine.next_due()
        timers = self.timers.due
        if timers:
            first = min(timers.values())
            due = first if due is None or first < due else due
        for callback, mask in interest.poll(None if due is None else max(0.0, due - self.clock())):
            callback(mask)
            if self.outcome is not None:
                return
        if due is None:
            return
        now = self.clock()
        if timers:
            for timer in self.timers.pop_due(now):
                self._on_timer[timer]()
        due = self.machine.next_due()
        if due is not None and due <= now and self.outcome is None:
            self.tell(ev.Tick())

    # -- the machine -----------------------------------------------------------------------
    def tell(self, event: ev.Event) -> None:
        """Hand ``event`` to the machine and carry out what it decides."""
        for action in self.machine.handle(event, ev.Instant(self.clock(), self.wall())):
            self._apply(action)

    def _apply(self, action: ev.Action) -> None:
        match action:
            case ev.Type(data):
                self.child.queue(data)
                self.child.flush()  # at once: a key waits for no wake-up of the loop
            case ev.Look(at):
                self.timers.set_min(Timer.SCREEN, self.feed.when(at))
            case ev.Record(name, fields):
                self.session.event(name, **fields)
            case ev.Notice(text):
                self.logs.notice(text)
            case ev.Say(text):
                self.notify(text)
            case ev.Title(text, hold):
                if self.cfg.interactive:  # the agent's screen itself is never written to
                    self.overlay.our_title(self.session.redact(text), hold)
            case ev.Save(changes):
                for name, value in changes.items():
                    setattr(self.state, name, value)
                self.session.save(self.state)
            case ev.Enqueue(text, sent):
                self.state.queued.append(text)  # what the next run of the agent starts with
                self.session.queue.add(text, sent)
            case ev.Dequeue():
                self.child.flush()  # the Enter that submitted it reaches the agent first
                if self.state.queued:
                    self.state.queued.pop(0)
                if self.session.queue.pop():  # one of session.json's own
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
            # A PTY hands out a few KiB per read. What it has ready is read in the same wake-up
            # (up to RELAY_READS reads, in one call) and goes to the terminal and the logs in one go.
            room = HIGH_WATER - (self.term.pending if self.term else 0)
            data, closed = self.child.read_ready(RELAY_READS, room)
            if data:
                self._relay(data)
            if closed:
                self._agent_gone()

    def _relay(self, data: bytes) -> None:
        if self.term is not None:
            self._write_stdout(data)
            self.overlay.relayed(data)
        now = self.clock()
        if (update := self.feed.add(data, now)) is not None:  # a repeated redraw wakes nothing
            self.timers.set_min(Timer.SCREEN, update)
        self.logs.output(data, self.feed.seq, repeat=update is None)
        if self.answers is not None and (reply := self.answers.feed(data)):
            self.child.queue(reply)
        self.timers.set_min(Timer.FLUSH, now + waiting.FLUSH_EVERY)  # a quiet agent: no timer

    def _update_screen(self) -> None:
        view, again = self.feed.update(self._keys_waiting)
        if again is not None:
            # Unfinished: go on at the paced time. Finished with more output waiting: soon.
            (self.timers.set if view is None else self.timers.set_min)(Timer.SCREEN, again)
        if view is not None:
            self.overlay.agent_titled(view.title)
            self._serve_keys()  # typed while the screen model worked: forwarded first ...
            observed = self.reader.read(view)
            self._serve_keys()  # ... and while the screen was read
            if self.outcome is not None:
                return
            unread = self.child.unread_input() if self.machine.asks_unread else 0
            self.tell(ev.Observed(observed, self.feed.last_output, unread))
            if self.logs.waiting:  # what the keys made the agent show: recorded (or hidden) ...
                read_all = self.feed.read_seq >= self._keys_seq
                self.logs.screen_read(None if read_all else self.feed.read_seq)  # ... as far as read

    def _flush(self) -> None:
        self.logs.flush()
        if self.logs.skipping:  # its note on output left out of the text log is due later
            self.timers.set(Timer.FLUSH, self.clock() + waiting.FLUSH_EVERY)

    # -- the user's terminal -----------------------------------------------------------------
    def _keys_waiting(self) -> bool:
        """The user typed something the loop has not read yet (asked between pieces of slow work)."""
        return self._stdin_poll is not None and bool(self._stdin_poll.poll(0))

    def _serve_keys(self) -> None:
        """Forward what the user typed meanwhile, now (between two pieces of slow work)."""
        if self.outcome is None and self._keys_waiting():
            self._on_stdin(selectors.EVENT_READ)

    def _on_stdin(self, mask: int) -> None:
        try:
            data = os.read(self.stdin_fd, 65536)
        except OSError:
            data = b""
        if not data:
            self.tell(ev.StopAsked(ev.StopReason.TERMINAL_CLOSED, "the terminal closed"))
            return
        typed = not self.child.wants_write and self.machine.passes(data)
        if typed:  # at once: what follows only decides about the record (the echo is read later)
            self.child.queue(data)
            self.child.flush()
        if self.feed.unread:  # keys answer a screen not read yet (a key dialog's echo must be
            self.logs.wait_for_screen()  # hidden): the record, not the key, waits for the reading
            self._keys_seq = self.feed.seq
            self.feed.mark()  # ... of that screen as it is now, whatever comes after
            self.timers.set_min(Timer.SCREEN, self.feed.when(self.clock() + SCREEN_DELAY))
        self.tell(ev.Keys(data, typed))

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
                self.interest.want(term.wake_fd, 0, self._on_terminal)
            term.close()
        self.tell(ev.StopAsked(ev.StopReason.TERMINAL_CLOSED, "the terminal went away"))

    def _menu(self, show: bool) -> None:
        """The Ctrl+C menu; on close, the agent is shown one row less and, a moment later, its
        size again: a size change makes a TUI repaint the row the menu covered (a second change
        at once would go unnoticed by a CLI that compares sizes)."""
        if self.term is None:
            return
        self.overlay.menu(show)
        if not show:
            cols, rows = self.size
            self.child.set_size(cols, max(1, rows - 1))
            self.timers.set(Timer.REPAINT, self.clock() + waiting.REPAINT_AFTER)

    def _overlay_overdue(self) -> None:
        self.overlay.overdue()

    def _repaint(self) -> None:
        self.child.set_size(*self.size)

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
        self.overlay.resized(size)
        self._check_size()

    def _check_size(self) -> None:
        """A pane too small to read the agent's screen is said in the title (until the pane is big
        enough), the log and the events, never on the screen: at the start and at each resize."""
        if not self.cfg.interactive:
            return
        small, changed = self.overlay.check_size()
        if not small and not changed:
            return
        cols, rows = self.size
        need = f"{MIN_COLS}x{MIN_ROWS}"
        if small and changed:
            self.logs.notice(
                f"the pane ({cols}x{rows}) is too small to read the agent's screen; make it at least "
                f"{need}: until then the workflow and nudges may wait"
            )
        elif not small:
            self.logs.notice(f"the pane ({cols}x{rows}) is big enough again")
        self.session.event(ev.EventKind.PANE_SIZE, cols=cols, rows=rows, too_small=small, need=need)

    # -- the agent's end -----------------------------------------------------------------
    def _check_child(self) -> None:
        if self.reap_until is None and not self.child.alive():
            self._agent_gone()

    def _agent_gone(self) -> None:
        """The agent exited (or closed its terminal): drain its last output, then reap it."""
        if self.reap_until is not None:
            return
        self.reap_until = self.clock() + waiting.REAP_FOR
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
                self.timers.set(Timer.REAP, self.clock() + waiting.REAP_EVERY)
                return
            self.child.signal_group(signal.SIGKILL)
        status = self.child.status() if not self.child.alive() else None
        self.tell(ev.ChildExited(status))
