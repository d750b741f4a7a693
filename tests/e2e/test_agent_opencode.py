"""`waaah agent --start=opencode` over the real pinned opencode, offline, as a user starts it.

The fake OpenAI API (tests/doubles/openai_tools.py) scripts the model's side of the loop
(register, wait, end the turn); the WAAAH server double records what reaches it through our MCP
proxy, which waaah gives opencode per run in OPENCODE_CONFIG_CONTENT. opencode draws nothing
until the terminal answers its queries: headless, the supervisor answers them; on a terminal the
terminal does (here the test's side of the PTY, through waaah's relay, as a real one would).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.doubles.cli_homes import cli_bin
from tests.doubles.fake_openai import FAKE_KEY, Text
from tests.doubles.openai_tools import ToolCall, ToolFakeOpenAI, ToolRule
from tests.doubles.opencode_home import opencode_env
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import with_cli_path, workspace_for
from tests.runtime.helpers import WAAAH, events, pump_until, retry_until, state, state_or_none
from waaah_agent.core.supervise.termanswers import TerminalAnswers

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

MARKER = "stay in the loop"  # a phrase of the bundled waaah-orc workflow
CONTINUE_MARKER = "Continue the WAAAH workflow loop"  # the supervisor's continue prompt
REGISTER_ARGS = {
    "displayName": "waaah-orc",
    "capabilities": ["general-purpose"],
    "workspaceContext": {"type": "local", "repoId": "ws"},
}


@pytest.fixture(autouse=True)
def _installed() -> None:
    cli_bin("opencode")  # a missing install is a failure naming the command, never a skip


def loop_rules() -> list[ToolRule]:
    """Workflow -> register_agent -> wait_for_prompt -> end the turn with a marker text."""
    return [
        ToolRule(ToolCall("register_agent", REGISTER_ARGS), marker=MARKER),
        ToolRule(ToolCall("wait_for_prompt", {"timeout": 2}), after="register_agent"),
        ToolRule(Text("LOOP-TURN-DONE"), after="wait_for_prompt"),
        ToolRule(Text("CONTINUED-ANSWER"), marker=CONTINUE_MARKER),
    ]


def user_requests(fake: ToolFakeOpenAI, text: str) -> list[dict[str, Any]]:
    """Main requests whose newest user text holds ``text`` (a tool result's follow-up excluded)."""
    return [r for r in fake.main_requests() if text in r["last_user_text"] and r["tool_result"] is None]


def env_for(tmp_path: Path, ws: Path, fake: ToolFakeOpenAI) -> dict[str, str]:
    return with_cli_path(opencode_env(tmp_path, ws, f"{fake.url}/v1"))


class Terminal:
    """The test's side of the PTY as a terminal: every query waaah relays from opencode gets the
    answer a terminal gives, typed back into waaah (which forwards it, like any key)."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child
        self.answers = TerminalAnswers(120, 40)
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data
        if reply := self.answers.feed(data):
            self.child.send(reply)

    def flush(self) -> None:
        pass


def spawn(ws: Path, env: dict[str, str], *args: str) -> pexpect.spawn:
    child = pexpect.spawn(WAAAH, ["agent", *args], cwd=str(ws), env=env, dimensions=(40, 120), timeout=120)
    child.delaybeforesend = None
    child.logfile_read = Terminal(child)
    return child


def save_and_exit(child: pexpect.spawn) -> int:
    child.send("\x03")
    child.expect("save and exit")
    child.send("s")
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    return int(child.exitstatus)


def cast_output(ws: Path) -> str:
    """All the output of the newest session's .cast (what opencode wrote to its terminal)."""
    cast = Path(state(ws)["cast_path"])
    lines = cast.read_text(encoding="utf-8").splitlines()[1:]
    return "".join(event[2] for event in map(json.loads, lines) if event[1] == "o")


def asked_again(ws: Path) -> bool:
    """opencode's second round of terminal queries (device attributes, the colour palette): it
    sends them only once its first round (cursor position, colours) was answered."""
    out = cast_output(ws)
    return "\x1b[c" in out and "\x1b]4;15;?" in out


def resumed_with(argv: list[str]) -> str | None:
    return argv[argv.index("--session") + 1] if "--session" in argv else None


def test_headless_opencode_gets_its_workflow_registers_waits_and_is_nudged_back(tmp_path):
    """No terminal at all (nohup, CI): the supervisor answers opencode's queries itself."""
    ws = workspace_for(tmp_path)
    with ToolFakeOpenAI(loop_rules(), api_key=FAKE_KEY) as fake, WaaahServer() as server:
        env = env_for(tmp_path, ws, fake)
        proc = subprocess.Popen(
            [WAAAH, "agent", "--start=opencode", f"--server={server.url}"],
            cwd=ws,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            retry_until(lambda: server.tool_calls("wait_for_prompt"), 120)
            assert asked_again(ws), "the supervisor answered opencode's terminal queries"
            st = state(ws)
            register = server.wait_for_call("register_agent")
            assert register.body["agentId"] == st["agent_id"]
            assert server.wait_for_call("wait_for_prompt").body["agentId"] == st["agent_id"]
            # The turn ended outside wait_for_prompt: one continue prompt, answered.
            retry_until(lambda: user_requests(fake, CONTINUE_MARKER), 60)
            workflow = user_requests(fake, MARKER)
            assert len(workflow) == 1 and "register_agent" in workflow[0]["last_user_text"]
            # The CLI's own session id, learned from its store, is what a restart resumes.
            retry_until(lambda: state(ws)["native_session_id"].startswith("ses_"), 30)
            learned = [e for e in events(ws) if e["event"] == "native-session-id"]
            assert learned and learned[0]["id"] == state(ws)["native_session_id"]
            # The user's opencode.json is left as it was: the entry came per run.
            user_file = Path(env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
            assert "waaah" not in json.loads(user_file.read_text()).get("mcp", {})
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        said = out.decode(errors="replace")
        assert proc.returncode == 0, said
        assert "delivery: workflow prompt confirmed" in said
        assert "nudge: continue prompt" in said
        assert state(ws)["status"] == "stopped"


def test_killed_opencode_is_restarted_with_its_native_session(tmp_path):
    """On a terminal (the test's, answering the queries waaah relays): kill the CLI by pid; the
    restart resumes the same opencode session with --session, and the conversation goes on."""
    ws = workspace_for(tmp_path)
    with ToolFakeOpenAI(loop_rules(), api_key=FAKE_KEY) as fake, WaaahServer() as server:
        env = env_for(tmp_path, ws, fake)
        child = spawn(ws, env, "--start=opencode", f"--server={server.url}")
        child.expect("LOOP-TURN-DONE")
        assert asked_again(ws), "the terminal's answers reached opencode through waaah's relay"
        pump_until(child, lambda: user_requests(fake, CONTINUE_MARKER), 60)
        pump_until(child, lambda: state(ws)["native_session_id"].startswith("ses_"), 30)
        first = state(ws)
        before = len(user_requests(fake, CONTINUE_MARKER))
        os.kill(first["agent_pid"], signal.SIGKILL)
        pump_until(child, lambda: (st := state(ws))["restarts"] == 1 and st["status"] == "running", 60)
        again = state(ws)
        assert resumed_with(again["argv"]) == first["native_session_id"]
        assert again["agent_pid"] != first["agent_pid"]
        assert "SIGKILL" in [e for e in events(ws) if e["event"] == "restart"][0]["after"]
        # Resumed natively: no workflow again; the continue prompt carries the earlier turns.
        pump_until(child, lambda: len(user_requests(fake, CONTINUE_MARKER)) > before, 120)
        history = json.dumps(user_requests(fake, CONTINUE_MARKER)[-1]["body"])
        assert "LOOP-TURN-DONE" in history, "the request after the restart carries the earlier conversation"
        assert len(user_requests(fake, MARKER)) == 1
        assert state(ws)["native_session_id"] == first["native_session_id"]
        assert save_and_exit(child) == 0
        assert state_or_none(ws)["status"] == "stopped"


def test_save_and_exit_then_resume_carries_on_the_same_opencode_session(tmp_path):
    """Ctrl+C, save and exit; `--resume` starts opencode with --session <its id>: the workflow is
    not typed again, the continue prompt goes on in the same conversation."""
    ws = workspace_for(tmp_path)
    with ToolFakeOpenAI(loop_rules(), api_key=FAKE_KEY) as fake, WaaahServer() as server:
        env = env_for(tmp_path, ws, fake)
        child = spawn(ws, env, "--start=opencode", f"--server={server.url}")
        child.expect("LOOP-TURN-DONE")
        pump_until(child, lambda: state(ws)["native_session_id"].startswith("ses_"), 30)
        native = state(ws)["native_session_id"]
        # Drawn first, written to opencode's database a moment later: in the conversation first.
        store = Path(env["HOME"]) / ".local" / "share" / "opencode"
        pump_until(
            child,
            lambda: any(b"LOOP-TURN-DONE" in f.read_bytes() for f in store.rglob("*") if f.is_file()),
            30,
        )
        assert save_and_exit(child) == 0

        child = spawn(ws, env, "--start=opencode", f"--server={server.url}", "--resume")
        pump_until(
            child, lambda: state(ws)["status"] == "running" and resumed_with(state(ws)["argv"]) == native
        )
        before = len(user_requests(fake, CONTINUE_MARKER))
        pump_until(child, lambda: len(user_requests(fake, CONTINUE_MARKER)) > before, 120)
        history = json.dumps(user_requests(fake, CONTINUE_MARKER)[-1]["body"])
        assert "LOOP-TURN-DONE" in history, "the resumed request carries the earlier conversation"
        assert len(user_requests(fake, MARKER)) == 1
        assert state(ws)["native_session_id"] == native
        assert save_and_exit(child) == 0
