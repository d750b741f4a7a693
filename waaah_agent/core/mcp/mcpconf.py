"""The waaah MCP server entry in a CLI's settings: find it, merge it in (each adapter builds its
own entry: ``Adapter.mcp``).

Pure: dicts in, dicts out. The caller reads and writes files (with a backup, atomically).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

NAME = "waaah"
#: The longest wait_for_prompt long poll the WAAAH server holds a call, in seconds.
LONG_POLL_SECONDS = 300
#: How long a CLI (and our proxy) waits for one tool call: the long poll plus a margin.
TOOL_TIMEOUT_SECONDS = LONG_POLL_SECONDS + 30
TOOL_TIMEOUT_MS = TOOL_TIMEOUT_SECONDS * 1000


@dataclass(frozen=True)
class ExistingEntry:
    kind: str  # "ours" (waaah mcp-proxy), "upstream" (the Node waaah-proxy), "other"
    url: str | None
    has_key: bool
    key: str | None = field(
        default=None, repr=False, compare=False
    )  # the entry's WAAAH API key, if it holds one


def find_entry(settings: dict[str, Any], url_var: str, key_var: str) -> ExistingEntry | None:
    """The waaah entry under ``mcpServers`` (``url_var``, ``key_var``: the proxy's variables)."""
    servers = settings.get("mcpServers")
    if not isinstance(servers, dict) or not isinstance(servers.get(NAME), dict):
        return None
    entry = servers[NAME]
    args = [str(a) for a in entry.get("args", []) if a is not None]
    env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
    command = " ".join([str(entry.get("command", "")), *args])
    if "mcp-proxy" in args or "waaah_agent.runtime.mcp.proxy" in command:
        kind = "ours"
    elif "waaah-proxy" in command or "mcp-proxy" in command:
        kind = "upstream"
    else:
        kind = "other"
    url = _flag_value(args, "--url") or _flag_value(args, "--server") or env.get(url_var)
    key = env.get(key_var)
    return ExistingEntry(kind, url, bool(key), str(key) if key else None)


def with_entry(settings: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``settings`` with ``mcpServers.waaah`` set; every other key kept as it was."""
    merged = copy.deepcopy(settings)
    servers = merged.get("mcpServers")
    if not isinstance(servers, dict):
        servers = merged["mcpServers"] = {}
    servers[NAME] = entry
    return merged


def _flag_value(args: list[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None
