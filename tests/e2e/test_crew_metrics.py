"""`waaah agent --metrics-port` over the real gemini CLI, offline: /readyz turns ready when the
agent really waits in `wait_for_prompt` (through our MCP proxy and the WAAAH server double), and
/metrics counts the task the server hands it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_agent import MARKER, REGISTER_ARGS, cli_env, save_and_exit, spawn
from tests.runtime.helpers import events, pump_until, session_dirs, state

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def metric(port: int, name: str, **labels: str) -> float | None:
    for line in get(port, "/metrics")[1].splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_ready_while_gemini_waits_in_wait_for_prompt_and_its_task_is_counted(tmp_path):
    ws = workspace_for(tmp_path)
    script = [
        Rule(ToolCall("register_agent", REGISTER_ARGS), marker=MARKER),
        Rule(ToolCall("wait_for_prompt", {"timeout": 60}), tool_result="register_agent"),
        Rule(Text("TASK-DONE"), tool_result="wait_for_prompt"),
    ]
    with FakeModel(script, default=Text("OK")) as model, WaaahServer() as server:
        env = cli_env("gemini", tmp_path / "home", ws, model.url)
        child = spawn(ws, env, "--start=gemini", f"--server={server.url}", "--metrics-port", "0")
        port = pump_until(
            child,
            lambda: (
                session_dirs(ws) and next((e["port"] for e in events(ws) if e["event"] == "metrics"), None)
            ),
        )
        seen: list[str] = []

        def readiness() -> dict:
            code, body = get(port, "/readyz")
            why = json.loads(body)
            seen.append(why.get("reason") or why.get("state"))
            return why if code == 200 else {}

        assert pump_until(child, readiness, 90) == {"ready": True, "state": "waiting"}
        assert seen[0] == "starting", seen  # not ready before the agent was in its loop
        assert get(port, "/healthz")[0] == 200
        sid = state(ws)["id"]
        assert metric(port, "waaah_agent_state", agent="gemini", session=sid, state="tool") == 1.0
        assert abs(metric(port, "waaah_last_wait_timestamp_seconds") - time.time()) < 30
        server.enqueue("do the thing", state(ws)["agent_id"])
        pump_until(child, lambda: metric(port, "waaah_tasks_total") == 1.0, 60)
        assert save_and_exit(child) == 0
    assert model.main_requests()
