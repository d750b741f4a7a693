"""The WAAAH tools over HTTP: one call, its answer read, and the inbox lines that tap it.

The WAAAH server has no MCP transport of its own: each tool call is ``POST <server>/mcp/tools/<name>``
with the arguments as the JSON body. Shared by `waaah mcp-proxy` (the CLI's MCP server) and the
session link (runtime/mcp/link.py, in the supervisor): neither needs the other's imports, and this
module needs no MCP package.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.mcp.inbox_records import TapEvent, TapOutcome, TapRecord
from waaah_agent.core.nesting import loads_json

log = logging.getLogger("waaah.mcp_proxy.http")

#: Seconds to open a TCP connection: a dead server should be reported quickly.
CONNECT_TIMEOUT = 10.0
#: Seconds to wait for an answer: the server holds wait_for_prompt for up to its long poll.
READ_TIMEOUT = float(mcpconf.TOOL_TIMEOUT_SECONDS)
#: Answers larger than this are cut (a task prompt is text; this only guards memory).
MAX_ANSWER_BYTES = 16 * 1024 * 1024


def parse_json_text(text: str) -> Any:
    """The JSON value inside a result text, or None when the text is not JSON (plain sentences)."""
    try:
        return loads_json(text)
    except ValueError:
        return None


def scrub(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of the secret masked."""
    return text.replace(secret, "***") if secret else text


def one_line(text: str, limit: int = 200) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def normalize_url(url: str) -> str:
    """The server URL as given, with ``http://`` added when no scheme was written (``localhost:3456``)."""
    url = url.strip()
    return url if "://" in url else f"http://{url}"


def display_url(url: str) -> str:
    """The server address for messages: no user info, no query (either may hold a key)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path.rstrip('/')}"


@dataclass(frozen=True)
class ToolResult:
    """What goes back to the model: texts and whether it is an error."""

    texts: tuple[str, ...]
    is_error: bool = False

    @classmethod
    def error(cls, text: str) -> ToolResult:
        """An error result with one text."""
        return cls((text,), True)


def interpret_http(status: int, body: bytes, *, tool: str, server: str, api_key: str | None) -> ToolResult:
    """Turn the server's HTTP answer into a tool result (``server`` is the display URL).

    A tool answer (HTTP 200, JSON) is passed on as the server wrote it; every other answer becomes
    one line of explanation, with the API key masked should the server have echoed it.
    """
    if status == 200:
        try:
            return _tool_answer(loads_json(body.decode("utf-8", errors="replace")))
        except ValueError:
            pass
    return ToolResult.error(
        scrub(_http_problem(status, body, tool=tool, server=server, has_key=bool(api_key)), api_key)
    )


def _http_problem(status: int, body: bytes, *, tool: str, server: str, has_key: bool) -> str:
    if status == 401:
        verb = "rejected the API key" if has_key else "requires an API key"
        return f"WAAAH server at {server} {verb} (HTTP 401): set WAAAH_API_KEY to the server's key."
    if status == 404:
        return f"WAAAH server at {server} has no tool {tool!r} (HTTP 404)."
    try:
        answer = loads_json(body.decode("utf-8", errors="replace"))
    except ValueError:
        return f"WAAAH server at {server} answered HTTP {status} with a non-JSON body: is it a WAAAH server?"
    detail = answer.get("error") if isinstance(answer, dict) else None
    return f"WAAAH server at {server} failed (HTTP {status}): {one_line(str(detail or answer))}"


def _tool_answer(answer: Any) -> ToolResult:
    """A 200 answer in tool format (``content`` texts, ``isError``); anything else is passed on as JSON."""
    if not isinstance(answer, dict) or not isinstance(answer.get("content"), list):
        return ToolResult((json.dumps(answer),))
    texts = tuple(
        str(item.get("text", ""))
        if isinstance(item, dict) and item.get("type") == "text"
        else json.dumps(item)
        for item in answer["content"]
    )
    return ToolResult(texts or ("",), bool(answer.get("isError")))


def describe_network_error(exc: BaseException) -> str:
    """A short reason for a failure to reach the server."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    if isinstance(exc, TimeoutError):
        return f"no connection within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return one_line(str(exc)) or type(exc).__name__


def classify(tool: str, arguments: Mapping[str, Any], result: ToolResult) -> dict[str, Any]:
    """The inbox fields for a finished call: ``outcome`` and, when they apply, ``task_id``,
    ``evict_action``, ``agent_id`` (the id register_agent returned) and ``error``."""
    if result.is_error:
        return {"outcome": "error", "error": one_line(" ".join(result.texts)) or "error"}
    answer = parse_json_text(result.texts[0]) if result.texts else None
    fields: dict[str, Any] = {"outcome": "ok"}
    if isinstance(answer, dict) and tool == "wait_for_prompt":
        if answer.get("controlSignal") == "EVICT":
            return {"outcome": "evict", "evict_action": str(answer.get("action") or "RESTART")}
        if answer.get("taskId"):
            return {"outcome": "task", "task_id": str(answer["taskId"])}
        if answer.get("status") == "IDLE":
            return {"outcome": "idle"}
    if tool == "register_agent" and isinstance(answer, dict) and answer.get("agentId"):
        fields["agent_id"] = str(answer["agentId"])
    task_id = arguments.get("taskId")
    if isinstance(task_id, str) and task_id:
        fields["task_id"] = task_id
    return fields


