"""opencode's adapter: the per-run config merged over the user's, its store read safely.

The real opencode reading that config and that store is driven by tests/e2e/test_agent_opencode.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waaah_agent import adapters
from waaah_agent.adapters.opencode import CONFIG_CONTENT, MCP, config_document, merged
from waaah_agent.errors import ConfigRefused
from waaah_agent.runtime.mcp.givers import giver
from waaah_agent.runtime.mcp.setup import ServerChoice

ADAPTER = adapters.registry()["opencode"]
SERVER = ServerChoice("http://127.0.0.1:3456", "wk-secret", "--server")


def test_the_document_names_our_proxy_and_allows_its_tools():
    doc = config_document(["/venv/bin/python", "-m", "waaah_agent.commands.app"], {"WAAAH_SERVER_URL": "u"})
    entry = doc["mcp"]["waaah"]
    assert entry["type"] == "local" and entry["command"][-1] == "mcp-proxy"
    assert entry["environment"] == {"WAAAH_SERVER_URL": "u"} and entry["timeout"] >= 300_000
    assert doc["permission"] == {"waaah_*": "allow"}  # no permission dialog for a tool call


def test_give_puts_it_in_the_environment_and_keeps_the_user_s_own_content(tmp_path):
    mine = {
        "model": "x/y",
        "mcp": {"docs": {"type": "remote", "url": "https://d"}},
        "permission": {"bash": "ask"},
    }
    given = giver(MCP).give({CONFIG_CONTENT: json.dumps(mine)}, SERVER, tmp_path, {"WAAAH_AGENT_ID": "a1"})
    assert given.args == [] and list(given.env) == [CONFIG_CONTENT]
    doc = json.loads(given.env[CONFIG_CONTENT])
    assert doc["model"] == "x/y"
    assert set(doc["mcp"]) == {"docs", "waaah"}
    assert doc["permission"] == {"bash": "ask", "waaah_*": "allow"}
    env = doc["mcp"]["waaah"]["environment"]
    assert env["WAAAH_SERVER_URL"] == SERVER.url and env["WAAAH_AGENT_ID"] == "a1"
    assert list(tmp_path.iterdir()) == []  # nothing written: the user's files are not touched


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", '"text"'])
def test_a_user_s_content_that_is_no_json_object_is_one_line(bad):
    with pytest.raises(ConfigRefused, match=f"^{CONFIG_CONTENT} "):
        merged(bad, {"mcp": {}})


def test_an_existing_entry_in_the_user_s_opencode_json_gives_its_server(tmp_path):
    config = tmp_path / "opencode" / "opencode.json"
    config.parent.mkdir()
    entry = {
        "type": "local",
        "command": ["waaah", "mcp-proxy"],
        "environment": {"WAAAH_SERVER_URL": "http://s:1"},
    }
    config.write_text(json.dumps({"mcp": {"waaah": entry}}))
    found = giver(MCP).existing({"XDG_CONFIG_HOME": str(tmp_path)})
    assert found is not None and found.kind == "ours" and found.url == "http://s:1"
    config.write_text("[]")  # the wrong shape: its own CLI's file, not ours to judge
    assert giver(MCP).existing({"XDG_CONFIG_HOME": str(tmp_path)}) is None


@pytest.mark.parametrize("store", ["garbage", "directory", "missing", "empty"])
def test_a_store_that_cannot_be_read_knows_no_session(tmp_path, store):
    path = tmp_path / "opencode" / "opencode.db"
    path.parent.mkdir()
    if store == "garbage":
        path.write_bytes(b"\x00not a database\xff" * 100)
    elif store == "directory":
        path.mkdir()
    elif store == "empty":
        path.write_bytes(b"")
    env = {"XDG_DATA_HOME": str(tmp_path)}
    assert ADAPTER.own_session is not None
    assert ADAPTER.own_session(env, Path("/ws"), 0.0) is None
    assert ADAPTER.transcript(env, Path("/ws"), "ses_x") is None
    assert ADAPTER.resume_args("ses_x") == ["--session", "ses_x"] and ADAPTER.fresh_args("u") == []
