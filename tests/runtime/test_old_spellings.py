"""Old spellings of renamed commands and options work for one release, through the real command:
each does what its new name does and says so in one line on stderr, never on stdout (where
`waaah run` prints its JSON). The CLI's option is `--start` and `--agent` alike on every command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.helpers import WAAAH, events, retry_until, session_dirs, sim_env
from tests.runtime.test_run_trees import a_tree


def notice(old: str, new: str) -> str:
    return f"waaah: '{old}' is deprecated and will be removed in the next release; use '{new}'\n"


def waaah(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = sim_env(
        ws.parent / "home", XDG_STATE_HOME=str(ws.parent / "state"), WAAAH_CLI_DIR=str(ws.parent / "no")
    )
    return subprocess.run([WAAAH, *args], cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def envelope(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    found = json.loads(done.stdout)  # the whole of stdout is the one JSON envelope
    for moving in ("duration_ms", "log_id", "log_path", "started", "ended"):
        found.pop(moving, None)
    return dict(found)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    a_tree(folder / ".waaah" / "runs")
    return folder


@pytest.mark.parametrize(
    ("old", "new"), [("--resume", "--continue-from"), ("--resume-tree", "--continue-from-tree")]
)
def test_run_resume_is_continue_from(ws: Path, old: str, new: str) -> None:
    now = waaah(ws, "run", "go on", new, "root", "--agent", "gemini", "--dry-run")
    before = waaah(ws, "run", "go on", old, "root", "--agent", "gemini", "--dry-run")
    assert now.returncode == before.returncode == 0, (now.stderr, before.stderr)
    assert envelope(before) == envelope(now)
    alone = waaah(ws, "run", "go on", "--agent", "gemini", "--dry-run")  # the replay is in the prompt
    assert envelope(before)["prompt"]["chars"] > envelope(alone)["prompt"]["chars"] + 50
    assert before.stderr == notice(old, new) + now.stderr
    # Both spellings at once with two ids: a usage error (the envelope), not one silently dropped.
    both = waaah(ws, "run", "go on", new, "root", old, "kid", "--agent", "gemini")
    assert both.returncode == 2 and json.loads(both.stdout)["error_kind"] == "invalid_input"
    assert f"give {new} once ({old} is its old name)" in both.stderr


@pytest.mark.parametrize(
    "args", [(), ("kid", "--paths"), ("--format", "json"), ("kid", "--paths", "--format", "json")]
)
def test_run_list_is_waaah_sessions(ws: Path, args: tuple[str, ...]) -> None:
    listed = waaah(ws, "run", "--list", *args)
    same = waaah(ws, "sessions", *[("--json" if a == "json" else a) for a in args if a != "--format"])
    assert listed.returncode == same.returncode == 0, (listed.stderr, same.stderr)
    assert listed.stdout == same.stdout
    assert '"id": "kid"' in same.stdout if "json" in args else "kid  run  claude" in same.stdout
    assert listed.stderr == notice("--list", "waaah sessions") and same.stderr == ""


@pytest.mark.parametrize(
    ("command", "option"), [("run", "--start"), ("doctor", "--start"), ("agent", "--agent")]
)
def test_start_and_agent_are_one_option(ws: Path, command: str, option: str) -> None:
    helped = waaah(ws, command, "--help")
    assert helped.returncode == 0 and (
        "--start, --agent" in helped.stdout or "--agent, --start" in helped.stdout
    )
    done = waaah(ws, command, f"{option}=nosuchcli", *(["hi", "--dry-run"] if command == "run" else []))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "'nosuchcli' is not one of" in done.stderr and "No such option" not in done.stderr


def test_waaah_resume_is_unpause(workspace: Path, fake_home: Path) -> None:
    env = sim_env(fake_home)
    agent = subprocess.Popen([WAAAH, "agent", "--start=simulated", "--no-mcp"], cwd=workspace, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    def ask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [WAAAH, *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=60
        )

    def controls() -> list[str]:
        return [str(e.get("command")) for e in events(workspace) if e["event"] == "control"]

    try:
        retry_until(
            lambda: session_dirs(workspace) and any(e["event"] == "start" for e in events(workspace)), 30
        )
        for old, new in (("resume", "unpause"), ("unpause", None)):
            assert ask("pause").returncode == 0
            done = ask(old)
            assert done.returncode == 0, done.stderr
            assert done.stdout.endswith(": nudges again\n"), done.stdout
            assert done.stderr == (notice("waaah resume", "waaah unpause") if new else "")
        assert retry_until(lambda: controls() == ["pause", "resume", "pause", "resume"], 20), controls()
        assert "unpause" in ask("--help").stdout and " resume " not in ask("--help").stdout
    finally:
        agent.terminate()
        agent.wait(timeout=30)
