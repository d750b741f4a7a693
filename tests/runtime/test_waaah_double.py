"""The WAAAH server double hands out tasks as the real server does (its packages/mcp-server/src/state):
a push only at creation, to every wait of the agent then pending (a dead client's too); an
un-ACKed task requeued by the scheduler and reserved again without a push; a new wait takes only
QUEUED tasks; the admin task list with each task's history."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.doubles.waaah_server import IDLE_ANSWER, WaaahServer, dead_wait

pytestmark = pytest.mark.timeout(30)

AGENT = "a1"
RESERVED = f"Reserved for agent {AGENT} (scored match)"


def call(url: str, tool: str, body: dict[str, Any], timeout: float = 20) -> Any:
    req = urllib.request.Request(
        f"{url}/mcp/tools/{tool}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        answer = json.loads(resp.read())
    text = answer["content"][0]["text"]
    return text if answer.get("isError") else json.loads(text)


def get(url: str, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def wait_in_thread(url: str, timeout: float) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(
        target=lambda: out.append(call(url, "wait_for_prompt", {"agentId": AGENT, "timeout": timeout}))
    )
    thread.start()
    return thread, out


def messages(server: WaaahServer, task_id: str) -> list[str]:
    task = server.task(task_id)
    assert task is not None
    return [h["message"] for h in task["history"]]


def test_a_task_created_while_the_agent_waits_is_pushed_and_acked_only_by_that_agent() -> None:
    with WaaahServer() as server:
        thread, out = wait_in_thread(server.url, 10)
        server.wait_for_call("wait_for_prompt")
        time.sleep(0.2)
        task_id = server.enqueue("Write the README", task_id="t-1")
        thread.join(5)
        assert out[0]["taskId"] == "t-1" and out[0]["prompt"] == "Write the README"
        assert server.task(task_id)["status"] == "PENDING_ACK"
        assert messages(server, task_id) == [RESERVED]
        assert call(server.url, "ack_task", {"taskId": task_id, "agentId": "other"}) == (
            f"ACK failed: Expected agent {AGENT} but got other"
        )
        assert call(server.url, "ack_task", {"taskId": task_id, "agentId": AGENT}) == {
            "acknowledged": True,
            "taskId": task_id,
        }
        assert call(server.url, "ack_task", {"taskId": task_id, "agentId": AGENT}) == (
            "ACK failed: Task is not in PENDING_ACK state"
        )
        assert (
            call(server.url, "ack_task", {"taskId": "nope", "agentId": AGENT}) == "ACK failed: Task not found"
        )
        assert server.task(task_id)["status"] == "ASSIGNED" and server.task(task_id)["assignedTo"] == AGENT
        assert len(server.acks(task_id)) == 1


def test_a_new_wait_takes_a_queued_task_at_once() -> None:
    with WaaahServer() as server:
        task_id = server.enqueue("Queued before anyone waits")
        assert server.task(task_id)["status"] == "QUEUED"
        started = time.monotonic()
        assert call(server.url, "wait_for_prompt", {"agentId": AGENT, "timeout": 10})["taskId"] == task_id
        assert time.monotonic() - started < 2
        assert server.task(task_id)["status"] == "PENDING_ACK" and messages(server, task_id) == []


def test_a_dead_clients_wait_takes_the_task_then_it_is_requeued_and_reserved_without_a_push() -> None:
    with WaaahServer(ack_timeout=0.5, scheduler_interval=3600) as server:  # cycles run when asked
        dead_wait(server.url, AGENT, timeout=30)
        server.wait_for_call("wait_for_prompt")
        time.sleep(0.2)
        assert server.agent_status(AGENT) == "WAITING"  # the dead wait is still registered
        task_id = server.enqueue("Lost to a dead wait", task_id="t-lost")
        assert server.task(task_id)["status"] == "PENDING_ACK" and messages(server, task_id) == [RESERVED]
        # The dead wait was answered (the task pushed to it) and is gone before the live one
        # starts: its end would otherwise unflag the live wait on a slow machine.
        server.wait_for_call("wait_for_prompt", finished=True)
        # A live wait: the task is PENDING_ACK, so it is not taken. Once its ACK is overdue the
        # scheduler requeues it and reserves it for the waiting agent, without a push.
        thread, out = wait_in_thread(server.url, 3)
        server.wait_for_call("wait_for_prompt", count=2)
        time.sleep(0.6)
        server.run_scheduler()
        assert messages(server, task_id) == [RESERVED, "Force-retried by admin", RESERVED]
        thread.join(10)
        assert out == [IDLE_ANSWER]
        # Each new wait: the task is not QUEUED, so not taken; the wait's own scheduler cycle
        # requeues it and reserves it again for that same wait, without a push.
        time.sleep(0.6)
        assert call(server.url, "wait_for_prompt", {"agentId": AGENT, "timeout": 1}) == IDLE_ANSWER
        assert messages(server, task_id)[3:] == ["Force-retried by admin", RESERVED]
        assert server.task(task_id)["status"] == "PENDING_ACK" and server.acks(task_id) == []


def test_the_admin_task_list_filters_by_status_and_shows_the_history() -> None:
    with WaaahServer(api_key="k") as server:
        first = server.enqueue("one", task_id="t-one")
        time.sleep(0.01)
        second = server.enqueue("two", task_id="t-two")
        server.run_scheduler()  # nobody waits: both stay QUEUED
        req = urllib.request.Request(f"{server.url}/admin/tasks?status=QUEUED", headers={"X-API-Key": "k"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            listed = json.loads(resp.read())
        assert [t["id"] for t in listed] == [second, first]  # newest first
        assert listed[0]["prompt"] == "two" and listed[0]["history"] == []
        assert get(server.url, "/admin/tasks")[0] == 401
        req = urllib.request.Request(
            f"{server.url}/admin/tasks?status=PENDING_ACK", headers={"X-API-Key": "k"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.loads(resp.read()) == []
        req = urllib.request.Request(f"{server.url}/admin/tasks/{first}", headers={"X-API-Key": "k"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.loads(resp.read())["status"] == "QUEUED"
        req = urllib.request.Request(f"{server.url}/admin/tasks/none", headers={"X-API-Key": "k"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 404 and json.loads(err.value.read()) == {"error": "Task not found"}
