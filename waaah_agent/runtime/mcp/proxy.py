"""`waaah mcp-proxy`: a stdio MCP server that forwards the WAAAH tools to a WAAAH server over HTTP.

The WAAAH server has no MCP transport of its own: each MCP ``tools/call`` becomes
``POST <server>/mcp/tools/<name>`` with the arguments as the JSON body (runtime/mcp/tool_http.py). On the way
the proxy

* fills ``agentId`` (when the call omits it) with the supervised agent's id, and ``source: "CLI"``
  into ``register_agent``;
* turns every transport or HTTP failure into an MCP error result with one clear line, never a
  crash and never the API key;
* taps every call into the supervisor's inbox file as JSON lines (``tool_start`` / ``tool_end``), so
  the supervisor knows, without reading the screen, whether its agent is inside ``wait_for_prompt``,
  got a task, or was evicted;
* under a supervisor (``WAAAH_LINK`` names its socket), sends ``wait_for_prompt`` and ``ack_task``
  to the session link instead (runtime/mcp/link.py), which holds the waits and taps those calls: a task
  the server hands out while this process is dying reaches the next one. Without a link, or when
  it cannot be reached, the proxy calls the server itself.

stdout is the MCP channel: everything else goes to stderr.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from waaah_agent import settings
from waaah_agent.core.mcp.link_wire import MAX_LINE, Op, parse_reply, request_line
from waaah_agent.core.mcp.tools import fill_arguments, tool_definitions
from waaah_agent.errors import ExitCode
from waaah_agent.runtime.mcp.tool_http import (  # noqa: F401 (tests import the pure parts from here)
    CONNECT_TIMEOUT,
    READ_TIMEOUT,
    Inbox,
    ToolResult,
    ToolServer,
    classify,
    describe_network_error,
    display_url,
    end_record,
    interpret_http,
    normalize_url,
    one_line,
    scrub,
    start_record,
)
from waaah_agent.settings import ProxySettings

log = logging.getLogger("waaah.mcp_proxy")

_T = TypeVar("_T")
#: The tools the session link serves: it holds the waits and answers the ACKs of what it keeps.
LINKED = {"wait_for_prompt": Op.WAIT, "ack_task": Op.ACK}


async def _in_daemon_thread(fn: Callable[[], _T]) -> _T:
    """Run ``fn`` in a daemon thread and await it.

    Not anyio's worker threads: those are joined at interpreter exit, so a long poll in flight
    when stdin closes would keep the proxy alive for minutes.
    """
    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    box: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:
            box.append((False, exc))
        finally:
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except Exception:
                pass  # the event loop is gone; nobody waits any more

    threading.Thread(target=target, name="waaah-http", daemon=True).start()
    await done.wait()
    ok, value = box[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


# ----- the proxy ---------------------------------------------------------------------------------


class Proxy:
    """Forwards tool calls to one WAAAH server (or the session link) and taps them into the inbox."""

    def __init__(
        self,
        server_url: str,
        api_key: str | None,
        agent_id: str | None,
        inbox: Path | None,
        link: Path | None = None,
    ) -> None:
        self.http = ToolServer(server_url, api_key)
        self.server, self.api_key = self.http.display, self.http.api_key
        self.agent_id = agent_id or None
        self.inbox = Inbox(inbox)
        self.link = link
        self._ids = itertools.count(1)
        self._link_warned = False

    async def call(self, tool: str, arguments: Mapping[str, Any] | None) -> ToolResult:
        """Forward one call; always returns a result and always writes both inbox lines (the
        link writes those of the calls it serves)."""
        call_id = next(self._ids)
        body = fill_arguments(tool, arguments, self.agent_id)
        if self.link is not None and tool in LINKED:
            linked = await self._via_link(LINKED[tool], call_id, body)
            if linked is not None:
                if linked.is_error:
                    log.warning("%s #%d: %s", tool, call_id, one_line(" ".join(linked.texts)))
                return linked
        started = time.time()
        self.inbox.write(start_record(tool, call_id, started, os.getpid()))
        try:
            result = await self._forward(tool, body)
        except anyio.get_cancelled_exc_class():
            self._finish(tool, call_id, body, started, ToolResult.error("The call was cancelled."))
            raise
        except Exception as exc:  # a proxy bug must not take the agent's MCP server down
            log.exception("%s #%d failed", tool, call_id)
            reason = scrub(one_line(str(exc)), self.api_key) or type(exc).__name__
            result = ToolResult.error(f"waaah mcp-proxy failed: {reason}")
        if result.is_error:
            log.warning("%s #%d: %s", tool, call_id, one_line(" ".join(result.texts)))
        return self._finish(tool, call_id, body, started, result)

    def _finish(
        self, tool: str, call_id: int, body: Mapping[str, Any], started: float, result: ToolResult
    ) -> ToolResult:
        """Write the tool_end line and follow a renamed agent id."""
        fields = classify(tool, body, result)
        self._follow_rename(tool, body, fields)
        ended = time.time()
        self.inbox.write(end_record(tool, call_id, ended, os.getpid(), ended - started, fields))
        return result

    def _follow_rename(self, tool: str, body: Mapping[str, Any], fields: Mapping[str, Any]) -> None:
        """The server renames an id re-registered under another name: fill the new one from now on."""
        new_id = fields.get("agent_id")
        if tool == "register_agent" and new_id and self.agent_id and body.get("agentId") == self.agent_id:
            self.agent_id = str(new_id)

    async def _forward(self, tool: str, body: Mapping[str, Any]) -> ToolResult:
        http_call = self.http.request(tool, body)
        try:
            return await _in_daemon_thread(lambda: self.http.result(tool, http_call))
        except anyio.get_cancelled_exc_class():
            http_call.abort()
            raise

    async def _via_link(self, op: Op, call_id: int, body: Mapping[str, Any]) -> ToolResult | None:
        """The call through the session link; None when there is no link to answer it (the
        supervisor is gone): the caller then asks the server itself."""
        assert self.link is not None
        link_call = LinkCall(self.link, request_line(op, os.getpid(), call_id, body))
        try:
            line = await _in_daemon_thread(link_call.run)
        except anyio.get_cancelled_exc_class():
            link_call.abort()  # the link sees the hang-up: the wait goes on for the session
            raise
        except OSError as exc:
            line, reason = None, describe_network_error(exc)
        else:
            reason = "it closed without an answer"
        reply = parse_reply(line) if line else None
        if reply is None:
            if not self._link_warned:
                self._link_warned = True
                log.warning(
                    "the session link %s did not answer (%s): calling the server directly", self.link, reason
                )
            return None
        return ToolResult(*reply)


class LinkCall:
    """One request over the session link's socket and its one-line answer, abortable from
    another thread (the link then knows the call is given up)."""

    def __init__(self, path: Path, line: bytes) -> None:
        self._path, self._line = path, line
        self._sock: socket.socket | None = None
        self._aborted = False

    def run(self) -> bytes | None:
        """The answer line, or None when the link closed first; raises OSError when it cannot
        be reached."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock = sock
        try:
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect(str(self._path))
            if self._aborted:
                raise ConnectionAbortedError("call cancelled")
            sock.settimeout(READ_TIMEOUT + 30)  # the link answers when the server's wait ends
            sock.sendall(self._line)
            data = bytearray()
            while b"\n" not in data and len(data) <= MAX_LINE:
                chunk = sock.recv(65536)
                if not chunk:
                    return None
                data += chunk
            return bytes(data.split(b"\n", 1)[0]) if b"\n" in data else None
        finally:
            sock.close()

    def abort(self) -> None:
        self._aborted = True
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# ----- MCP server --------------------------------------------------------------------------------


