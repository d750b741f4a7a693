"""`waaah agent --metrics-port` and `--log-format json`, headless, over the simulated CLI in its PTY.

The MCP tap is written to the session's inbox as `waaah mcp-proxy` writes it (the e2e test
drives the real proxy and CLI); everything else is the real supervisor, its HTTP server on
127.0.0.1 and the real `waaah pause|resume` from another shell.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.helpers import WAAAH, events, retry_until, session_dirs, sim_env, state

pytestmark = pytest.mark.timeout(120)

SECRET = "crew-test-9f3a1c7e5b2d4f60"


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def ready(port: int) -> tuple[int, dict[str, Any]]:
    code, body = get(port, "/readyz")
    assert body.endswith("\n") and body.count("\n") == 1, body  # one line of JSON
    return code, json.loads(body)


def metric(port: int, name: str, **labels: str) -> float | None:
    for line in get(port, "/metrics")[1].splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def tap(ws: Path, event: str, call_id: int, **fields: Any) -> None:
    """What `waaah mcp-proxy` appends to the session inbox around a tool call."""
    record = {"ts": time.time(), "source": "mcp", "event": event, "tool": "wait_for_prompt"}
    record |= {"call_id": call_id, "pid": 4242, **fields}
    with open(session_dirs(ws)[-1] / "inbox.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")


def test_health_readiness_and_metrics_tell_the_truth_through_a_night(workspace, fake_home, tmp_path):
    env = sim_env(fake_home, WAAAH_RESTART_BASE_SECONDS="8", CREW_TEST_TOKEN=SECRET)
    err = open(tmp_path / "stderr", "wb")  # noqa: SIM115
    agent = subprocess.Popen(
        [WAAAH, "agent", "--start=simulated", "--no-mcp", "--no-nudge", "--metrics-port", "0",
         "--log-format", "json", "--", f"--note={SECRET}"],
        cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
    )  # fmt: skip
    try:
        port = retry_until(
            lambda: (
                next((e["port"] for e in events(workspace) if e["event"] == "metrics"), None)
                if session_dirs(workspace)
                else None
            ),
            30,
        )
        assert get(port, "/healthz") == (200, '{"alive":true}\n')
        code, why = ready(port)
        assert code == 503 and why["reason"] == "starting", why
        assert get(port, "/nothing")[0] == 404

        tap(workspace, "tool_start", 1)  # the agent calls wait_for_prompt
        assert retry_until(lambda: ready(port) == (200, {"ready": True, "state": "waiting"}), 20)
        labels = {"agent": "simulated", "workflow": "waaah-orc", "session": state(workspace)["id"]}
        assert metric(port, "waaah_agent_state", state="tool", **labels) == 1.0
        assert metric(port, "waaah_agent_state", state="ready", **labels) == 0.0
        assert abs(metric(port, "waaah_last_wait_timestamp_seconds") - time.time()) < 30
        tap(workspace, "tool_end", 1, outcome="task", task_id="T-1", duration_ms=900)
        retry_until(lambda: metric(port, "waaah_tasks_total") == 1.0, 20)

        subprocess.run([WAAAH, "pause", "--workspace", str(workspace)], env=env, check=True,
                       capture_output=True, timeout=60)  # fmt: skip
        assert retry_until(lambda: ready(port)[1].get("reason") == "paused", 20)
        subprocess.run([WAAAH, "unpause", "--workspace", str(workspace)], env=env, check=True,
                       capture_output=True, timeout=60)  # fmt: skip
        retry_until(lambda: ready(port)[1].get("reason") != "paused", 20)

        # The agent dies: no loop runs while the restart's delay (4-8 s) is waited out, yet the
        # supervisor is alive and says why it is not ready.
        os.kill(state(workspace)["agent_pid"], signal.SIGKILL)
        retry_until(lambda: ready(port)[1].get("reason") == "restarting", 20)
        assert get(port, "/healthz")[0] == 200
        assert metric(port, "waaah_restarts_total") == 1.0
        assert metric(port, "waaah_agent_state", state="restarting") == 1.0
        retry_until(lambda: len([e for e in events(workspace) if e["event"] == "start"]) == 2, 30)
        assert retry_until(lambda: get(port, "/healthz")[0] == 200, 20)
        assert ready(port)[1]["reason"] == "starting"  # no wait_for_prompt yet in this run
    finally:
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=60) == 0
        err.close()
    # --log-format json: stderr is the events of events.jsonl, one object a line, masked alike.
    printed = [json.loads(line) for line in (tmp_path / "stderr").read_text().splitlines()]
    recorded = events(workspace)
    assert [p for p in printed if p["event"] != "message"] == recorded
    assert {"start", "restart", "metrics", "control", "end"} <= {e["event"] for e in recorded}
    assert SECRET not in (tmp_path / "stderr").read_text()
    assert any("--note=" in a for e in recorded if e["event"] == "start" for a in e["argv"])


def test_a_taken_port_is_one_line_and_nothing_starts(workspace, fake_home):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [WAAAH, "agent", "--start=simulated", "--no-mcp", "--metrics-port", str(port)],
            cwd=workspace, env=sim_env(fake_home), stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}" in lines[0]
    assert "Traceback" not in done.stderr
    assert not any(e["event"] == "start" for e in events(workspace))


def test_healthz_is_503_while_the_loop_does_not_answer_and_200_once_it_does():
    from waaah_agent.core.supervise.vitals import Snapshot
    from waaah_agent.runtime.supervise.metrics import MetricsServer

    asked: list[Any] = []  # a loop that is stuck: the pings are never answered
    server = MetricsServer("127.0.0.1", 0, Snapshot("gemini", "waaah-orc", "s"), asked.append)
    try:
        started = time.monotonic()
        code, body = get(server.port, "/healthz")
        assert code == 503 and "never" in json.loads(body)["reason"], body
        assert time.monotonic() - started < 10
        asked[-1]()  # the loop answers
        assert get(server.port, "/healthz")[0] == 200
        code, text = get(server.port, "/metrics")
        assert code == 200 and "# TYPE waaah_restarts_total counter" in text
    finally:
        server.close()


def test_clients_that_never_finish_their_request_cannot_keep_a_probe_out(monkeypatch):
    """More clients than the server's slots each send a request line, then a byte of a header
    every second, and open a new connection as soon as theirs is closed: /healthz still answers.
    Alone, such a client is cut when its time to send the request is up, however it paces it."""
    import socket
    import threading

    from waaah_agent.core.supervise.vitals import Snapshot
    from waaah_agent.runtime.supervise import metrics

    monkeypatch.setattr(metrics, "HEAD_SECONDS", 2.0)
    server = metrics.MetricsServer(
        "127.0.0.1", 0, Snapshot("gemini", "waaah-orc", "s"), lambda answer: answer()
    )
    stop, cut = threading.Event(), []

    def trickle() -> None:
        while not stop.is_set():
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                opened = time.monotonic()
                try:
                    sock.sendall(b"GET /healthz HTTP/1.0\r\n")
                    while not stop.is_set() and not stop.wait(1.0):
                        sock.sendall(b"X")
                        if time.monotonic() - opened > 30:
                            return  # never cut: the test fails on `cut` below
                except OSError:
                    cut.append(time.monotonic() - opened)

    clients = [threading.Thread(target=trickle, daemon=True) for _ in range(metrics.MAX_CLIENTS + 4)]
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as alone:
            opened = time.monotonic()
            alone.sendall(b"GET /healthz HTTP/1.0\r\n")
            with pytest.raises(OSError):
                while time.monotonic() - opened < 30:
                    time.sleep(0.5)
                    alone.sendall(b"X")
            assert 1.5 < time.monotonic() - opened < 20
        for client in clients:
            client.start()
        time.sleep(1.5)  # every slot is held by a client that is still sending
        for _ in range(4):
            started = time.monotonic()
            assert get(server.port, "/healthz") == (200, '{"alive":true}\n')
            assert time.monotonic() - started < 8
            time.sleep(1.0)
        assert cut and max(cut) < 20, cut
    finally:
        stop.set()
        for client in clients:
            client.join(15)
        server.close()
