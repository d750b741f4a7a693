"""The session link: the supervisor keeps the agent's WAAAH connection (core/mcp/link.py decides).

The CLI's MCP proxy sends ``wait_for_prompt`` and ``ack_task`` here over a Unix socket in a
folder of its own (0700, from ``mkdtemp``; the socket 0600; a peer of another user refused where
the OS names it), one JSON line each way per call (core/mcp/link_wire.py). The link makes the HTTP
long polls itself, so a wait in flight when the CLI dies completes into the session: what it
returns is written to ``<session>/link.json`` (atomic, 0600) before anything else, a task is
ACKed, and the next CLI instance's wait gets it. While the agent waits (and at each start) the
link reads the server's PENDING_ACK tasks and takes one reserved for this agent but never sent.

The link writes the inbox lines of the calls it serves (the proxy writes those of the others), so
the supervisor hears that a wait ended when its answer was handed out, even to a CLI that can no
longer read it. What the link has to say goes to the loop's mailbox (kind ``link``): the text log,
and for some an event. Threads: one accepts, one per call, one per server wait, one keeps the
task list's pace.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waaah_agent.core.mcp import link as core
from waaah_agent.core.mcp.link_wire import (
    MAX_LINE,
    Op,
    Request,
    Reserved,
    parse_request,
    reply_line,
    reserved_for,
)
from waaah_agent.core.nesting import loads_json
from waaah_agent.runtime.mcp import waaah
from waaah_agent.runtime.mcp.tool_http import (
    Inbox,
    ToolResult,
    ToolServer,
    classify,
    end_record,
    start_record,
)
from waaah_agent.runtime.store import atomic_write
from waaah_agent.safe_read import read_text, why

if TYPE_CHECKING:
    from waaah_agent.runtime.store import SessionDir
    from waaah_agent.runtime.supervise.background import Message
    from waaah_agent.runtime.supervise.logs import SessionLogs

LINK = "link"  # the mailbox kind of what the link has to say
FILE = "link.json"
#: The largest link.json read back: room for a few of the largest answers a wait may return.
FILE_CAP = 4 * MAX_LINE
#: AF_UNIX paths are limited to 108 bytes (104 on some systems).
MAX_SOCKET_PATH = 100


def socket_path() -> Path:
    """A new private folder (0700) for the link's socket, under a temp dir short enough."""
    base = tempfile.gettempdir()
    if len(os.fsencode(base)) > MAX_SOCKET_PATH - 30:
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix="waaah-link-", dir=base)) / "s"


@dataclass
class _Ticket:
    """One call from the proxy: its answer, once there is one."""

    request: Request
    started: float
    done: threading.Event = field(default_factory=threading.Event)
    reply: core.Reply | None = None


