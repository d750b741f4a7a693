"""Configure the waaah MCP server where each CLI really reads it, and check the server.

gemini: ``mcpServers.waaah`` in ``~/.gemini/settings.json``. The user-level file is the one
gemini always reads: workspace settings are ignored in folders gemini does not trust, and
writing into the workspace would put a key into the user's repository. Every edit is a
read-modify-write that keeps all other keys, with a timestamped backup first and an atomic
replace, mode 0600 when the entry holds a key.
claude: a per-run ``--mcp-config <file>`` in the session folder (the user's files are never
touched) plus ``--allowedTools mcp__waaah`` so tool calls do not stop at a permission dialog.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from waaah_agent.core import mcpconf
from waaah_agent.errors import UsageError
from waaah_agent.runtime.store import atomic_write
from waaah_agent.runtime.waaah import Health

DEFAULT_URL = "http://localhost:3456"
PROXY_COMMAND = [sys.executable, "-m", "waaah_agent.cli"]


@dataclass(frozen=True)
class ServerChoice:
    url: str
    api_key: str | None
    source: str


@dataclass
class McpPlan:
    """What the run needs: extra CLI args and a report of what was done."""

    server: ServerChoice | None
    extra_args: list[str]
    health: str | None  # the first check's detail ("ok", "unreachable: ...", "bad key")


def gemini_settings_path(env: Mapping[str, str]) -> Path:
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or "~").expanduser()
    return home / ".gemini" / "settings.json"


def read_json(path: Path) -> dict[str, object]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as err:
        raise UsageError(f"cannot parse {path} ({err}); fix or move it, then start again") from err
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object; fix or move it, then start again")
    return data


def existing_entry(adapter_mcp: str, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
    if adapter_mcp == "gemini":
        return mcpconf.find_entry(read_json(gemini_settings_path(env)))
    claude_json = Path(env.get("HOME") or "~").expanduser() / ".claude.json"
    try:
        return mcpconf.find_entry(read_json(claude_json))
    except UsageError:
        return None  # claude's own file; not ours to judge


def choose_server(
    flag_url: str | None,
    flag_key: str | None,
    env: Mapping[str, str],
    existing: mcpconf.ExistingEntry | None,
    interactive: bool,
    ask: object,
) -> ServerChoice:
    key = flag_key or env.get("WAAAH_API_KEY") or None
    if flag_url:
        return ServerChoice(flag_url, key, "--server")
    if env.get("WAAAH_SERVER_URL"):
        return ServerChoice(env["WAAAH_SERVER_URL"], key, "WAAAH_SERVER_URL")
    if existing is not None and existing.url:
        return ServerChoice(existing.url, key, f"the existing {existing.kind} waaah MCP entry")
    if not interactive:
        raise UsageError(
            "no WAAAH server configured: pass --server URL (and --api-key KEY), "
            "set WAAAH_SERVER_URL / WAAAH_API_KEY, or run without MCP with --no-mcp"
        )
    url = str(ask(f"WAAAH server address [{DEFAULT_URL}]: ")).strip() or DEFAULT_URL  # type: ignore[operator]
    key = key or str(ask("WAAAH API key (optional, Enter for none): ")).strip() or None  # type: ignore[operator]
    return ServerChoice(url, key, "asked")


def install_gemini(env: Mapping[str, str], server: ServerChoice, now: datetime) -> list[str]:
    """Put our entry into gemini's user settings; return notes for the user (empty if unchanged)."""
    path = gemini_settings_path(env)
    settings = read_json(path)
    entry = mcpconf.gemini_entry(PROXY_COMMAND, server.url, server.api_key)
    servers = settings.get("mcpServers")
    if isinstance(servers, dict) and servers.get(mcpconf.NAME) == entry:
        return []
    notes = []
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        backup = path.with_name(f"{path.name}.waaah-backup-{now.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(path, backup)
        notes.append(f"backed up {path} to {backup}")
    mode = 0o600 if server.api_key else (path.stat().st_mode & 0o777 if path.exists() else 0o644)
    atomic_write(path, json.dumps(mcpconf.with_entry(settings, entry), indent=2) + "\n", mode)
    os.chmod(path, mode)
    notes.append(f"configured the waaah MCP server ({server.url}) in {path}")
    if server.api_key:
        notes.append(f"warning: the WAAAH API key is stored in plain text in {path} (mode 0600)")
    return notes


def install_claude(session_dir: Path, server: ServerChoice, per_run_env: Mapping[str, str]) -> list[str]:
    """Write the per-run MCP config; return the CLI args that load it."""
    path = session_dir / "mcp.json"
    env = {**mcpconf.proxy_env(server.url, server.api_key), **per_run_env}
    atomic_write(path, json.dumps(mcpconf.claude_config(PROXY_COMMAND, env), indent=2) + "\n", 0o600)
    return ["--mcp-config", str(path), "--allowedTools", f"mcp__{mcpconf.NAME}"]


CLAUDE_HOOKS = ("SessionStart", "UserPromptSubmit", "Stop", "Notification")


def claude_hook_args(session_dir: Path) -> list[str]:
    """A per-run ``--settings`` file whose hooks report to the session inbox."""
    command = " ".join([sys.executable, "-m", "waaah_agent.hook", "claude"])
    hooks = {name: [{"hooks": [{"type": "command", "command": command}]}] for name in CLAUDE_HOOKS}
    path = session_dir / "claude-settings.json"
    atomic_write(path, json.dumps({"hooks": hooks}, indent=2) + "\n", 0o600)
    return ["--settings", str(path)]


def server_warning(server: ServerChoice, health: Health) -> str | None:
    if health.ok:
        return None
    if health.detail == "bad key":
        return (
            f"WAAAH server at {server.url} rejected the API key (HTTP 401): "
            "set the right one with --api-key or WAAAH_API_KEY"
        )
    return f"Cannot connect to WAAAH server at {server.url}. Agent will run without MCP."
