"""`waaah route` as a user runs it: where its table comes from, and bad tables as one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.runtime.helpers import WAAAH


def route(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAAAH, "route", *args], cwd=ws, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No CLI installed anywhere, a private state and config folder."""
    return {
        "HOME": str(tmp_path / "home"),
        "PATH": "/usr/bin:/bin",
        "WAAAH_CLI_DIR": "/nonexistent",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }


def test_nothing_installed_means_no_recommendation(workspace: Path, env: dict[str, str]) -> None:
    done = route(workspace, env, "--role", "reviewer", "--json")
    found = json.loads(done.stdout)
    assert done.returncode == 15 and found["agent"] is None and found["table"] == "bundled"
    assert found["unavailable"] == {
        # Credentials are not judged for a CLI that is not installed.
        "gemini": "not installed",
        "claude": "not installed",
        "codex": "not installed",
        "opencode": "not installed",
    }
    text = route(workspace, env, "--role", "reviewer").stdout
    assert text.startswith("reviewer: no CLI available\n") and "skipped gemini: not installed" in text


def test_the_table_files_in_their_order(workspace: Path, env: dict[str, str], tmp_path: Path) -> None:
    user = tmp_path / "config" / "waaah-agent" / "routes.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"roles": {"tester": {"chain": ["opencode"]}}}))
    assert json.loads(route(workspace, env, "--role", "tester", "--json").stdout)["table"] == str(user)
    ours = workspace / ".agent" / "routes.json"
    ours.parent.mkdir(exist_ok=True)
    ours.write_text(json.dumps({"roles": {"tester": {"chain": ["codex", "gemini"]}}}))
    found = json.loads(route(workspace, env, "--role", "tester", "--json").stdout)
    assert found["table"] == str(ours) and found["chain"] == ["codex", "gemini"]
    named = tmp_path / "named.json"
    named.write_text(json.dumps({"roles": {"tester": {"chain": ["claude"]}}}))
    found = json.loads(
        route(workspace, {**env, "WAAAH_ROUTES": str(named)}, "--role", "tester", "--json").stdout
    )
    assert found["table"] == str(named) and found["chain"] == ["claude"]
    # the bundled roles a file does not name stay
    assert json.loads(route(workspace, env, "--role", "architect", "--json").stdout)["chain"][0] == "claude"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"roles": {"dev": {"chain": ["cursor"]}}}', "role 'dev': unknown CLI 'cursor'"),
        (b"{not json", "cannot be read: Expecting property name"),
        (b"\xff\xfe", "cannot be read: 'utf-8' codec"),
        (b"[1, 2]", "expected"),
        (None, "is a FIFO"),
        (b"x" * (300 * 1024), "cannot be read"),
    ],
)
def test_a_bad_table_is_one_line_naming_the_file(
    workspace: Path, env: dict[str, str], content: bytes | None, says: str
) -> None:
    table = workspace / ".agent" / "routes.json"
    table.parent.mkdir(exist_ok=True)
    if content is None:
        os.mkfifo(table)
    else:
        table.write_bytes(content)
    done = route(workspace, env, "--role", "dev")
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"waaah: routing table {table}") and says in lines[0], (
        lines
    )


def test_an_unknown_role_or_a_missing_named_table(workspace: Path, env: dict[str, str]) -> None:
    done = route(workspace, env, "--role", "boss")
    assert done.returncode == 2 and "unknown role 'boss'; choose one of: developer, reviewer" in done.stderr
    done = route(workspace, {**env, "WAAAH_ROUTES": "/nonexistent/routes.json"}, "--role", "developer")
    assert done.returncode == 2 and "WAAAH_ROUTES names /nonexistent/routes.json" in done.stderr


def test_waaah_run_role_wins_over_the_variables_not_the_flags(workspace: Path, env: dict[str, str]) -> None:
    """Nothing is installed, so the run tries the role's whole chain and each attempt says so."""
    env = {**env, "WAAAH_DEFAULT_AGENT": "claude", "WAAAH_FALLBACK": "codex"}

    def agents(*args: str) -> list[str]:
        done = subprocess.run(
            [WAAAH, "run", "hi", *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 15, done.stderr  # crash: not installed
        return [a["agent"] for a in json.loads(done.stdout)["attempts"]]

    assert agents("--role", "reviewer") == ["gemini", "claude", "codex", "opencode"]
    assert agents() == ["claude", "codex"]  # without --role the variables stand
    assert agents("--role", "reviewer", "--agent", "opencode") == ["opencode", "codex"]
    assert agents("--role", "reviewer", "--fallback", "gemini") == ["gemini"]
