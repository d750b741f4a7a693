"""The session link (runtime/mcp/link.py) with the real `waaah mcp-proxy` over its real Unix socket,
against the WAAAH server double: the waits belong to the session, not to one proxy process."""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.waaah_server import WaaahServer, dead_wait
from tests.runtime.helpers import retry_until
from tests.runtime.test_mcp_proxy import AGENT, KEY, ROOT, WORKSPACE, inbox_lines, proxy_env
from waaah_agent.runtime.mcp.link import SessionLink, socket_path
from waaah_agent.runtime.mcp.tool_http import ToolServer
from waaah_agent.runtime.supervise.background import Mailbox

pytestmark = pytest.mark.timeout(60)


class RawProxy:
    """`python -m waaah_agent.runtime.mcp.proxy` driven with JSON-RPC lines, to be killed mid-call."""

    def __init__(self, env: dict[str, str], stderr: Path) -> None:
        with stderr.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "waaah_agent.runtime.mcp.proxy"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env={**os.environ, **env},
                cwd=ROOT,
            )
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        self.send({"id": 0, "method": "initialize", "params": init})
        assert self.answer(0, 20)["result"]
        self.send({"method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        self.proc.stdin.flush()

    def call(self, number: int, tool: str, arguments: dict[str, Any]) -> None:
        self.send({"id": number, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})

    def answer(self, number: int, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([self.proc.stdout], [], [], 0.1)[0]:
                message = json.loads(self.proc.stdout.readline())
                if message.get("id") == number:
                    return dict(message)
        raise TimeoutError(f"no answer to call {number} within {timeout}s")

    def result(self, number: int, timeout: float = 20) -> Any:
        content = self.answer(number, timeout)["result"]
        assert not content.get("isError"), content
        return json.loads(content["content"][0]["text"])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture()
def waaah() -> Iterator[WaaahServer]:
    with WaaahServer(api_key=KEY) as server:
        yield server


class Session:
    """What the supervisor has: a session folder, its inbox, a mailbox, and the link."""

    def __init__(self, folder: Path, server: WaaahServer, poll_every: float = 20.0) -> None:
        self.folder, self.inbox = folder, folder / "inbox.jsonl"
        folder.mkdir(parents=True, exist_ok=True)
        self.mailbox = Mailbox()
        self.messages: list[dict[str, Any]] = []
        self.link = SessionLink(
            socket_path(),
            folder,
            ToolServer(server.url, KEY),
            AGENT,
            self.inbox,
            self.mailbox.post,
            poll_every,
        )
        self.link.start()
        self.proxies: list[RawProxy] = []

    def proxy(self) -> RawProxy:
        env = {**proxy_env(self.link.server.display, inbox=self.inbox), "WAAAH_LINK": str(self.link.path)}
        proxy = RawProxy(env, self.folder / "proxy.stderr")
        self.proxies.append(proxy)
        return proxy

    def events(self) -> list[str]:
        self.messages += [m.data for m in self.mailbox.drain()]
        return [str(m["event"]) for m in self.messages if m.get("event")]

    def held(self) -> list[dict[str, Any]]:
        return kept(self.folder)

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.close()
        self.link.stop()
        self.mailbox.close()


def kept(folder: Path) -> list[dict[str, Any]]:
    """What the session's link.json holds (written atomically: never half a file)."""
    path = folder / "link.json"
    return list(json.loads(path.read_text())["held"]) if path.exists() else []


@pytest.fixture()
def session(tmp_path: Path, waaah: WaaahServer) -> Iterator[Session]:
    found = Session(tmp_path / "session", waaah)
    yield found
    found.close()


def waiting(session: Session, waaah: WaaahServer, timeout: float) -> RawProxy:
    """A new proxy that registered and is in wait_for_prompt (call 2) as the server sees it."""
    proxy = session.proxy()
    register(proxy)
    proxy.call(2, "wait_for_prompt", {"timeout": timeout})
    waaah.wait_for_call("wait_for_prompt", 10)
    return proxy


def register(proxy: RawProxy) -> None:
    proxy.call(
        1,
        "register_agent",
        {"displayName": "Agent One", "capabilities": ["code-writing"], "workspaceContext": WORKSPACE},
    )
    assert proxy.result(1)["agentId"] == AGENT


def test_a_wait_goes_through_the_link_and_the_session_answers_the_agents_ack(
    session: Session, waaah: WaaahServer
) -> None:
    proxy = waiting(session, waaah, 20)
    task_id = waaah.enqueue("Write the README", AGENT, workspace_id="acme/widgets")
    assert proxy.result(2)["taskId"] == task_id
    proxy.call(3, "ack_task", {"taskId": task_id})
    assert proxy.result(3) == {"acknowledged": True, "taskId": task_id}
    # The server saw the link's wait and the link's ACK, once each; the agent's was answered here.
    assert [c.body for c in waaah.tool_calls("wait_for_prompt")] == [{"agentId": AGENT, "timeout": 20}]
    assert len(waaah.acks(task_id)) == 1 and waaah.task(task_id)["status"] == "ASSIGNED"
    assert session.held() == []
    # The link writes a call's tool_end once its answer is sent, so the agent can have the answer
    # (and make its next call) a moment before that line is there: each call's end follows its start.
    retry_until(lambda: len(inbox_lines(session.inbox)) >= 6, 10)
    lines = [(e["event"], e["tool"], e["pid"], e["call_id"]) for e in inbox_lines(session.inbox)]
    assert all(lines.index(("tool_start", *ln[1:])) < n for n, ln in enumerate(lines) if ln[0] == "tool_end")
    pid = proxy.proc.pid
    assert sorted(lines, key=lambda ln: (ln[3], ln[0] == "tool_end")) == [
        ("tool_start", "register_agent", pid, 1),
        ("tool_end", "register_agent", pid, 1),
        ("tool_start", "wait_for_prompt", pid, 2),
        ("tool_end", "wait_for_prompt", pid, 2),
        ("tool_start", "ack_task", pid, 3),
        ("tool_end", "ack_task", pid, 3),
    ]
    ends = [e for e in inbox_lines(session.inbox) if e["event"] == "tool_end"]
    assert ends[1]["outcome"] == "task" and ends[1]["task_id"] == task_id


def test_a_task_for_a_proxy_killed_in_its_wait_goes_to_the_next_one_without_asking_again(
    session: Session, waaah: WaaahServer
) -> None:
    first = waiting(session, waaah, 40)
    first.kill()
    # The link sees the hang-up: the wait ends for the supervisor, and goes on for the session.
    retry_until(
        lambda: [e for e in inbox_lines(session.inbox) if e["event"] == "tool_end" and e["call_id"] == 2]
    )
    assert waaah.agent_status(AGENT) == "WAITING"
    task_id = waaah.enqueue("Task for the next CLI", AGENT, workspace_id="acme/widgets")
    retry_until(lambda: session.held() and session.held()[0]["acked"])
    assert session.held()[0]["key"] == task_id and waaah.task(task_id)["status"] == "ASSIGNED"
    assert "task-kept" in session.events()
    second = session.proxy()
    started = time.monotonic()
    second.call(1, "wait_for_prompt", {"timeout": 40})
    assert second.result(1)["taskId"] == task_id
    assert time.monotonic() - started < 5
    assert len(waaah.tool_calls("wait_for_prompt")) == 1  # not asked of the server again
    second.call(2, "ack_task", {"taskId": task_id})
    assert second.result(2)["acknowledged"] is True
    assert len(waaah.acks(task_id)) == 1 and session.held() == []


def test_a_task_reserved_for_the_agent_but_never_sent_is_noticed_acked_and_handed_to_its_wait(
    tmp_path: Path, waaah: WaaahServer
) -> None:
    dead_wait(waaah.url, AGENT, KEY)
    waaah.wait_for_call("wait_for_prompt", 10)
    time.sleep(0.2)
    task_id = waaah.enqueue("Stuck in PENDING_ACK", AGENT)
    assert waaah.task(task_id)["status"] == "PENDING_ACK"  # pushed to the dead wait, never ACKed
    resumed = Session(tmp_path / "resumed", waaah, poll_every=1.0)
    try:
        proxy = resumed.proxy()
        proxy.call(1, "wait_for_prompt", {"timeout": 30})
        started = time.monotonic()
        assert proxy.result(1, 20)["taskId"] == task_id
        print(f"brought back in {time.monotonic() - started:.1f} s")
        assert "task-recovered" in resumed.events()
        assert any(task_id in str(m["text"]) for m in resumed.messages)
        assert len(waaah.acks(task_id)) == 1
        proxy.call(2, "ack_task", {"taskId": task_id})
        assert proxy.result(2)["acknowledged"] is True and len(waaah.acks(task_id)) == 1
    finally:
        resumed.close()


SUPERVISOR = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from waaah_agent.runtime.supervise.background import Mailbox
    from waaah_agent.runtime.mcp.link import SessionLink
    from waaah_agent.runtime.mcp.tool_http import ToolServer
    url, key, agent, folder, sock = sys.argv[1:]
    link = SessionLink(Path(sock), Path(folder), ToolServer(url, key), agent, Path(folder) / "inbox.jsonl", Mailbox().post)
    link.start()
    print("ready", flush=True)
    time.sleep(600)
    """
)


def test_a_kept_task_survives_a_sigkill_of_the_supervisor(tmp_path: Path, waaah: WaaahServer) -> None:
    folder = tmp_path / "session"
    folder.mkdir()
    path = socket_path()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, waaah.url, KEY, AGENT, str(folder), str(path)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        assert supervisor.stdout is not None and supervisor.stdout.readline() == b"ready\n"
        proxy = RawProxy(
            {**proxy_env(waaah.url, inbox=folder / "inbox.jsonl"), "WAAAH_LINK": str(path)}, tmp_path / "e"
        )
        proxy.call(1, "wait_for_prompt", {"timeout": 40})
        waaah.wait_for_call("wait_for_prompt", 10)
        proxy.kill()
        task_id = waaah.enqueue("Kept across the supervisor's death", AGENT)
        retry_until(lambda: (held := kept(folder)) and held[0]["acked"])
        os.kill(supervisor.pid, signal.SIGKILL)
        supervisor.wait()
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
        supervisor.wait()
    resumed = Session(folder, waaah)
    try:
        proxy = resumed.proxy()
        proxy.call(1, "wait_for_prompt", {"timeout": 40})
        assert proxy.result(1)["taskId"] == task_id
        assert len(waaah.tool_calls("wait_for_prompt")) == 1 and len(waaah.acks(task_id)) == 1
    finally:
        resumed.close()


def test_without_a_link_to_answer_the_proxy_calls_the_server_itself(
    tmp_path: Path, waaah: WaaahServer
) -> None:
    inbox = tmp_path / "inbox.jsonl"
    gone = tmp_path / "no-such-link"
    proxy = RawProxy({**proxy_env(waaah.url, inbox=inbox), "WAAAH_LINK": str(gone)}, tmp_path / "stderr")
    try:
        proxy.call(1, "wait_for_prompt", {"timeout": 1})
        assert proxy.result(1)["status"] == "IDLE"
    finally:
        proxy.close()
    assert [e["event"] for e in inbox_lines(inbox)] == ["tool_start", "tool_end"]  # the proxy's own
    assert f"the session link {gone} did not answer" in (tmp_path / "stderr").read_text()


def test_the_socket_is_private_and_its_folder_goes_with_the_link(session: Session) -> None:
    path = session.link.path
    assert len(os.fsencode(path)) < 108
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_ISSOCK(path.stat().st_mode)
    session.link.stop()
    assert not path.parent.exists()


@pytest.mark.parametrize("kind", ["not json", "wrong shape", "deeply nested", "fifo", "symlink"])
def test_a_damaged_link_file_is_set_aside_with_one_line(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "session"
    folder.mkdir()
    file = folder / "link.json"
    good = json.dumps({"held": []})
    if kind == "not json":
        file.write_text("{half")
    elif kind == "wrong shape":
        file.write_text(json.dumps({"held": [{"key": 1}]}))
    elif kind == "deeply nested":
        file.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "fifo":
        os.mkfifo(file)
    else:
        (tmp_path / "elsewhere.json").write_text(good)
        file.symlink_to(tmp_path / "elsewhere.json")
    mailbox = Mailbox()
    try:
        started = time.monotonic()
        link = SessionLink(
            socket_path(), folder, ToolServer("http://127.0.0.1:9", None), AGENT, folder / "i", mailbox.post
        )
        assert time.monotonic() - started < 5  # a FIFO never blocks it
        assert link.core.held == []
        said = [m.data["text"] for m in mailbox.drain()]
        assert len(said) == 1 and said[0].startswith(f"could not read {file}") and "moved aside" in said[0], (
            said
        )
        assert not file.exists() and list(folder.glob("link.json.corrupt-*"))
        link.stop()
    finally:
        mailbox.close()
