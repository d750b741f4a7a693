"""Work that must not block the relay loop, run in a thread that only queues and wakes.

The thread never touches the loop's state: it puts a message on a queue and writes one
byte to a pipe the loop selects on, and the loop handles the message on its own thread.

``OwnOutput`` uses the same mailbox for what the supervisor itself would print (log
records, Python warnings, an exception in a thread, an "Exception ignored" report): while
the agent's screen is up, it goes to the session's text log and events, never the terminal.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from waaah_agent import settings
from waaah_agent.core.supervise.events import EventKind
from waaah_agent.runtime.mcp.waaah import agent_status, check_server

if TYPE_CHECKING:
    from waaah_agent.runtime.store import SessionDir
    from waaah_agent.runtime.supervise.logs import SessionLogs


INBOX = "inbox"  # the mailbox kind of new records in the session's inbox (runtime/inbox.py)
SERVER = "server"  # ... of the WAAAH server's health, when it changed (ServerWatch)
AGENT_STATUS = "agent-status"  # ... of the server's word on this agent, when it changed
PING = "ping"  # the mailbox kind of /healthz asking the loop whether it answers (runtime/metrics.py)
OWN = "own"  # the mailbox kind of a line of our own (a log record, a warning, a thread's failure)


@dataclass(frozen=True)
class Message:
    kind: str
    data: dict[str, Any]


class Mailbox:
    """A queue the loop drains when its wake-up fd becomes readable."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Message] = queue.SimpleQueue()
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self._write_fd, False)

    def post(self, kind: str, **data: Any) -> None:
        self._queue.put(Message(kind, data))
        try:
            os.write(self._write_fd, b"\0")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (the loop will drain it) or closed (we are shutting down)

    def drain(self) -> list[Message]:
        try:
            while os.read(self.read_fd, 4096):
                pass
        except (BlockingIOError, OSError):
            pass
        out = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        for fd in (self.read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class ServerWatch(threading.Thread):
    """Re-checks the WAAAH server and this agent's status; posts only changes.

    Its own attributes never take a name ``threading.Thread`` uses: Python calls
    ``Thread._stop()`` on every thread in a forked child (the agent's, before exec), and an
    attribute named ``_stop`` made that fail in the child, on the agent's screen.
    """

    def __init__(
        self,
        mailbox: Mailbox,
        url: str,
        api_key: str | None,
        agent_id: str,
        every: float = settings.SERVER_CHECK_EVERY,
        check: Callable[..., Any] = check_server,
    ) -> None:
        super().__init__(name="waaah-server-watch", daemon=True)
        self._mailbox, self._url, self._key, self._agent_id = mailbox, url, api_key, agent_id
        self._every = every
        self._check = check
        self._halt = threading.Event()
        self.last_health: str | None = None
        self.last_ok = True  # as of the last check
        self.last_status: str | None = None

    def run(self) -> None:
        while not self._halt.wait(self._every):
            health = self._check(self._url, self._key)
            self.last_ok = health.ok
            if health.detail != self.last_health:
                self.last_health = health.detail
                self._mailbox.post(SERVER, ok=health.ok, detail=health.detail, url=self._url)
            status = agent_status(self._url, self._key, self._agent_id) if health.ok else None
            if status != self.last_status:
                self.last_status = status
                self._mailbox.post(AGENT_STATUS, status=status)

    def stop(self) -> None:
        self._halt.set()


class _ToMailbox(logging.Handler):
    def __init__(self, mailbox: Mailbox) -> None:
        super().__init__()
        self._mailbox = mailbox
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._mailbox.post(OWN, text=self.format(record), error=None)
        except Exception:  # noqa: BLE001 - a log line must never fail the supervisor
            pass


class OwnOutput:
    """While active, the supervisor's own output is posted to the mailbox, not printed.

    Logging records (``logging`` and, through it, ``warnings``), an uncaught exception in a
    thread (``threading.excepthook``) and an "Exception ignored" report (``sys.unraisablehook``)
    become ``own`` messages: the loop writes them to the text log (failures also to the
    events). ``on_screen``: the agent's screen is up, so the terminal gets none of it;
    headless, what printed before still prints and is recorded as well. Each hook does
    nothing in a forked child (the agent between fork and exec): its stderr is the agent's
    screen.
    """

    def __init__(self, mailbox: Mailbox, *, on_screen: bool) -> None:
        self._mailbox, self._on_screen = mailbox, on_screen
        self._pid = os.getpid()
        self._handler = _ToMailbox(mailbox)
        self._saved_handlers: list[logging.Handler] = []
        self._saved_capture = False
        self._saved_excepthook = threading.excepthook
        self._saved_unraisable = sys.unraisablehook

    def __enter__(self) -> OwnOutput:
        root = logging.getLogger()
        self._saved_handlers = list(root.handlers)
        if self._on_screen:
            for handler in self._saved_handlers:
                root.removeHandler(handler)
        root.addHandler(self._handler)
        self._saved_capture = logging._warnings_showwarning is not None  # type: ignore[attr-defined]
        logging.captureWarnings(True)
        self._saved_excepthook, self._saved_unraisable = threading.excepthook, sys.unraisablehook
        threading.excepthook = self._thread_failed
        sys.unraisablehook = self._unraisable
        return self

    def __exit__(self, *exc: object) -> None:
        root = logging.getLogger()
        root.removeHandler(self._handler)
        for handler in self._saved_handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        logging.captureWarnings(self._saved_capture)
        threading.excepthook, sys.unraisablehook = self._saved_excepthook, self._saved_unraisable

    def _post(self, where: str, exc: BaseException | None, tb: types.TracebackType | None) -> None:
        what = f"{type(exc).__name__}: {exc}" if exc is not None else "unknown error"
        lines = "".join(traceback.format_exception(type(exc), exc, tb)) if exc is not None else ""
        self._mailbox.post(OWN, text=f"{where} failed: {what}\n{lines.rstrip()}", error=f"{where}: {what}")

    def _thread_failed(self, args: threading.ExceptHookArgs) -> None:
        if os.getpid() != self._pid:
            return
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        self._post(f"the thread {name}", args.exc_value, args.exc_traceback)
        if not self._on_screen:
            self._saved_excepthook(args)

    def _unraisable(self, args: Any) -> None:
        if os.getpid() != self._pid:
            return
        where = args.err_msg or "Exception ignored in"
        self._post(f"{where} {args.object!r}", args.exc_value, args.exc_traceback)
        if not self._on_screen:
            self._saved_unraisable(args)


def record_own(message: Message, logs: SessionLogs, session: SessionDir) -> None:
    """A line of the supervisor's own (``OwnOutput``): the text log; a failure also the events."""
    logs.notice(str(message.data["text"]))
    if message.data.get("error"):
        session.event(EventKind.INTERNAL_ERROR, error=str(message.data["error"]))
