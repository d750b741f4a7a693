"""The pure parts of `waaah mcp-proxy`: filling arguments, reading answers, inbox records."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from waaah_agent.core.mcp.tools import TOOLS, fill_arguments, input_schema
from waaah_agent.runtime.mcp.proxy import (
    Inbox,
    ToolResult,
    classify,
    describe_network_error,
    display_url,
    end_record,
    interpret_http,
    normalize_url,
    one_line,
    start_record,
)

pytestmark = pytest.mark.timeout(10)

SERVER = "http://127.0.0.1:3456"


def ok(payload: object) -> ToolResult:
    return ToolResult((json.dumps(payload),))


def tool_body(text: str, is_error: bool = False) -> bytes:
    body: dict[str, object] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        body["isError"] = True
    return json.dumps(body).encode()


# ----- fill_arguments ----------------------------------------------------------------------------


def test_fill_adds_agent_id_and_source_to_register() -> None:
    body = fill_arguments("register_agent", {"capabilities": ["code-writing"]}, "a1")
    assert body == {"capabilities": ["code-writing"], "agentId": "a1", "source": "CLI"}


def test_fill_keeps_what_the_call_gave() -> None:
    given = {"agentId": "other", "source": "IDE"}
    assert fill_arguments("register_agent", given, "a1") == given
    assert given == {"agentId": "other", "source": "IDE"}  # not mutated


def test_fill_replaces_an_empty_agent_id() -> None:
    assert fill_arguments("ack_task", {"taskId": "t", "agentId": ""}, "a1") == {
        "taskId": "t",
        "agentId": "a1",
    }


@pytest.mark.parametrize("tool", ["wait_for_prompt", "ack_task", "update_progress", "get_agent_status"])
def test_fill_agent_id_for_tools_that_take_one(tool: str) -> None:
    assert fill_arguments(tool, None, "a1")["agentId"] == "a1"


@pytest.mark.parametrize("tool", ["list_agents", "send_response", "scaffold_plan"])
def test_fill_no_agent_id_where_the_server_has_none(tool: str) -> None:
    assert "agentId" not in fill_arguments(tool, {}, "a1")


def test_fill_without_an_agent_id_leaves_it_out() -> None:
    assert fill_arguments("wait_for_prompt", {"timeout": 5}, None) == {"timeout": 5}


def test_fill_turns_a_numeric_string_timeout_into_a_number() -> None:
    assert fill_arguments("wait_for_prompt", {"timeout": "290"}, None) == {"timeout": 290.0}
    assert fill_arguments("wait_for_prompt", {"timeout": "soon"}, None) == {"timeout": "soon"}


# ----- schemas -----------------------------------------------------------------------------------


def test_agent_id_required_only_when_the_proxy_cannot_fill_it() -> None:
    spec = TOOLS["ack_task"]
    assert input_schema(spec, None)["required"] == ["taskId", "agentId"]
    filled = input_schema(spec, "a1")
    assert filled["required"] == ["taskId"]
    assert "'a1'" in filled["properties"]["agentId"]["description"]
    assert "'a1'" not in spec.properties["agentId"]["description"]  # the catalogue is untouched


# ----- interpret_http ----------------------------------------------------------------------------


def test_tool_answer_passes_through() -> None:
    result = interpret_http(200, tool_body('{"recorded": true}'), tool="t", server=SERVER, api_key="k")
    assert result == ToolResult(('{"recorded": true}',), False)


def test_tool_error_passes_through_with_its_details() -> None:
    text = "Error: Invalid arguments:\n  timeout: Expected number"
    result = interpret_http(200, tool_body(text, True), tool="t", server=SERVER, api_key=None)
    assert result == ToolResult((text,), True)


def test_odd_200_answer_is_passed_on_as_json() -> None:
    result = interpret_http(200, b'{"success": true}', tool="t", server=SERVER, api_key=None)
    assert result == ToolResult(('{"success": true}',), False)


def test_401_names_the_key_setting() -> None:
    body = b'{"error":"Unauthorized: Invalid or missing API key"}'
    with_key = interpret_http(401, body, tool="t", server=SERVER, api_key="secret-1")
    assert with_key.is_error and with_key.texts == (
        f"WAAAH server at {SERVER} rejected the API key (HTTP 401): set WAAAH_API_KEY to the server's key.",
    )
    without = interpret_http(401, body, tool="t", server=SERVER, api_key=None)
    assert "requires an API key" in without.texts[0] and "WAAAH_API_KEY" in without.texts[0]


def test_404_names_the_tool() -> None:
    result = interpret_http(404, b'{"error":"Tool x not found"}', tool="x", server=SERVER, api_key=None)
    assert result == ToolResult.error(f"WAAAH server at {SERVER} has no tool 'x' (HTTP 404).")


@pytest.mark.parametrize("status", [200, 400, 502])
def test_non_json_body_is_an_error(status: int) -> None:
    result = interpret_http(status, b"<html>Bad Request</html>", tool="t", server=SERVER, api_key=None)
    assert result.is_error and f"answered HTTP {status} with a non-JSON body" in result.texts[0]


def test_other_status_gives_the_servers_error_on_one_line_without_the_key() -> None:
    body = b'{"error": "boom with secret-1\\nand more"}'
    result = interpret_http(500, body, tool="t", server=SERVER, api_key="secret-1")
    assert result.texts == (f"WAAAH server at {SERVER} failed (HTTP 500): boom with ***",)


# ----- classify ----------------------------------------------------------------------------------


def test_classify_wait_answers() -> None:
    task = ok({"taskId": "task-1", "prompt": "p", "from": {"type": "user", "id": "u"}})
    assert classify("wait_for_prompt", {}, task) == {"outcome": "task", "task_id": "task-1"}
    idle = ok({"success": True, "status": "IDLE", "message": "No tasks available. Waiting."})
    assert classify("wait_for_prompt", {}, idle) == {"outcome": "idle"}
    evict = ok({"controlSignal": "EVICT", "reason": "r", "action": "SHUTDOWN"})
    assert classify("wait_for_prompt", {}, evict) == {"outcome": "evict", "evict_action": "SHUTDOWN"}
    assert classify("wait_for_prompt", {}, ok({"something": "else"})) == {"outcome": "ok"}


def test_classify_errors_give_a_short_line() -> None:
    result = ToolResult.error("Error: Invalid arguments:\n  agentId: Required")
    assert classify("wait_for_prompt", {}, result) == {
        "outcome": "error",
        "error": "Error: Invalid arguments:",
    }


def test_classify_other_tools() -> None:
    registered = ok({"registered": True, "agentId": "a1-xyz", "displayName": "A"})
    assert classify("register_agent", {"agentId": "a1"}, registered) == {
        "outcome": "ok",
        "agent_id": "a1-xyz",
    }
    ack = ToolResult(("Task task-1 acknowledged",))  # plain sentences happen
    assert classify("ack_task", {"taskId": "task-1"}, ack) == {"outcome": "ok", "task_id": "task-1"}
    assert classify("list_agents", {}, ok([])) == {"outcome": "ok"}


# ----- small helpers -----------------------------------------------------------------------------


def test_display_url_hides_credentials_and_query() -> None:
    assert display_url("http://user:pw@host:3456/waaah/?apiKey=s") == "http://host:3456/waaah"
    assert display_url("https://waaah.example.com") == "https://waaah.example.com"


def test_normalize_url_adds_a_missing_scheme() -> None:
    assert normalize_url(" localhost:3456 ") == "http://localhost:3456"
    assert normalize_url("https://h") == "https://h"


def test_one_line() -> None:
    assert one_line("\n  first  \nsecond") == "first"
    assert one_line("x" * 300, 10) == "x" * 9 + "…"
    assert one_line("") == ""


def test_describe_network_error() -> None:
    assert describe_network_error(ConnectionRefusedError(111, "Connection refused")) == "connection refused"
    assert describe_network_error(TimeoutError("timed out")).startswith("no connection within")
    assert describe_network_error(socket.gaierror(-2, "Name or service not known")).startswith("unknown host")
    assert describe_network_error(OSError(113, "No route to host")) == "no route to host"


def test_inbox_records() -> None:
    assert start_record("wait_for_prompt", 3, 12.5, 77).to_json() == {
        "ts": 12.5,
        "source": "mcp",
        "event": "tool_start",
        "tool": "wait_for_prompt",
        "call_id": 3,
        "pid": 77,
    }
    end = end_record("wait_for_prompt", 3, 14.0, 77, 1.2345, {"outcome": "task", "task_id": "t"}).to_json()
    assert end == {
        "ts": 14.0,
        "source": "mcp",
        "event": "tool_end",
        "tool": "wait_for_prompt",
        "call_id": 3,
        "pid": 77,
        "duration_ms": 1234,
        "outcome": "task",
        "task_id": "t",
    }


def test_inbox_appends_lines_and_creates_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "inbox.jsonl"
    inbox = Inbox(path)
    inbox.write(start_record("ack_task", 1, 1.0, 7))
    inbox.write(end_record("ack_task", 1, 2.0, 7, 1.0, {"outcome": "error", "error": "é"}))
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert [(ln["event"], ln.get("error")) for ln in lines] == [("tool_start", None), ("tool_end", "é")]
    assert "é" in path.read_text("utf-8")  # written as UTF-8, not escaped


def test_inbox_failures_never_raise(tmp_path: Path) -> None:
    Inbox(tmp_path).write(start_record("ack_task", 1, 1.0, 7))  # a directory: cannot be opened for writing
    Inbox(None).write(start_record("ack_task", 1, 1.0, 7))
