"""`waaah mcp-proxy` through a real MCP client over stdio, against the WAAAH server double."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from tests.doubles.waaah_server import WaaahServer

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-key-3f9a1c"
AGENT = "agent-one"
WORKSPACE = {"type": "local", "repoId": "acme/widgets"}


# ----- fixtures and helpers ----------------------------------------------------------------------


def _proxy_children() -> list[int]:
    """Our child processes running the proxy (should be none between tests)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"waaah_agent.runtime.mcp.proxy" in cmdline:
            pids.append(int(stat.parent.name))
    return pids


@pytest.fixture(autouse=True)
def _no_leaked_proxies() -> Iterator[None]:
    yield
    leaked = _proxy_children()
    for pid in leaked:
        os.kill(pid, signal.SIGKILL)
    assert not leaked, f"proxy processes left running: {leaked}"


@pytest.fixture()
def waaah() -> Iterator[WaaahServer]:
    with WaaahServer(api_key=KEY) as server:
        yield server


@pytest.fixture()
def inbox(tmp_path: Path) -> Path:
    return tmp_path / "state" / "inbox.jsonl"


def proxy_env(
    url: str, *, api_key: str | None = KEY, agent_id: str | None = AGENT, inbox: Path | None = None
) -> dict[str, str]:
    env = {"WAAAH_SERVER_URL": url, "PYTHONPATH": str(ROOT)}
    if api_key:
        env["WAAAH_API_KEY"] = api_key
    if agent_id:
        env["WAAAH_AGENT_ID"] = agent_id
    if inbox:
        env["WAAAH_INBOX"] = str(inbox)
    return env