def start_record(tool: str, call_id: int, ts: float, pid: int) -> TapRecord:
    """The inbox line written when a call begins.

    ``call_id`` counts per proxy process; ``pid`` tells apart two proxies sharing one inbox (a CLI
    may restart its MCP servers).
    """
    return TapRecord(ts, TapEvent.START, tool, call_id, pid)


def end_record(
    tool: str, call_id: int, ts: float, pid: int, duration_s: float, fields: Mapping[str, Any]
) -> TapRecord:
    """The inbox line written when a call ends (``fields`` from :func:`classify`)."""

    def text(key: str) -> str | None:
        value = fields.get(key)
        return None if value is None else str(value)

    return TapRecord(
        ts,
        TapEvent.END,
        tool,
        call_id,
        pid,
        duration_ms=round(duration_s * 1000),
        outcome=TapOutcome(fields["outcome"]),
        error=text("error"),
        task_id=text("task_id"),
        evict_action=text("evict_action"),
        agent_id=text("agent_id"),
    )


class Inbox:
    """Appends JSON lines to the supervisor's inbox; a failure is logged once, never raised."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._warned = False

    def write(self, record: TapRecord) -> None:
        """Append one record as one line, with a single ``write`` (appends of a line stay whole)."""
        if self.path is None:
            return
        data = (json.dumps(record.to_json(), ensure_ascii=False) + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_NONBLOCK: a FIFO in its place is an error (ENXIO), never a wait
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("cannot write the inbox %s: %s", self.path, exc)


class HttpCall:
    """One blocking POST, abortable from another thread (a cancelled long poll frees its socket)."""

    def __init__(self, url: SplitResult, path: str, body: bytes, headers: Mapping[str, str]) -> None:
        self._url, self._path, self._body, self._headers = url, path, body, dict(headers)
        self._conn: http.client.HTTPConnection | None = None
        self._aborted = False
        #: Whether the TCP connection was made: failures before it mean the server is unreachable.
        self.connected = False

    def run(self) -> tuple[int, bytes]:
        """Send and read the answer; raises OSError subclasses on network failures."""
        cls = http.client.HTTPSConnection if self._url.scheme == "https" else http.client.HTTPConnection
        conn = cls(self._url.hostname or "localhost", self._url.port, timeout=CONNECT_TIMEOUT)
        self._conn = conn
        try:
            conn.connect()
            self.connected = True
            if self._aborted:
                raise ConnectionAbortedError("call cancelled")
            assert conn.sock is not None
            conn.sock.settimeout(READ_TIMEOUT)
            conn.request("POST", self._path, body=self._body, headers=self._headers)
            response = conn.getresponse()
            return response.status, response.read(MAX_ANSWER_BYTES)
        finally:
            conn.close()

    def abort(self) -> None:
        """Break the connection so a blocked read returns now."""
        self._aborted = True
        conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ToolServer:
    """One WAAAH server's tool endpoint: the URL checked once, each call a blocking POST whose
    failures become one clear line (never the API key)."""

    def __init__(self, server_url: str, api_key: str | None) -> None:
        server_url = normalize_url(server_url)
        self.url = urlsplit(server_url)
        if self.url.scheme not in ("http", "https") or not self.url.hostname:
            raise ValueError(f"WAAAH server URL is not http(s)://host[:port]: {display_url(server_url)!r}")
        self.display = display_url(server_url)
        self.api_key = api_key or None

    def tool_path(self, tool: str) -> str:
        """The request target for a tool, keeping any path prefix and query of the server URL."""
        path = f"{self.url.path.rstrip('/')}/mcp/tools/{tool}"
        return f"{path}?{self.url.query}" if self.url.query else path

    def request(self, tool: str, body: Mapping[str, Any]) -> HttpCall:
        """The call, not yet run (run it in a thread to be able to abort it)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["X-API-Key"] = self.api_key
        return HttpCall(self.url, self.tool_path(tool), json.dumps(body).encode("utf-8"), headers)

    def result(self, tool: str, http_call: HttpCall) -> ToolResult:
        """Run ``http_call`` and read its answer as a tool result."""
        try:
            status, answer = http_call.run()
        except (OSError, http.client.HTTPException) as exc:
            problem = self.network_error(exc, connected=http_call.connected)
            return ToolResult(tuple(scrub(t, self.api_key) for t in problem.texts), True)
        return interpret_http(status, answer, tool=tool, server=self.display, api_key=self.api_key)

    def call(self, tool: str, body: Mapping[str, Any]) -> ToolResult:
        """One blocking call."""
        return self.result(tool, self.request(tool, body))

    def network_error(self, exc: BaseException, *, connected: bool) -> ToolResult:
        if not connected:
            return ToolResult.error(
                f"Cannot reach WAAAH server at {self.display}: {describe_network_error(exc)}"
            )
        if isinstance(exc, TimeoutError):
            return ToolResult.error(
                f"WAAAH server at {self.display} did not answer within {READ_TIMEOUT:g} s."
            )
        return ToolResult.error(
            f"WAAAH server at {self.display} dropped the connection: {describe_network_error(exc)}"
        )
