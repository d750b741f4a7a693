"""codex's adapter on a real session file of the pinned release (scripts/record_transcripts.py):
token totals, the session id it chose, and the per-run MCP overrides that keep keys off argv."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from waaah_agent import settings
from waaah_agent.adapters import codex
from waaah_agent.core.tokens import Usage
from waaah_agent.errors import ConfigRefused
from waaah_agent.runtime.mcp.givers import giver
from waaah_agent.runtime.mcp.setup import ServerChoice

SESSION = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "codex-0.171.0.jsonl"
WORKSPACE = Path("/home/user/project")  # the recorded session's cwd (neutralised)
# Three model calls, each reported by the fake model as 1200 input and 34 output tokens.
EXPECTED = Usage(input=3 * 1200, output=3 * 34, cached=0)


def meta() -> dict[str, str]:
    return json.loads(SESSION.read_text(encoding="utf-8").splitlines()[0])["payload"]


def started() -> float:
    return datetime.fromisoformat(meta()["timestamp"].replace("Z", "+00:00")).timestamp()


def codex_home_with_session(tmp_path: Path) -> dict[str, str]:
    sid = meta()["id"]
    day = tmp_path / "codex-home" / "sessions" / datetime.fromtimestamp(started()).strftime("%Y/%m/%d")
    day.mkdir(parents=True)
    shutil.copy(SESSION, day / f"rollout-2026-11-25T14-43-08-{sid}.jsonl")
    return {"CODEX_HOME": str(tmp_path / "codex-home"), "HOME": str(tmp_path)}


def test_tokens_of_every_model_call_count_once():
    counter = codex.codex_counter()
    lines = SESSION.read_text(encoding="utf-8").splitlines()
    assert counter.feed(lines) == EXPECTED
    assert counter.feed(lines) == EXPECTED  # the same file read again adds nothing
    assert counter.messages == 3


def test_the_session_codex_began_here_is_found_by_its_files(tmp_path):
    env = codex_home_with_session(tmp_path)
    sid = meta()["id"]
    assert codex.own_session(env, WORKSPACE, started() - 5) == sid
    assert codex.ADAPTER.transcript(env, WORKSPACE, sid) is not None
    # Begun before this supervisor's session, or in another folder: not ours.
    assert codex.own_session(env, WORKSPACE, started() + 60) is None
    assert codex.own_session(env, Path("/elsewhere"), started() - 5) is None
    # Our own id (chosen before codex chose its own) names no file of codex's.
    assert codex.ADAPTER.transcript(env, WORKSPACE, "not-a-uuid/../x") is None


def test_odd_session_files_are_skipped(tmp_path):
    env = codex_home_with_session(tmp_path)
    day = next((tmp_path / "codex-home" / "sessions").glob("*/*/*"))
    (day / "rollout-2026-11-25T14-43-09-x.jsonl").write_bytes(b"\xff\x00 not json\n")
    (day / "rollout-2026-11-25T14-43-10-y.jsonl").mkdir()
    assert codex.own_session(env, WORKSPACE, started() - 5) == meta()["id"]


def test_resume_and_fresh_start_never_launch_the_daemon():
    assert codex.ADAPTER.argv("codex", "ours", False, ["-x"]) == [
        "codex",
        "-c",
        "features.daemon_auto_start=false",
        "-x",
    ]
    assert codex.ADAPTER.argv("codex", "0199", True, [])[:3] == ["codex", "resume", "0199"]
    assert "features.daemon_auto_start=false" in codex.ADAPTER.argv("codex", "0199", True, [])


def test_mcp_entry_is_given_per_run_and_the_key_stays_off_the_command_line(tmp_path):
    key = "waaah-secret-key-0123456789"
    server = ServerChoice("http://127.0.0.1:9", key, "--server")
    per_run = {settings.AGENT_ID: "agent-1", settings.INBOX: str(tmp_path / "inbox.jsonl")}
    given = giver(codex.MCP).give({"HOME": str(tmp_path)}, server, tmp_path, per_run)
    assert all(key not in arg for arg in given.args)
    assert given.env[settings.API_KEY] == key and given.env[settings.AGENT_ID] == "agent-1"
    overrides = dict(arg.split("=", 1) for arg in given.args[1::2])
    assert given.args[::2] == ["-c"] * len(overrides)
    assert overrides["mcp_servers.waaah.default_tools_approval_mode"] == '"approve"'
    assert json.loads(overrides["mcp_servers.waaah.env_vars"]) == sorted(given.env)
    assert json.loads(overrides["mcp_servers.waaah.args"])[-1] == "mcp-proxy"
    assert not list(tmp_path.iterdir())  # no file written: codex's own config is not touched


def test_an_entry_of_the_user_s_own_is_read_for_its_url(tmp_path):
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[mcp_servers.waaah]\ncommand = "waaah"\nargs = ["mcp-proxy"]\n'
        'env = { WAAAH_SERVER_URL = "http://10.0.0.2:3000" }\n',
        encoding="utf-8",
    )
    found = giver(codex.MCP).existing({"CODEX_HOME": str(home)})
    assert found is not None and found.kind == "ours" and found.url == "http://10.0.0.2:3000"
    (home / "config.toml").write_text("not = [valid", encoding="utf-8")
    assert giver(codex.MCP).existing({"CODEX_HOME": str(home)}) is None


def test_a_login_is_needed_only_for_openai_without_a_key_or_a_stored_login(tmp_path):
    home = tmp_path / "codex-home"
    home.mkdir()
    env = {"CODEX_HOME": str(home), "HOME": str(tmp_path)}
    needs = codex.ADAPTER.needs_login
    assert needs(env)  # nothing at all: its sign-in screen
    assert not needs({**env, "OPENAI_API_KEY": "sk-x"})
    (home / "config.toml").write_text('model_provider = "gateway"\n', encoding="utf-8")
    assert not needs(env)  # a provider of the user's own, its key named by env_key
    (home / "config.toml").write_text('model = "gpt-5.5"\n', encoding="utf-8")
    assert needs(env)
    (home / "auth.json").write_text("{}", encoding="utf-8")
    assert not needs(env)  # `codex login` was run


def test_codex_is_among_the_supervised_clis():
    from waaah_agent import adapters

    assert "codex" in adapters.names() and codex.ADAPTER.interactive


def test_an_http_waaah_entry_of_the_user_s_is_refused_in_one_line(tmp_path):
    """codex itself would stop with "url is not supported for stdio" (seen with 0.169.0)."""
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[mcp_servers.waaah]\nurl = "http://127.0.0.1:9/mcp"\n', encoding="utf-8"
    )
    server = ServerChoice("http://127.0.0.1:9", None, "--server")
    with pytest.raises(ConfigRefused) as refused:
        giver(codex.MCP).give({"CODEX_HOME": str(home)}, server, tmp_path, {})
    assert "has an HTTP waaah MCP server" in str(refused.value) and "\n" not in str(refused.value)
    assert "--no-mcp" in refused.value.fix
