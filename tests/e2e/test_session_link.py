"""A task that arrives while the agent is being restarted reaches the next CLI instance once.

The real gemini and claude, offline, in their WAAAH loop; the WAAAH double behaves as the real
server does: a task created while the agent waits is pushed to its pending wait (also one whose
client is gone), an un-ACKed task is requeued and reserved again without a push. The agent's CLI
is killed while it sits in ``wait_for_prompt`` (SIGKILL, a stall restart, an EVICT RESTART under
way); a task created 3 s later must be served exactly once: the fake model sees its prompt once,
the double sees one ACK.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_agent import (
    CONTINUE_MARKER,
    MARKER,
    REGISTER_ARGS,
    cli_env,
    inbox_lines,
    save_and_exit,
    spawn,
)
from tests.runtime.helpers import WAAAH, events, pump_for, pump_until, state, state_or_none

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

WAIT = ToolCall("wait_for_prompt", {"timeout": 120})  # long: the killed CLI's wait is still open
SERVED_WITHIN = 60.0


def task_prompt(n: int) -> str:
    return f"Task number {n}: list the files of the workspace."


def loop_rules(task_ids: list[str]) -> list[Rule]:
    """Register, wait; a task is acked, then the agent waits again; after a restart the continue
    prompt sends it back to its wait."""
    acks = [
        Rule(
            ToolCall("ack_task", {"taskId": task_id}),
            tool_result="wait_for_prompt",
            result_has=f'"taskId": "{task_id}"',
        )
        for task_id in task_ids
    ]
    return [
        Rule(ToolCall("register_agent", REGISTER_ARGS), marker=MARKER),
        *acks,
        Rule(WAIT, tool_result="register_agent"),
        Rule(WAIT, tool_result="ack_task"),
        Rule(WAIT, tool_result="wait_for_prompt"),
        Rule(WAIT, marker=CONTINUE_MARKER),
    ]


def served(model: FakeModel, prompt: str) -> int:
    """How many model requests carried the task's prompt as a tool result."""
    return sum(prompt in r["tool_result_text"] for r in model.main_requests())


def acked_by_agent(model: FakeModel, task_id: str) -> bool:
    """The agent's ack_task of the task was answered (by the session: the server has the link's)."""
    return any(
        r["tool_result_name"]
        and r["tool_result_name"].endswith("ack_task")
        and task_id in r["tool_result_text"]
        for r in model.main_requests()
    )


def open_waits(ws: Path) -> list[tuple[int, int]]:
    """The agent's wait_for_prompt calls that started and have not ended (from the inbox)."""
    lines = [e for e in inbox_lines(ws) if e.get("tool") == "wait_for_prompt"]
    ended = {(e["pid"], e["call_id"]) for e in lines if e["event"] == "tool_end"}
    started = [(e["pid"], e["call_id"]) for e in lines if e["event"] == "tool_start"]
    return [call for call in started if call not in ended]


def inside_wait(server: WaaahServer, ws: Path) -> bool:
    st = state_or_none(ws)
    return bool(
        st and st.get("agent_id") and server.agent_status(st["agent_id"]) == "WAITING" and open_waits(ws)
    )


def link_env(cli: str, tmp_path: Path, ws: Path, model: FakeModel) -> dict[str, str]:
    env = cli_env(cli, tmp_path / "home", ws, model.url)
    env["WAAAH_RESTART_BASE_SECONDS"] = "0.000001"  # many restarts in a row: no backoff to wait out
    return env


def serve_once_after(
    child: pexpect.spawn, server: WaaahServer, model: FakeModel, n: int, task_id: str
) -> float:
    """Create task ``n`` 3 s from now; wait until the model has its prompt; returns the seconds."""
    pump_for(child, 3)
    created = time.monotonic()
    server.enqueue(task_prompt(n), workspace_id="ws", task_id=task_id)
    pump_until(child, lambda: served(model, task_prompt(n)), SERVED_WITHIN)
    return time.monotonic() - created


def assert_served_once(server: WaaahServer, model: FakeModel, n: int, task_id: str) -> None:
    assert served(model, task_prompt(n)) == 1, n
    assert len(server.acks(task_id)) == 1, (n, [c.answer for c in server.tool_calls("ack_task")])
    assert server.task(task_id)["status"] == "ASSIGNED"


def start(
    cli: str, tmp_path: Path, ws: Path, model: FakeModel, server: WaaahServer, *args: str
) -> pexpect.spawn:
    env = link_env(cli, tmp_path, ws, model)
    return spawn(ws, env, f"--start={cli}", f"--server={server.url}", *args)


