"""Config injection on a temporary HOME, server checks, and `waaah doctor`, for real."""

from __future__ import annotations

import dataclasses
import json
import stat
import subprocess
from datetime import datetime

import pytest

from tests.doubles.waaah_server import WaaahServer
from tests.runtime.helpers import WAAAH
from waaah_agent import adapters
from waaah_agent.errors import UsageError
from waaah_agent.runtime import mcp_setup
from waaah_agent.runtime.mcp_setup import PerRunConfig, ServerChoice, UserSettings
from waaah_agent.runtime.waaah import check_server

GEMINI_MCP = adapters.registry()["gemini"].mcp
CLAUDE_MCP = adapters.registry()["claude"].mcp
assert isinstance(GEMINI_MCP, UserSettings) and isinstance(CLAUDE_MCP, PerRunConfig)


def install_gemini(env, server, now):
    """Give gemini the server the way `waaah agent` does, with a fixed clock for the backup name."""
    return dataclasses.replace(GEMINI_MCP, now=lambda: now).give(env, server, None, {}).notes


def test_gemini_settings_edit_keeps_keys_backs_up_and_is_idempotent(tmp_path):
    home = tmp_path / "home"
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    before = {"ui": {"theme": "Dracula"}, "mcpServers": {"github": {"command": "gh-mcp"}}}
    settings.write_text(json.dumps(before))
    env = {"HOME": str(home)}
    server = ServerChoice("http://127.0.0.1:9", "secret-key-123", "--server")

    notes = install_gemini(env, server, datetime(2026, 1, 2, 3, 4, 5))
    after = json.loads(settings.read_text())
    assert after["ui"] == before["ui"] and after["mcpServers"]["github"] == before["mcpServers"]["github"]
    entry = after["mcpServers"]["waaah"]
    assert entry["args"][-1] == "mcp-proxy" and entry["env"]["WAAAH_SERVER_URL"] == "http://127.0.0.1:9"
    backup = settings.with_name("settings.json.waaah-backup-20260102-030405")
    assert json.loads(backup.read_text()) == before
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert any("plain text" in n for n in notes)

    assert install_gemini(env, server, datetime(2026, 1, 2, 3, 4, 6)) == []  # unchanged: no edit
    assert len(list(settings.parent.glob("settings.json.waaah-backup-*"))) == 1


def test_fresh_home_gets_a_settings_file_without_a_key(tmp_path):
    env = {"HOME": str(tmp_path)}
    install_gemini(env, ServerChoice("http://h", None, "x"), datetime.now())
    settings = tmp_path / ".gemini" / "settings.json"
    assert "WAAAH_API_KEY" not in settings.read_text()
    assert not list(settings.parent.glob("*.waaah-backup-*"))