@asynccontextmanager
async def proxy_session(env: dict[str, str], stderr: Path) -> AsyncIterator[ClientSession]:
    """A real MCP client session with `python -m waaah_agent.runtime.mcp.proxy` (stopped on exit)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "waaah_agent.runtime.mcp.proxy"], env=env, cwd=ROOT
    )
    with stderr.open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def run_async(fn: Callable[[], Awaitable[None]], limit: float = 20.0) -> None:
    async def bounded() -> None:
        with anyio.fail_after(limit):
            await fn()

    anyio.run(bounded)


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    return block.text


def answer(result: CallToolResult) -> Any:
    assert not result.is_error, text(result)
    assert result.structured_content is None  # plain text only (see the facts on CLIs)
    return json.loads(text(result))


def inbox_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_every_call_tapped(path: Path, tools: list[str]) -> list[dict[str, Any]]:
    """One tool_start and one later tool_end per call, in call order; returns the end lines."""
    lines = inbox_lines(path)
    starts = [ln for ln in lines if ln["event"] == "tool_start"]
    ends = {(ln["pid"], ln["call_id"]): ln for ln in lines if ln["event"] == "tool_end"}
    assert [s["tool"] for s in starts] == tools
    assert len(ends) == len(starts) == len(lines) / 2
    for start in starts:
        end = ends[start["pid"], start["call_id"]]
        assert start["source"] == end["source"] == "mcp"
        assert end["tool"] == start["tool"] and end["ts"] >= start["ts"]
        assert isinstance(end["duration_ms"], int) and end["outcome"] in (
            "ok",
            "error",
            "task",
            "idle",
            "evict",
        )
    return [ends[s["pid"], s["call_id"]] for s in starts]


async def register(session: ClientSession) -> Any:
    result = await session.call_tool(
        "register_agent",
        {"displayName": "Agent One", "capabilities": ["code-writing"], "workspaceContext": WORKSPACE},
    )
    return answer(result)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ----- the double itself -------------------------------------------------------------------------


def test_double_requires_the_key_and_stop_releases_long_polls() -> None:
    server = WaaahServer(api_key=KEY)
    url = server.start()
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
            assert json.loads(resp.read()) == {"status": "ok"}
        bad = urllib.request.Request(
            f"{url}/mcp/tools/list_agents", data=b"{}", headers={"X-API-Key": "nope"}
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(bad, timeout=5)
        assert err.value.code == 401
        assert json.loads(err.value.read()) == {"error": "Unauthorized: Invalid or missing API key"}

        results: list[float] = []

        def long_poll() -> None:
            req = urllib.request.Request(
                f"{url}/mcp/tools/wait_for_prompt",
                data=json.dumps({"agentId": "x", "timeout": 200}).encode(),
                headers={"X-API-Key": KEY, "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                resp.read()
            results.append(time.monotonic())

        poller = threading.Thread(target=long_poll)
        poller.start()
        server.wait_for_call("wait_for_prompt")
        assert server.agent_status("x") == "WAITING"
    finally:
        stopped = time.monotonic()
        server.stop()
    poller.join(5)
    assert results and results[0] - stopped < 1.0


# ----- the proxy ---------------------------------------------------------------------------------


def test_tools_are_listed_with_the_servers_schemas(waaah: WaaahServer, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with proxy_session(proxy_env(waaah.url), tmp_path / "stderr") as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"register_agent", "wait_for_prompt", "ack_task", "update_progress"} <= set(tools)
        assert {"send_response", "list_agents", "get_agent_status"} <= set(tools)
        reg = tools["register_agent"].input_schema
        assert set(reg["required"]) == {"capabilities", "workspaceContext"}  # agentId is filled in
        assert "general-purpose" in reg["properties"]["capabilities"]["items"]["enum"]
        assert reg["properties"]["workspaceContext"]["type"] == "object"
        assert reg["properties"]["workspaceContext"]["required"] == ["type", "repoId"]
        assert tools["wait_for_prompt"].input_schema["properties"]["timeout"]["type"] == "number"
        assert set(tools["send_response"].input_schema["required"]) == {"taskId", "status", "message"}
        assert all(t.output_schema is None for t in tools.values())

    run_async(scenario)


def test_register_gets_source_cli_and_the_agent_id(waaah: WaaahServer, inbox: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with proxy_session(proxy_env(waaah.url, inbox=inbox), tmp_path / "stderr") as session:
            registered = await register(session)
            assert registered["registered"] is True and registered["agentId"] == AGENT
            status = answer(await session.call_tool("get_agent_status", {}))
            assert status["agentId"] == AGENT

    run_async(scenario)
    call = waaah.tool_calls("register_agent")[0]
    assert call.body["agentId"] == AGENT and call.body["source"] == "CLI"
    assert call.body["workspaceContext"] == WORKSPACE
    assert call.headers["x-api-key"] == KEY
    ends = assert_every_call_tapped(inbox, ["register_agent", "get_agent_status"])
    assert ends[0]["outcome"] == "ok" and ends[0]["agent_id"] == AGENT


def test_wait_for_prompt_long_polls_until_a_task_arrives(
    waaah: WaaahServer, inbox: Path, tmp_path: Path
) -> None:
    task_ids: list[str] = []

    async def scenario() -> None:
        async with proxy_session(proxy_env(waaah.url, inbox=inbox), tmp_path / "stderr") as session:
            await register(session)

            async def enqueue_later() -> None:
                await anyio.to_thread.run_sync(lambda: waaah.wait_for_call("wait_for_prompt", 10))
                # No task for a while: that the call holds meanwhile is the long poll under test.
                await anyio.sleep(0.5)
                assert waaah.agent_status(AGENT) == "WAITING"
                task_ids.append(waaah.enqueue("Write the README", AGENT, workspace_id="acme/widgets"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(enqueue_later)
                started = time.monotonic()
                task = answer(await session.call_tool("wait_for_prompt", {"timeout": 20}))
                waited = time.monotonic() - started
            assert waited >= 0.5
            assert task["taskId"] == task_ids[0] and task["prompt"] == "Write the README"
            acked = answer(await session.call_tool("ack_task", {"taskId": task["taskId"]}))
            assert acked == {"acknowledged": True, "taskId": task_ids[0]}
            assert waaah.agent_status(AGENT) == "PROCESSING"
            progress = {"taskId": task_ids[0], "message": "Planning", "percentage": 10}
            assert answer(await session.call_tool("update_progress", progress)) == {"recorded": True}
            done = await session.call_tool(
                "send_response", {"taskId": task_ids[0], "status": "COMPLETED", "message": "Done."}
            )
            assert not done.is_error and text(done) == f"Response recorded for {task_ids[0]}"

    run_async(scenario)
    assert waaah.tool_calls("wait_for_prompt")[0].body == {"agentId": AGENT, "timeout": 20}
    assert waaah.tool_calls("ack_task")[0].body == {"taskId": task_ids[0], "agentId": AGENT}
    ends = assert_every_call_tapped(
        inbox, ["register_agent", "wait_for_prompt", "ack_task", "update_progress", "send_response"]
    )
    assert ends[1]["outcome"] == "task" and ends[1]["task_id"] == task_ids[0]
    assert ends[1]["duration_ms"] >= 500
    assert [e["task_id"] for e in ends[2:]] == task_ids * 3


def test_idle_answer_after_the_timeout(waaah: WaaahServer, inbox: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with proxy_session(proxy_env(waaah.url, inbox=inbox), tmp_path / "stderr") as session:
            idle = answer(await session.call_tool("wait_for_prompt", {"timeout": "1"}))  # string coerced
            assert idle["status"] == "IDLE"

    run_async(scenario)
    (end,) = assert_every_call_tapped(inbox, ["wait_for_prompt"])
    assert end["outcome"] == "idle" and end["duration_ms"] >= 900


def test_evict_comes_through_and_is_tapped(waaah: WaaahServer, inbox: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with proxy_session(proxy_env(waaah.url, inbox=inbox), tmp_path / "stderr") as session:
            await register(session)

            async def evict_soon() -> None:
                await anyio.to_thread.run_sync(lambda: waaah.wait_for_call("wait_for_prompt", 10))
                waaah.evict(AGENT, action="SHUTDOWN", reason="night is over")

            async with anyio.create_task_group() as tg:
                tg.start_soon(evict_soon)
                signal_ = answer(await session.call_tool("wait_for_prompt", {"timeout": 20}))
            assert signal_ == {"controlSignal": "EVICT", "reason": "night is over", "action": "SHUTDOWN"}

    run_async(scenario)
    ends = assert_every_call_tapped(inbox, ["register_agent", "wait_for_prompt"])
    assert ends[1]["outcome"] == "evict" and ends[1]["evict_action"] == "SHUTDOWN"


def test_wrong_key_gives_a_clear_error_without_the_key(
    waaah: WaaahServer, inbox: Path, tmp_path: Path
) -> None:
    wrong = "wrong-key-77d1e0"

    async def scenario() -> None:
        env = proxy_env(waaah.url, api_key=wrong, inbox=inbox)
        async with proxy_session(env, tmp_path / "stderr") as session:
            result = await session.call_tool("wait_for_prompt", {"timeout": 5})
        assert result.is_error
        message = text(result)
        assert "rejected the API key" in message and "WAAAH_API_KEY" in message
        assert "\n" not in message and wrong not in message

    run_async(scenario)
    assert waaah.tool_calls("wait_for_prompt")[0].status == 401
    (end,) = assert_every_call_tapped(inbox, ["wait_for_prompt"])
    assert end["outcome"] == "error" and "API key" in end["error"]
    assert wrong not in inbox.read_text() and wrong not in (tmp_path / "stderr").read_text()


def test_unknown_tool_and_unreachable_server_are_error_results(
    waaah: WaaahServer, inbox: Path, tmp_path: Path
) -> None:
    port = closed_port()

    async def scenario() -> None:
        async with proxy_session(proxy_env(waaah.url, inbox=inbox), tmp_path / "stderr") as session:
            missing = await session.call_tool("scaffold_plan", {"taskId": "t1"})
        assert missing.is_error and "has no tool 'scaffold_plan' (HTTP 404)" in text(missing)

        env = proxy_env(f"http://127.0.0.1:{port}", inbox=inbox)
        async with proxy_session(env, tmp_path / "stderr") as session:
            started = time.monotonic()
            result = await session.call_tool(
                "register_agent", {"capabilities": ["code-writing"], "workspaceContext": WORKSPACE}
            )
            assert time.monotonic() - started < 5
        assert result.is_error
        assert text(result) == f"Cannot reach WAAAH server at http://127.0.0.1:{port}: connection refused"

    run_async(scenario)
    ends = assert_every_call_tapped(inbox, ["scaffold_plan", "register_agent"])
    assert [e["outcome"] for e in ends] == ["error", "error"]
    assert ends[1]["error"].startswith("Cannot reach WAAAH server")


def test_closing_stdin_ends_the_proxy_during_a_long_poll(waaah: WaaahServer, inbox: Path) -> None:
    env = {**os.environ, **proxy_env(waaah.url, inbox=inbox)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "waaah_agent.runtime.mcp.proxy"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:

        def send(message: dict[str, Any]) -> None:
            assert proc.stdin is not None
            proc.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
            proc.stdin.flush()

        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        send({"id": 1, "method": "initialize", "params": init})
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"method": "notifications/initialized"})
        send(
            {
                "id": 2,
                "method": "tools/call",
                "params": {"name": "wait_for_prompt", "arguments": {"timeout": 100}},
            }
        )
        waaah.wait_for_call("wait_for_prompt", 10)
        closed = time.monotonic()
        proc.stdin.close()
        assert proc.wait(timeout=5) == 0
        assert time.monotonic() - closed < 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    (end,) = assert_every_call_tapped(inbox, ["wait_for_prompt"])
    assert end["outcome"] == "error"