def test_a_task_created_after_a_sigkill_inside_the_wait_is_served_once(cli, tmp_path):
    ws = workspace_for(tmp_path)
    with FakeModel(loop_rules(["task-1"]), default=Text("OK")) as model, WaaahServer() as server:
        child = start(cli, tmp_path, ws, model, server)
        pump_until(child, lambda: inside_wait(server, ws), 90)
        os.kill(state(ws)["agent_pid"], signal.SIGKILL)
        took = serve_once_after(child, server, model, 1, "task-1")
        print(f"served {took:.1f} s after it was created")
        pump_for(child, 5)  # nothing more comes of it
        assert_served_once(server, model, 1, "task-1")
        assert state(ws)["restarts"] == 1
        # Kept by the session unless the new CLI was already back in its wait when the task came
        # (a quick restart): then the session's wait handed it straight on.
        kept = "task-kept" in [e["event"] for e in events(ws)]
        print("kept by the session" if kept else "the restarted CLI was already waiting")
        assert save_and_exit(child) == 0
        report = subprocess.run([WAAAH, "report"], cwd=ws, capture_output=True, text=True, timeout=60)
        assert ("tasks the session kept or brought back: 1" in report.stdout) is kept, report.stdout
        assert ("task-1  came while the agent was restarting: kept for it" in report.stdout) is kept


def test_a_task_and_an_evict_restart_during_the_restart_are_served_once_each(cli, tmp_path):
    """The CLI is SIGKILLed inside wait_for_prompt; 3 s later, while it is being restarted, a
    task is created and the server evicts the agent (RESTART): the new CLI gets the task once,
    acks it, and the eviction then restarts it once more."""
    ws = workspace_for(tmp_path)
    with FakeModel(loop_rules(["task-1"]), default=Text("OK")) as model, WaaahServer() as server:
        child = start(cli, tmp_path, ws, model, server)
        pump_until(child, lambda: inside_wait(server, ws), 90)
        os.kill(state(ws)["agent_pid"], signal.SIGKILL)
        pump_for(child, 3)
        created = time.monotonic()
        server.enqueue(task_prompt(1), workspace_id="ws", task_id="task-1")
        server.evict(state(ws)["agent_id"], "RESTART", reason="new workflow")
        pump_until(child, lambda: served(model, task_prompt(1)), SERVED_WITHIN)
        print(f"served {time.monotonic() - created:.1f} s after it was created")
        pump_until(child, lambda: (st := state(ws))["restarts"] == 2 and st["status"] == "running", 60)
        pump_for(child, 5)
        assert_served_once(server, model, 1, "task-1")
        assert acked_by_agent(model, "task-1")
        restarts = [e["after"] for e in events(ws) if e["event"] == "restart"]
        assert len(restarts) == 2 and "SIGKILL" in restarts[0] and "evicted" in restarts[1], restarts
        assert save_and_exit(child) == 0


def test_a_task_for_a_cli_frozen_in_its_wait_is_served_once_after_the_stall_restart(cli, tmp_path):
    """The CLI's whole process group is stopped (SIGSTOP) inside wait_for_prompt; the task
    created 3 s later is handed to its wait but never read: the wait's end is known, the frozen
    screen is a stall (Esc, then a restart), and the new CLI gets the task."""
    ws = workspace_for(tmp_path)
    with FakeModel(loop_rules(["task-1"]), default=Text("OK")) as model, WaaahServer() as server:
        child = start(cli, tmp_path, ws, model, server, "--stall-timeout", "4")
        pump_until(child, lambda: inside_wait(server, ws), 90)
        frozen = state(ws)["agent_pid"]
        os.killpg(frozen, signal.SIGSTOP)
        try:
            took = serve_once_after(child, server, model, 1, "task-1")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(frozen, signal.SIGCONT)
        print(f"served {took:.1f} s after it was created")
        pump_for(child, 5)
        assert_served_once(server, model, 1, "task-1")
        restarts = [e for e in events(ws) if e["event"] == "restart"]
        assert len(restarts) == 1 and "stalled" in restarts[0]["after"], restarts
        assert save_and_exit(child) == 0


KILLS = 20


def test_twenty_sigkills_inside_the_wait_in_a_row_lose_and_repeat_no_task(tmp_path):
    cli = "claude"
    ws = workspace_for(tmp_path)
    ids = [f"task-{n}" for n in range(1, KILLS + 1)]
    with (
        FakeModel(loop_rules(ids), default=Text("OK"), log_path=tmp_path / "model.jsonl") as model,
        WaaahServer() as server,
    ):
        child = start(cli, tmp_path, ws, model, server, "--restart-budget", str(KILLS + 5))
        times = []
        for n, task_id in enumerate(ids, 1):
            pump_until(child, lambda: inside_wait(server, ws), 90)
            os.kill(state(ws)["agent_pid"], signal.SIGKILL)
            times.append(serve_once_after(child, server, model, n, task_id))
            pump_until(child, lambda task_id=task_id: acked_by_agent(model, task_id), 30)
        print(
            f"{KILLS} kills: served after {min(times):.1f}..{max(times):.1f} s (mean {sum(times) / len(times):.1f})"
        )
        pump_for(child, 5)
        lost = [n for n in range(1, KILLS + 1) if served(model, task_prompt(n)) == 0]
        repeated = [n for n in range(1, KILLS + 1) if served(model, task_prompt(n)) > 1]
        assert (lost, repeated) == ([], [])
        assert [len(server.acks(t)) for t in ids] == [1] * KILLS
        assert state(ws)["restarts"] == KILLS
        assert save_and_exit(child) == 0