class SessionLink:
    """Serves the link on ``path`` for the session in ``folder``; ``post`` is the mailbox's."""

    def __init__(
        self,
        path: Path,
        folder: Path,
        server: ToolServer,
        agent_id: str,
        inbox: Path,
        post: Callable[..., None],
        poll_every: float = core.POLL_EVERY,
    ) -> None:
        self.path, self.file, self.server = path, folder / FILE, server
        self._inbox, self._post = Inbox(inbox), post
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._tickets = itertools.count(1)
        self._open: dict[int, _Ticket] = {}
        self._listener: socket.socket | None = None
        self.core = core.Link(agent_id, self._load(), poll_every=poll_every)

    # ----- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        listener.listen(16)
        self._listener = listener
        self._thread(self._accept, "waaah-link")
        self._thread(self._pace, "waaah-link-tasks")
        self._thread(self._feed, "waaah-link-start", lambda link: link.start())

    def stop(self) -> None:
        """Stop serving (a server wait in flight is left: nobody is there to take its answer)."""
        self._halt.set()
        self._wake.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
            self.path.parent.rmdir()  # the folder socket_path() made, if nothing else is in it

    def _thread(self, target: Callable[..., None], name: str, *args: Any) -> None:
        threading.Thread(target=target, args=args, name=name, daemon=True).start()

    # ----- the core and its actions ------------------------------------------------------------

    def _feed(self, step: Callable[[core.Link], list[core.Action]]) -> None:
        """Feed one event; quick actions are done under the lock (so the file is written in the
        order the state changed), the slow ones (HTTP) after it, in this thread."""
        slow: list[core.Action] = []
        with self._lock:
            for action in step(self.core):
                if isinstance(action, core.Persist):
                    self._persist(action.held)
                elif isinstance(action, core.Note):
                    self._post(LINK, text=action.text, event=action.event, fields=dict(action.fields))
                elif isinstance(action, core.Reply):
                    ticket = self._open.get(action.ticket)
                    if ticket is not None:
                        ticket.reply = action
                        ticket.done.set()
                else:
                    slow.append(action)
            self._wake.set()
        for action in slow:
            if isinstance(action, core.StartWait):
                self._thread(self._server_wait, "waaah-link-wait", dict(action.body))
            elif isinstance(action, core.SendAck):
                self._send_ack(action)
            elif isinstance(action, core.Forward):
                self._forward(action)

    def _server_wait(self, body: dict[str, Any]) -> None:
        result = self._call("wait_for_prompt", body)
        fields = classify("wait_for_prompt", body, result)
        answer = core.Answer(
            str(fields["outcome"]),
            result.texts,
            result.is_error,
            fields.get("task_id"),
            fields.get("evict_action"),
        )
        self._feed(lambda link: link.answered(answer))

    def _call(self, tool: str, body: dict[str, Any]) -> ToolResult:
        """One call to the server; a failure of ours is an error answer, never a stuck state."""
        try:
            return self.server.call(tool, body)
        except Exception as exc:  # noqa: BLE001 - the waiting agent must get an answer
            return ToolResult.error(f"waaah session link: {tool} failed: {type(exc).__name__}: {exc}")

    def _send_ack(self, action: core.SendAck) -> None:
        result = self._call("ack_task", {"taskId": action.key, "agentId": action.agent_id})
        outcome, detail = ack_outcome(result)
        self._feed(lambda link: link.acked(action.key, outcome, detail))

    def _forward(self, action: core.Forward) -> None:
        result = self._call("ack_task", dict(action.body))
        with self._lock:
            ticket = self._open.get(action.ticket)
            if ticket is not None:
                ticket.reply = core.Reply(action.ticket, result.texts, result.is_error)
                ticket.done.set()
        self._feed(lambda link: link.forwarded(action.key, ack_outcome(result)[0]))

    def _persist(self, held: tuple[core.Held, ...]) -> None:
        try:
            atomic_write(self.file, json.dumps({"held": [h.to_json() for h in held]}) + "\n")
        except OSError as err:
            self._post(
                LINK, text=f"could not write {self.file} ({why(err)}): what it keeps is in memory only"
            )

    def _load(self) -> list[core.Held]:
        """What an earlier supervisor of this session kept; a damaged file is moved aside."""
        try:
            saved = loads_json(read_text(self.file, FILE_CAP, follow=False))
            records = (
                saved["held"] if isinstance(saved, dict) and isinstance(saved.get("held"), list) else None
            )
            held = [h for h in map(core.Held.from_json, records or []) if h is not None]
            if records is None or len(held) != len(records):
                raise ValueError("not a list of kept answers")
            return held
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as err:  # a nesting deeper than 100 is a ValueError
            aside = self.file.with_name(f"{FILE}.corrupt-{int(time.time())}")
            with contextlib.suppress(OSError):
                os.replace(self.file, aside)
            self._post(LINK, text=f"could not read {self.file} ({why(err)}): moved aside to {aside.name}")
            return []

    # ----- the socket --------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._halt.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed by stop()
            if _peer_uid(conn) not in (None, os.getuid()):
                conn.close()
                continue
            self._thread(self._serve, "waaah-link-call", conn)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            request = parse_request(_read_line(conn))
            if request is None:
                return
            number = next(self._tickets)
            ticket = _Ticket(request, time.time())
            tool = "wait_for_prompt" if request.op is Op.WAIT else "ack_task"
            self._inbox.write(start_record(tool, request.call_id, ticket.started, request.pid))
            with self._lock:
                self._open[number] = ticket
            try:
                if request.op is Op.WAIT:
                    self._feed(lambda link: link.wait(number, request.pid, request.body))
                else:
                    self._feed(lambda link: link.agent_ack(number, request.body))
                result = self._answer(conn, number, ticket)
            finally:
                with self._lock:
                    self._open.pop(number, None)
            ended = time.time()
            fields = classify(tool, request.body, result)
            self._inbox.write(
                end_record(tool, request.call_id, ended, request.pid, ended - ticket.started, fields)
            )

    def _answer(self, conn: socket.socket, number: int, ticket: _Ticket) -> ToolResult:
        """Wait for the answer while watching the client; send it. What the inbox line says."""
        while not ticket.done.wait(0.25):
            if not _closed(conn):
                continue
            with self._lock:
                if ticket.reply is None:
                    self.core.gone(number)
                    return ToolResult.error("The agent's MCP connection closed during the call.")
            break
        reply = ticket.reply
        assert reply is not None
        try:
            conn.sendall(reply_line(reply.texts, reply.is_error))
        except OSError:
            held = reply.held
            if held is not None:
                self._feed(lambda link: link.unsent(held))
            return ToolResult.error("The agent's MCP connection closed before the answer.")
        return ToolResult(reply.texts, reply.is_error)

    # ----- the server's task list --------------------------------------------------------------

    def _pace(self) -> None:
        while not self._halt.is_set():
            now = time.monotonic()
            with self._lock:
                due = self.core.poll_due()
                agent_id = self.core.agent_id
                if due is not None and due <= now:
                    self.core.poll_started(now)
            if due is None or due > now:
                self._wake.wait(1.0 if due is None else min(1.0, due - now))
                self._wake.clear()
                continue
            self._poll(agent_id)

    def _poll(self, agent_id: str) -> None:
        found, off = self._reserved(agent_id)
        self._feed(lambda link: link.polled(found, off))

    def _reserved(self, agent_id: str) -> tuple[list[Reserved] | None, str]:
        try:
            status, body = waaah.tasks(self.server.display, self.server.api_key, "PENDING_ACK")
        except OSError:
            return None, ""  # unreachable now: the server watch says so; tried again at the pace
        if status in (401, 403):
            return None, f"HTTP {status}: the API key is refused"
        if status == 404:
            return None, "HTTP 404: this server has no /admin/tasks"
        return (reserved_for(agent_id, body), "") if status == 200 else (None, "")


