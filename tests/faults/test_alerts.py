"""Alert URLs (`--notify`, ``WAAAH_NOTIFY``, ``notify`` in the config file) hold tokens, and an
alert endpoint can be as slow as it likes.

No child process gets an alert URL in its environment or its arguments: not the supervised
agent (real gemini here), not its MCP proxy (nor the hooks, which inherit the agent's
environment), not the CLI of `waaah run`, not the process that sends an alert (the URLs reach
it on its stdin). An endpoint on 127.0.0.1 that takes the alert and then answers a byte a second
never keeps the supervisor from exiting: each alert has 10 s in all, not 10 s per read.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.doubles.cli_homes import cli_bin, end_process_group, gemini_env
from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import with_cli_path
from tests.faults.conftest import WAAAH, assert_no_traceback, clean_env, run_waaah
from tests.faults.test_homes import REGISTER, session_state
from tests.runtime.helpers import retry_until

TOKEN = "notify-token-5b1e77c0d2"


class Trickle:
    """A webhook on 127.0.0.1 that reads the alert, then answers one byte a second, forever."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"json://127.0.0.1:{self.sock.getsockname()[1]}/{TOKEN}"
        self.requests: list[bytes] = []
        self.stopped = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            with contextlib.suppress(OSError):
                self.requests.append(conn.recv(65536))
                for byte in (
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
                    + b"x" * 100000
                ):
                    if self.stopped.wait(1.0):
                        return
                    conn.send(bytes([byte]))

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


def process_texts(pid: int) -> bytes:
    """A process's arguments and environment, as the kernel shows them to its user."""
    found = b""
    for name in ("cmdline", "environ"):
        with contextlib.suppress(OSError):
            found += Path(f"/proc/{pid}/{name}").read_bytes()
    return found


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def test_an_endpoint_that_trickles_never_keeps_the_supervisor_from_exiting(tmp_path, home):
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    endpoint = Trickle()
    env = clean_env(
        home, SIM_CRASH_AT_START="7", WAAAH_RESTART_BASE_SECONDS="0.05", WAAAH_NOTIFY=endpoint.url
    )
    try:
        started = time.monotonic()
        proc = subprocess.Popen(
            [WAAAH, "agent", "--start=simulated", "--restart-budget", "1"],
            cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            retry_until(lambda: endpoint.requests, timeout=60)  # the gave-up alert is being sent
            sent_at = time.monotonic()
            senders = {p: process_texts(p) for p in descendants(proc.pid)}
            try:
                out, _ = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail("the supervisor has not exited 60 s after the endpoint took the alert")
        finally:
            end_process_group(proc.pid)
    finally:
        endpoint.close()
    waited = time.monotonic() - sent_at
    print(
        f"\nexited {waited:.1f} s after the endpoint took the alert ({time.monotonic() - started:.1f} s in all)"
    )
    assert_no_traceback(out.decode())
    assert proc.returncode == 11, out.decode()[-2000:]
    assert waited < 25, f"the supervisor waited {waited:.1f} s on a trickling endpoint"
    (events,) = (ws / ".waaah" / "sessions").glob("*/events.jsonl")
    assert b"not delivered within 10 s" in events.read_bytes() + out, out.decode()[-2000:]
    # The sending process got the URL on its stdin: not in its arguments, not in its environment.
    sending = [texts for texts in senders.values() if b"waaah_agent.runtime.night.alerts" in texts]
    assert sending and not [texts for texts in sending if TOKEN.encode() in texts], senders


def test_alert_urls_reach_no_child_of_the_supervisor(tmp_path):
    """WAAAH_NOTIFY and the config file's notify: neither in the agent's environment (gemini, its
    MCP proxy), nor in anyone's arguments."""
    script = [
        Rule(ToolCall("register_agent", REGISTER), marker="stay in the loop"),
        Rule(Text("ANSWER-OK"), tool_result="register_agent"),
    ]
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    with FakeModel(script, default=Text("ANSWER-OK")) as model, WaaahServer() as server:
        env = with_cli_path(gemini_env(tmp_path / "home", model.url))
        env["WAAAH_NOTIFY"] = f"json://127.0.0.1:9/{TOKEN}-env"
        config = tmp_path / "home" / ".config" / "waaah-agent" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f'notify = ["json://127.0.0.1:9/{TOKEN}-config"]\n')
        proc = subprocess.Popen(
            [WAAAH, "agent", "--start=gemini", f"--server={server.url}"],
            cwd=ws, env={k: v for k, v in env.items() if k != "XDG_CONFIG_HOME"} | {"WAAAH_CONFIG": str(config)},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            retry_until(
                lambda: [c for c in server.calls if c.tool == "register_agent"], timeout=120, interval=0.2
            )
            agent = int(str(session_state(ws)["agent_pid"]))
            children = [agent, *descendants(agent)]
            proxies = [p for p in children if b"mcp-proxy" in process_texts(p)]
            assert proxies, "the MCP proxy runs under the agent"
            for pid in children:
                assert TOKEN.encode() not in process_texts(pid), (pid, process_texts(pid)[:300])
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            finally:
                end_process_group(proc.pid)


def test_alert_urls_never_reach_the_cli_of_waaah_run(tmp_path):
    dump = tmp_path / "cli-environ"
    shim = tmp_path / "bin"
    shim.mkdir()
    wrapper = shim / "gemini"
    wrapper.write_text(f'#!/bin/sh\ncat /proc/$$/environ > "{dump}"\nexec "{cli_bin("gemini")}" "$@"\n')
    wrapper.chmod(0o755)
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    with FakeModel([], default=Text("RUN-ANSWER")) as model:
        env = gemini_env(tmp_path / "home", model.url)
        env["PATH"] = f"{shim}:{env['PATH']}"
        env["WAAAH_NOTIFY"] = f"json://127.0.0.1:9/{TOKEN}"
        done = run_waaah("run", "--agent", "gemini", "say hi", cwd=ws, env=env, timeout=180)
    assert_no_traceback(done.stdout, done.stderr)
    assert "RUN-ANSWER" in done.stdout, done.stdout + done.stderr
    assert dump.exists() and TOKEN.encode() not in dump.read_bytes()


@pytest.mark.parametrize("command", [["agent", "--help"]])
def test_help_says_to_prefer_the_variable_or_the_config_file(tmp_path, home, command):
    done = run_waaah(*command, cwd=tmp_path, env=clean_env(home, COLUMNS="200"))
    text = " ".join(done.stdout.split())
    assert "prefer WAAAH_NOTIFY or notify in the config file" in text, text
