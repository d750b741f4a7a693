"""The waaah MCP server's set-up: which server a run uses, and the waaah entry written into a
CLI's own settings when the user asks.

How each CLI is given the server per run is its adapter's ``mcp`` (core/mcp/givers.py), carried
out by runtime/mcp/givers.py. A user's own settings file is written only when they ask (`waaah
mcp install` / `uninstall`, ``Persistent``): a read-modify-write that keeps all other keys, mode
0600 when the entry holds a key, read and rewritten safely by runtime/mcp/user_file.py. An entry
named ``waaah`` that waaah did not write is the user's: replaced or removed only when they say so.
"""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent import settings
from waaah_agent.core.mcp import mcpconf
from waaah_agent.errors import ConfigRefused, UsageError
from waaah_agent.runtime.mcp.user_file import MAX_SETTINGS_BYTES as MAX_SETTINGS_BYTES
from waaah_agent.runtime.mcp.user_file import (
    ConfigFile,
    check_writable,
    find_entry,
    read_settled,
    rewrite_config,
)
from waaah_agent.runtime.mcp.waaah import Health

PROXY_COMMAND = [sys.executable, "-m", "waaah_agent.commands.app"]


@dataclass(frozen=True)
class ServerChoice:
    url: str
    api_key: str | None = field(repr=False)
    source: str
    key_typed: bool = False  # typed at the prompt now: to be kept for later starts


@dataclass
class McpPlan:
    """What the run needs: extra CLI args and a report of what was done."""

    server: ServerChoice | None
    extra_args: list[str]
    health: str | None  # the first check's detail ("ok", "unreachable: ...", "bad key")
    healthy: bool = True  # what that check said
    settled: bool = False  # what the CLI changed in what it was given is back, and that removed


def choose_server(
    flag_url: str | None,
    flag_key: str | None,
    env: Mapping[str, str],
    existing: mcpconf.ExistingEntry | None,
    interactive: bool,
    ask: object,
    ask_secret: Callable[[str], str] | None = None,
    kept_key: str | None = None,
    kept_url: str | None = None,
) -> ServerChoice:
    """The server and key. The address: the flag, else the variable, else the one typed at an
    earlier start (``kept_url``), else the CLI's existing entry's, else asked on a terminal
    (``ask``). The key: the flag, else the variable, else the one kept with that same address
    (``kept_key``) or held by that same entry (a key goes to no other server), else, when the
    address was asked, asked through ``ask_secret`` (default :func:`getpass.getpass`, which
    does not echo it)."""
    key = settings.api_key(flag_key, env)
    stored = {kept_url: kept_key} if kept_url else {}
    if existing is not None and existing.url and existing.key:
        stored.setdefault(existing.url, existing.key)
    given = settings.server_url(flag_url, env)
    if given is not None:
        return ServerChoice(given[0], key or stored.get(given[0]), given[1])
    if kept_url:
        return ServerChoice(kept_url, key or kept_key, "the address typed at an earlier start")
    if existing is not None and existing.url:
        return ServerChoice(
            existing.url, key or existing.key, f"the existing {existing.kind} waaah MCP entry"
        )
    if not interactive:
        raise UsageError(
            "no WAAAH server configured: pass --server URL (and --api-key KEY), "
            f"set {settings.SERVER_URL} / {settings.API_KEY}, or run without MCP with --no-mcp"
        )
    default = settings.DEFAULT_SERVER_URL
    url = str(ask(f"WAAAH server address [{default}]: ")).strip() or default  # type: ignore[operator]
    if key:
        return ServerChoice(url, key, "asked")
    hidden = ask_secret or getpass.getpass
    typed = hidden("WAAAH API key (optional, not shown, Enter for none): ").strip() or None
    return ServerChoice(url, typed, "asked", key_typed=typed is not None)


def install_entry(
    path: Path,
    entry: dict[str, Any],
    server: ServerChoice,
    now: datetime,
    limit: int = MAX_SETTINGS_BYTES,
    comments: bool = False,
    replace: bool = False,
) -> list[str]:
    """Put ``entry`` into the settings file at ``path``; return notes for the user (empty if unchanged).

    A symlink stays a link: the file it points to is edited, replaced atomically by a file
    written beside it. A file we must not write is refused before anything is written
    (:func:`check_writable`); every refused file is left byte for byte as it was. A ``waaah``
    entry of the user's own (not one waaah wrote) is replaced only with ``replace``.
    """
    current = read_settled(path, limit, comments)
    servers = current.data.get("mcpServers")
    if isinstance(servers, dict) and servers.get(mcpconf.NAME) == entry:
        return []
    if not replace:
        _not_theirs(current, "replace")
    check_writable(current, entry)
    mode = 0o600 if server.api_key else (current.mode if current.mode is not None else 0o644)
    notes = rewrite_config(current, mcpconf.with_entry(current.data, entry), mode, now, entry)
    notes.append(f"configured the waaah MCP server ({server.url}) in {current.where}")
    if server.api_key:
        notes.append(f"warning: the WAAAH API key is stored in plain text in {current.target} (mode 0600)")
    return notes


def remove_entry(
    path: Path, now: datetime, limit: int = MAX_SETTINGS_BYTES, comments: bool = False, replace: bool = False
) -> list[str]:
    """Take ``mcpServers.waaah`` out of the settings file at ``path`` (a backup first); an entry
    of the user's own only with ``replace``. An ``mcpServers`` left empty goes with it."""
    current = read_settled(path, limit, comments)
    servers = current.data.get("mcpServers")
    if not isinstance(servers, dict) or mcpconf.NAME not in servers:
        return []
    if not replace:
        _not_theirs(current, "remove")
    check_writable(current, {})
    rest = {k: v for k, v in servers.items() if k != mcpconf.NAME}
    data = (
        {**current.data, "mcpServers": rest}
        if rest
        else {k: v for k, v in current.data.items() if k != "mcpServers"}
    )
    notes = rewrite_config(current, data, current.mode if current.mode is not None else 0o600, now)
    notes.append(f"removed the waaah MCP server from {current.where}")
    return notes


def _not_theirs(current: ConfigFile, what: str) -> None:
    """Refuse to replace or remove a ``waaah`` entry waaah did not write (another server's, the
    user's own by hand): it is theirs."""
    found = find_entry(current.data)
    if found is None or found.kind == "ours":
        return
    at = f" (for {found.url})" if found.url else ""
    raise ConfigRefused(
        f'{current.where} has a "waaah" entry{at} that waaah did not write: left as it is',
        f"to {what} it anyway, run the command again with --replace",
    )


def server_warning(server: ServerChoice, health: Health) -> str | None:
    if health.ok:
        return None
    if health.detail == "bad key":
        return (
            f"WAAAH server at {server.url} rejected the API key (HTTP 401): "
            f"set the right one with --api-key or {settings.API_KEY}"
        )
    return f"Cannot connect to WAAAH server at {server.url}. Agent will run without MCP."