def test_corrupt_settings_is_a_clear_error_and_untouched(tmp_path):
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{ not json")
    with pytest.raises(UsageError, match="cannot parse .*settings.json"):
        install_gemini({"HOME": str(tmp_path)}, ServerChoice("http://h", None, "x"), datetime.now())
    assert settings.read_text() == "{ not json"


def test_claude_gets_a_per_run_config_file(tmp_path):
    given = CLAUDE_MCP.give({}, ServerChoice("http://h", "k", "x"), tmp_path, {"WAAAH_AGENT_ID": "a1"})
    args = given.args
    path = tmp_path / "mcp.json"
    assert args == ["--mcp-config", str(path), "--allowedTools", "mcp__waaah"]
    doc = json.loads(path.read_text())
    assert doc["mcpServers"]["waaah"]["env"] == {
        "WAAAH_SERVER_URL": "http://h",
        "WAAAH_API_KEY": "k",
        "WAAAH_AGENT_ID": "a1",
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and given.notes == []


def test_claude_gets_per_run_hooks_and_gemini_none(tmp_path):
    hooks = adapters.registry()["claude"].hooks
    assert hooks is not None and adapters.registry()["gemini"].hooks is None
    path = tmp_path / "claude-settings.json"
    assert hooks.args(tmp_path) == ["--settings", str(path)]
    doc = json.loads(path.read_text())
    assert set(doc["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop", "Notification"}
    assert doc["hooks"]["Stop"][0]["hooks"][0]["command"].endswith("-m waaah_agent.hook claude")


def test_existing_entries_and_doctor_findings(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert GEMINI_MCP.existing(env) is None and GEMINI_MCP.doctor(env).status == "warn"
    install_gemini(env, ServerChoice("http://h:1", None, "x"), datetime.now())
    found = GEMINI_MCP.existing(env)
    assert found is not None and (found.kind, found.url) == ("ours", "http://h:1")
    assert GEMINI_MCP.doctor(env).status == "ok"
    (tmp_path / ".claude.json").write_text("{ not json")  # claude's own file: not ours to judge
    assert CLAUDE_MCP.existing(env) is None
    (tmp_path / ".claude.json").write_text(
        json.dumps(
            {"mcpServers": {"waaah": {"command": "waaah-proxy", "env": {"WAAAH_SERVER_URL": "http://u"}}}}
        )
    )
    found = CLAUDE_MCP.existing(env)
    assert found is not None and (found.kind, found.url) == ("upstream", "http://u")
    assert CLAUDE_MCP.doctor(env).status == "ok"


def test_server_choice_precedence_and_headless_error():
    existing = mcp_setup.mcpconf.ExistingEntry("upstream", "http://old", False)
    assert (
        mcp_setup.choose_server(
            "http://flag", None, {"WAAAH_SERVER_URL": "http://env"}, existing, False, input
        ).url
        == "http://flag"
    )
    assert (
        mcp_setup.choose_server(None, None, {"WAAAH_SERVER_URL": "http://env"}, existing, False, input).url
        == "http://env"
    )
    assert mcp_setup.choose_server(None, None, {}, existing, False, input).url == "http://old"
    with pytest.raises(UsageError, match="--no-mcp"):
        mcp_setup.choose_server(None, None, {}, None, False, input)
    answers = iter(["", "k3y"])
    asked = mcp_setup.choose_server(None, None, {}, None, True, lambda _q: next(answers))
    assert (asked.url, asked.api_key) == ("http://localhost:3456", "k3y")


def test_server_checks_against_the_double():
    with WaaahServer(api_key="right") as server:
        assert check_server(server.url, "right").ok
        assert check_server(server.url, "wrong").detail == "bad key"
    assert check_server(server.url, "right").detail.startswith("unreachable")


def doctor(workspace, env, *args):
    """Run `waaah doctor --json` as a user would; return the process and the checks by name."""
    result = subprocess.run(
        [WAAAH, "doctor", "--json", *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=60
    )
    return result, {c["name"]: c for c in json.loads(result.stdout)}


def test_doctor_reports_each_check_and_fails_on_a_failure(tmp_path, workspace):
    home = tmp_path / "home"
    home.mkdir()
    with WaaahServer() as server:
        env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "GEMINI_API_KEY": "k"}
        result, checks = doctor(workspace, env, "--agent", "gemini", "--server", server.url)
    assert (
        checks["gemini CLI"]["status"] == "fail"
        and "npm install -g @google/gemini-cli" in checks["gemini CLI"]["fix"]
    )
    assert checks["gemini login"]["status"] == "ok"
    assert checks["gemini MCP entry"]["status"] == "warn"
    assert checks["WAAAH server"]["status"] == "ok"
    assert checks["git workspace"]["status"] == "ok"
    assert checks["workflow"]["status"] == "ok"
    assert checks[".waaah writable"]["status"] == "ok"
    assert result.returncode == 1


def test_doctor_knows_the_pinned_cli_versions(tmp_path, workspace):
    from tests.doubles.cli_homes import CLI_BIN_DIR, cli_bin

    cli_bin("gemini")  # installed by make test (scripts/install_clis.sh); fails loudly if not
    env = {"HOME": str(tmp_path), "PATH": f"{CLI_BIN_DIR}:/usr/bin:/bin", "GEMINI_API_KEY": "k"}
    _, checks = doctor(workspace, env, "--agent", "gemini")
    assert checks["gemini CLI"]["status"] == "ok" and "0.61.0" in checks["gemini CLI"]["detail"]