def ack_outcome(result: ToolResult) -> tuple[core.AckOutcome, str]:
    """How the server took an ACK: the server's own refusal is ``ACK failed: ...``."""
    text = " ".join(result.texts)
    if not result.is_error:
        return core.AckOutcome.OK, ""
    if text.startswith("ACK failed"):
        return core.AckOutcome.REFUSED, text
    return core.AckOutcome.UNREACHABLE, text


def record_link(message: Message, logs: SessionLogs, session: SessionDir) -> None:
    """What the link said: the text log, and its event when it names one."""
    logs.notice(str(message.data["text"]))
    if message.data.get("event"):
        session.event(str(message.data["event"]), **dict(message.data.get("fields") or {}))


def _read_line(conn: socket.socket) -> bytes:
    """The request line (at most MAX_LINE bytes; a client that says nothing for 30 s is dropped)."""
    conn.settimeout(30)
    data = bytearray()
    try:
        while b"\n" not in data and len(data) <= MAX_LINE:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        return b""
    finally:
        conn.settimeout(None)
    return bytes(data.split(b"\n", 1)[0]) if b"\n" in data else b""


def _closed(conn: socket.socket) -> bool:
    """Whether the client hung up (or broke the protocol by sending more)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


def _peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid where the OS tells it (Linux), else None."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    except OSError:
        return None
    return int(uid)