def build_server(proxy: Proxy) -> Server[Any]:
    """The MCP server: the tool list and a call handler that forwards to ``proxy``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_definitions(proxy.agent_id))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        result = await proxy.call(params.name, params.arguments)
        # Plain text content only: with structuredContent, claude and codex hand the model
        # `{"result": ...}` instead of the server's answer.
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=t) for t in result.texts], is_error=result.is_error
        )

    return Server("waaah", version=_version(), on_list_tools=list_tools, on_call_tool=call_tool)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("waaah-agent")
    except Exception:
        return "0"


async def _serve(proxy: Proxy) -> None:
    server = build_server(proxy)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _setup_logging(level: str) -> None:
    if log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("waaah mcp-proxy: %(message)s"))
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False


def run(given: ProxySettings) -> int:
    """Serve MCP over stdin/stdout until stdin closes.

    Returns the exit code: 0 when stdin closed, 2 for a server URL that is not http(s), 1 on an
    unexpected error, 130 on Ctrl+C.
    """
    _setup_logging(given.log_level)
    try:
        proxy = Proxy(given.server_url, given.api_key, given.agent_id, given.inbox, given.link)
    except ValueError as exc:
        log.error("%s", scrub(str(exc), given.api_key))
        return ExitCode.USAGE
    log.info("forwarding to %s as %s", proxy.server, proxy.agent_id or "(no agent id)")
    try:
        anyio.run(_serve, proxy)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Exception:
        log.exception("stopped by an unexpected error")
        return ExitCode.INTERNAL
    return ExitCode.OK


def main() -> None:
    """``python -m waaah_agent.runtime.mcp.proxy``: configuration from the environment."""
    sys.exit(run(settings.proxy_settings(os.environ)))


if __name__ == "__main__":
    main()
