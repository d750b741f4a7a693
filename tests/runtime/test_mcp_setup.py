"""Config injection on a temporary HOME, server checks, and `waaah doctor`, for real."""

from __future__ import annotations

import json
import stat
import subprocess
from datetime import datetime

import pytest

from tests.doubles.waaah_server import WaaahServer
from tests.runtime.helpers import WAAAH
from waaah_agent.errors import UsageError
from waaah_agent.runtime import mcp_setup
from waaah_agent.runtime.mcp_setup import ServerChoice
from waaah_agent.runtime.waaah import check_server


def test_gemini_settings_edit_keeps_keys_backs_up_and_is_idempotent(tmp_path):
    home = tmp_path / "home"
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    before = {"ui": {"theme": "Dracula"}, "mcpServers": {"github": {"command": "gh-mcp"}}}
    settings.write_text(json.dumps(before))
    env = {"HOME": str(home)}
    server = ServerChoice("http://127.0.0.1:9", "secret-key-123", "--server")

    notes = mcp_setup.install_gemini(env, server, datetime(2026, 1, 2, 3, 4, 5))
    after = json.loads(settings.read_text())
    assert after["ui"] == before["ui"] and after["mcpServers"]["github"] == before["mcpServers"]["github"]
    entry = after["mcpServers"]["waaah"]
    assert entry["args"][-1] == "mcp-proxy" and entry["env"]["WAAAH_SERVER_URL"] == "http://127.0.0.1:9"
    backup = settings.with_name("settings.json.waaah-backup-20260102-030405")
    assert json.loads(backup.read_text()) == before
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert any("plain text" in n for n in notes)

    assert mcp_setup.install_gemini(env, server, datetime(2026, 1, 2, 3, 4, 6)) == []  # unchanged: no edit
    assert len(list(settings.parent.glob("settings.json.waaah-backup-*"))) == 1


def test_fresh_home_gets_a_settings_file_without_a_key(tmp_path):
    env = {"HOME": str(tmp_path)}
    mcp_setup.install_gemini(env, ServerChoice("http://h", None, "x"), datetime.now())
    settings = tmp_path / ".gemini" / "settings.json"
    assert "WAAAH_API_KEY" not in settings.read_text()
    assert not list(settings.parent.glob("*.waaah-backup-*"))


def test_corrupt_settings_is_a_clear_error_and_untouched(tmp_path):
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{ not json")
    with pytest.raises(UsageError, match="cannot parse .*settings.json"):
        mcp_setup.install_gemini({"HOME": str(tmp_path)}, ServerChoice("http://h", None, "x"), datetime.now())
    assert settings.read_text() == "{ not json"


def test_claude_gets_a_per_run_config_file(tmp_path):
    args = mcp_setup.install_claude(tmp_path, ServerChoice("http://h", "k", "x"), {"WAAAH_AGENT_ID": "a1"})
    path = tmp_path / "mcp.json"
    assert args == ["--mcp-config", str(path), "--allowedTools", "mcp__waaah"]
    doc = json.loads(path.read_text())
    assert doc["mcpServers"]["waaah"]["env"] == {
        "WAAAH_SERVER_URL": "http://h",
        "WAAAH_API_KEY": "k",
        "WAAAH_AGENT_ID": "a1",
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


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
