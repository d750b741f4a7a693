"""Finding and merging the waaah MCP entry (pure)."""

from waaah_agent.adapters.claude import claude_config
from waaah_agent.adapters.gemini import gemini_entry
from waaah_agent.core.mcp import mcpconf
from waaah_agent.settings import API_KEY, SERVER_URL, proxy_env

NAMES = (SERVER_URL, API_KEY)


def test_find_our_entry_and_its_url():
    entry = gemini_entry(["/venv/bin/python", "-m", "waaah_agent.commands.app"], proxy_env("http://h:1", "k"))
    found = mcpconf.find_entry({"mcpServers": {"waaah": entry}}, *NAMES)
    assert found == mcpconf.ExistingEntry("ours", "http://h:1", True)
    assert entry["trust"] is True and entry["timeout"] >= 300_000


def test_find_the_upstream_node_proxy_with_url_flag():
    settings = {
        "mcpServers": {
            "waaah": {"command": "node", "args": ["/src/waaah-proxy/dist/index.js", "--url", "http://x:3000"]}
        }
    }
    assert mcpconf.find_entry(settings, *NAMES) == mcpconf.ExistingEntry("upstream", "http://x:3000", False)
    settings = {"mcpServers": {"waaah": {"command": "waaah-proxy", "args": ["--url=http://y"]}}}
    assert mcpconf.find_entry(settings, *NAMES).url == "http://y"


def test_missing_or_foreign_entries():
    assert mcpconf.find_entry({}, *NAMES) is None
    assert mcpconf.find_entry({"mcpServers": {"other": {}}}, *NAMES) is None
    assert mcpconf.find_entry({"mcpServers": {"waaah": {"command": "thing"}}}, *NAMES).kind == "other"


def test_merge_keeps_every_other_key_and_does_not_mutate():
    settings = {"ui": {"theme": "x"}, "mcpServers": {"github": {"command": "gh"}}}
    merged = mcpconf.with_entry(settings, {"command": "c"})
    assert merged["ui"] == {"theme": "x"} and merged["mcpServers"]["github"] == {"command": "gh"}
    assert merged["mcpServers"]["waaah"] == {"command": "c"}
    assert "waaah" not in settings["mcpServers"]
    assert mcpconf.with_entry({"mcpServers": "junk"}, {"a": 1})["mcpServers"] == {"waaah": {"a": 1}}


def test_claude_config_is_a_stdio_entry():
    doc = claude_config(["/p", "-m", "waaah_agent.commands.app"], {"WAAAH_SERVER_URL": "u"})
    assert doc["mcpServers"]["waaah"] == {
        "type": "stdio",
        "command": "/p",
        "args": ["-m", "waaah_agent.commands.app", "mcp-proxy"],
        "env": {"WAAAH_SERVER_URL": "u"},
    }
