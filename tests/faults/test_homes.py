"""gemini's home of its own per run, through real gemini runs against the fake model: a
conversation is never deleted, and no file left behind holds the WAAAH API key.

Each run of gemini writes its conversation in ``<home>/.gemini/tmp/<project>/chats/`` of the
run's home (runtime/cli_home.py). Two sessions that start before either ends (each in its own
workspace, a fresh ``~/.gemini``) both make that ``tmp/`` folder; at the end each must be carried
back into the user's ``~/.gemini``, checked by content, before its home goes. A supervisor that
is SIGKILLed leaves its home: the next start of any session settles it (carried back, removed),
`waaah doctor` names it with the command that settles it, and nothing in it holds the key (gemini
gets the key in its environment; the settings file names ``${WAAAH_API_KEY}``). What cannot be
carried (the user's file of that name differs) keeps the home, named in the log, `waaah status`
and `waaah doctor`, and `waaah mcp settle` puts it beside the user's file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.doubles.cli_homes import end_process_group, gemini_env
from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import with_cli_path
from tests.faults.conftest import WAAAH, assert_no_traceback, run_waaah
from tests.runtime.helpers import retry_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

KEY = "waaah-key-for-the-home-test-7f3a9c"
REGISTER = {
    "displayName": "waaah-orc",
    "capabilities": ["general-purpose"],
    "workspaceContext": {"type": "local", "repoId": "ws"},
}


def script() -> list[Rule]:
    """The workflow prompt registers through the MCP server (so the key must reach the proxy)."""
    return [
        Rule(ToolCall("register_agent", REGISTER), marker="stay in the loop"),
        Rule(Text("ANSWER-OK"), tool_result="register_agent"),
    ]


def homes_root(home: Path) -> Path:
    return home / ".local" / "state" / "waaah-agent" / "homes"


def workspace(root: Path, name: str) -> Path:
    ws = root / name
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


def session_state(ws: Path) -> dict[str, object]:
    (path,) = (ws / ".waaah" / "sessions").glob("*/session.json")
    return dict(json.loads(path.read_text()))


class Supervisor:
    """`waaah agent --start=gemini` headless in ``ws``, its output in a file."""

    def __init__(self, ws: Path, env: dict[str, str], server: str, *extra: str) -> None:
        self.ws, self.out = ws, ws.parent / f"{ws.name}.out"
        with self.out.open("w") as sink:
            self.proc = subprocess.Popen(
                [WAAAH, "agent", "--start=gemini", f"--server={server}", *extra],
                cwd=ws,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.out.read_text()

    def home(self, home: Path) -> Path:
        return homes_root(home) / str(session_state(self.ws)["id"])

    def chats(self, home: Path) -> list[Path]:
        return sorted(self.home(home).glob(".gemini/tmp/*/chats/session-*.jsonl"))

    def wait_for_conversation(self, home: Path, model: FakeModel) -> Path:
        """Until gemini has answered in this session and saved the conversation in its home."""
        retry_until(lambda: "delivery: workflow prompt confirmed" in self.text(), timeout=120, interval=0.2)
        retry_until(lambda: any(b"ANSWER-OK" in p.read_bytes() for p in self.chats(home)), 90, 0.2)
        (chat,) = self.chats(home)
        return chat

    def stop(self, sig: int = signal.SIGTERM) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)

    def wait(self) -> str:
        try:
            self.proc.wait(timeout=60)
        finally:
            end_process_group(self.proc.pid)
        text = self.text()
        assert_no_traceback(text)
        return text


def env_for(root: Path, model: FakeModel) -> tuple[Path, dict[str, str]]:
    home = root / "home"
    env = with_cli_path(gemini_env(home, model.url))
    env.pop("WAAAH_API_KEY", None)
    return home, env


def user_chats(home: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes() for p in sorted((home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))
    }


def files_holding(root: Path, secret: str) -> list[Path]:
    return [
        p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and secret.encode() in p.read_bytes()
    ]


def test_two_sessions_stopped_together_keep_both_conversations(tmp_path):
    with FakeModel(script(), default=Text("ANSWER-OK")) as model, WaaahServer(KEY) as server:
        home, env = env_for(tmp_path, model)
        first = Supervisor(workspace(tmp_path, "alpha"), env, server.url, "--api-key", KEY)
        first_chat = first.wait_for_conversation(home, model)
        second = Supervisor(workspace(tmp_path, "beta"), env, server.url, "--api-key", KEY)
        try:
            second_chat = second.wait_for_conversation(home, model)
            # The second start left the first's home alone: its supervisor is alive.
            assert first_chat.exists() and first.home(home).is_dir()
            assert [c for c in server.calls if c.tool == "register_agent" and c.status == 200]
        finally:
            first.stop()
            second.stop()
            said = first.wait() + second.wait()
    chats = user_chats(home)
    assert set(chats) == {first_chat.name, second_chat.name}, (chats.keys(), said)
    assert all(b"ANSWER-OK" in content for content in chats.values())
    assert "is left in" not in said and "kept " not in said
    assert not list(homes_root(home).iterdir())


def test_a_home_left_by_a_killed_supervisor_holds_no_key_and_the_next_start_settles_it(tmp_path):
    with FakeModel(script(), default=Text("ANSWER-OK")) as model, WaaahServer(KEY) as server:
        home, env = env_for(tmp_path, model)
        killed = Supervisor(workspace(tmp_path, "alpha"), env, server.url, "--api-key", KEY)
        chat = killed.wait_for_conversation(home, model)
        retry_until(lambda: [c for c in server.calls if c.tool == "register_agent" and c.status == 200], 60)
        agent_pid = int(str(session_state(killed.ws)["agent_pid"]))
        left = killed.home(home)
        killed.stop(signal.SIGKILL)
        killed.wait()
        with contextlib.suppress(AssertionError):  # gemini ends when its terminal goes
            retry_until(lambda: not Path(f"/proc/{agent_pid}").exists(), timeout=15)
        with contextlib.suppress(ProcessLookupError):
            os.kill(agent_pid, signal.SIGKILL)
        content = chat.read_bytes()
        assert left.is_dir() and not files_holding(left, KEY), "the home left behind holds the key"

        doctor = run_waaah("doctor", "--agent", "gemini", cwd=killed.ws, env=env, timeout=120)
        assert str(left) in doctor.stdout and "waaah mcp settle" in doctor.stdout, doctor.stdout
        status = run_waaah("status", cwd=killed.ws, env=env)
        assert f"kept home    {left}" in status.stdout, status.stdout

        other = Supervisor(workspace(tmp_path, "beta"), env, server.url, "--api-key", KEY)
        try:
            retry_until(
                lambda: "gave this run the waaah MCP server" in other.text(), timeout=120, interval=0.2
            )
        finally:
            other.stop()
            said = other.wait()
    assert f"settled {left}" in said, said
    assert not left.exists()
    assert user_chats(home)[chat.name].startswith(content)


def test_what_cannot_be_carried_keeps_the_home_named_until_mcp_settle_puts_it_beside(tmp_path):
    with FakeModel(script(), default=Text("ANSWER-OK")) as model, WaaahServer(KEY) as server:
        home, env = env_for(tmp_path, model)
        run = Supervisor(workspace(tmp_path, "alpha"), env, server.url, "--api-key", KEY)
        try:
            chat = run.wait_for_conversation(home, model)
            # Meanwhile a file of that name appears in the user's folder, with other content.
            theirs = home / ".gemini" / chat.relative_to(run.home(home) / ".gemini")
            theirs.parent.mkdir(parents=True)
            theirs.write_text("someone else's line\n")
            folder = run.home(home)
        finally:
            run.stop()
            said = run.wait()
    ours = chat.read_bytes()
    assert folder.is_dir() and f"kept {folder}" in said and "waaah mcp settle" in said, said
    events = (next((run.ws / ".waaah" / "sessions").glob("*")) / "events.jsonl").read_text()
    assert f"kept {folder}" in events
    assert theirs.read_text() == "someone else's line\n"
    status = run_waaah("status", cwd=run.ws, env=env)
    assert f"kept home    {folder}" in status.stdout, status.stdout
    doctor = run_waaah("doctor", "--agent", "gemini", cwd=run.ws, env=env, timeout=120)
    assert str(folder) in doctor.stdout and "waaah mcp settle" in doctor.stdout, doctor.stdout

    settled = run_waaah("mcp", "settle", cwd=run.ws, env=env)
    assert settled.returncode == 0, settled.stdout + settled.stderr
    beside = theirs.with_name(f"{theirs.name}.waaah-{folder.name}")
    assert beside.read_bytes() == ours and theirs.read_text() == "someone else's line\n"
    assert not folder.exists()
    assert "per-run homes: none" in run_waaah("doctor", "--agent", "gemini", cwd=run.ws, env=env).stdout


def test_a_copy_that_does_not_fit_keeps_the_home_and_the_conversation(tmp_path):
    """A full disk under ``~/.gemini``: the copy of the conversation is cut short, so the run's
    home is kept (the conversation whole in it), and no partial file is left in the user's."""
    from tests.faults.conftest import small_disk
    from waaah_agent import adapters
    from waaah_agent.runtime.mcp.cli_home import PerRunHome
    from waaah_agent.runtime.mcp.givers import giver
    from waaah_agent.runtime.mcp.setup import ServerChoice

    gemini = giver(adapters.registry()["gemini"].mcp)
    assert isinstance(gemini, PerRunHome)
    home = tmp_path / "home"
    session = tmp_path / "ws" / ".waaah" / "sessions" / "gemini-20261126-010203-abcdef"
    session.mkdir(parents=True)
    env = {"HOME": str(home)}
    with small_disk(home / ".gemini", "256k"):
        (home / ".gemini" / "settings.json").write_text("{}")
        run = Path(gemini.give(env, ServerChoice("http://127.0.0.1:9", KEY, "--server"), session, {}).env[
            "GEMINI_CLI_HOME"
        ]) / ".gemini"  # fmt: skip
        chat = run / "tmp" / "ws" / "chats" / "session-1.jsonl"
        chat.parent.mkdir(parents=True)
        content = os.urandom(1024 * 1024)
        chat.write_bytes(content)
        notes = gemini.finish(env, session)
        assert chat.read_bytes() == content and any(f"kept {run.parent}" in n for n in notes), notes
        assert not [p for p in (home / ".gemini").rglob("*") if p.is_file() and p.name != "settings.json"]
