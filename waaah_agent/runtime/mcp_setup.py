"""Give a CLI the waaah MCP server (and hooks) where it really reads them, and check the server.

Two ways, each an object an adapter picks and fills with its CLI's paths and flags:

* :class:`UserSettings`: the CLI reads MCP servers only from a settings file of the user's
  (gemini: ``mcpServers.waaah`` in ``~/.gemini/settings.json``, the one file it always reads:
  workspace settings are ignored in folders it does not trust, and writing into the workspace
  would put a key into the user's repository). Every edit is a read-modify-write that keeps all
  other keys, with a timestamped backup first and an atomic replace, mode 0600 when the entry
  holds a key.
* :class:`PerRunConfig`: the CLI takes a config file per run (claude: ``--mcp-config <file>`` in
  the session folder, plus ``--allowedTools mcp__waaah`` so tool calls do not stop at a
  permission dialog); the user's files are never touched.

:class:`PerRunHooks` gives a CLI per-run hooks (claude: ``--settings <file>``) that report to the
session inbox.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from waaah_agent import settings
from waaah_agent.core import mcpconf
from waaah_agent.errors import UsageError
from waaah_agent.runtime.store import atomic_write
from waaah_agent.runtime.waaah import Health

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


def choose_server(
    flag_url: str | None,
    flag_key: str | None,
    env: Mapping[str, str],
    existing: mcpconf.ExistingEntry | None,
    interactive: bool,
    ask: object,
) -> ServerChoice:
    key = settings.api_key(flag_key, env)
    given = settings.server_url(flag_url, env)
    if given is not None:
        return ServerChoice(given[0], key, given[1])
    if existing is not None and existing.url:
        return ServerChoice(existing.url, key, f"the existing {existing.kind} waaah MCP entry")
    if not interactive:
        raise UsageError(
            "no WAAAH server configured: pass --server URL (and --api-key KEY), "
            f"set {settings.SERVER_URL} / {settings.API_KEY}, or run without MCP with --no-mcp"
        )
    default = settings.DEFAULT_SERVER_URL
    url = str(ask(f"WAAAH server address [{default}]: ")).strip() or default  # type: ignore[operator]
    key = key or str(ask("WAAAH API key (optional, Enter for none): ")).strip() or None  # type: ignore[operator]
    return ServerChoice(url, key, "asked")


@dataclass(frozen=True)
class Given:
    """What giving the server to one run did: notes for the user, arguments for the CLI."""

    notes: list[str]
    args: list[str]


@dataclass(frozen=True)
class Finding:
    """What `waaah doctor` says about a CLI's waaah MCP entry."""

    status: str  # "ok", "warn", "fail"
    detail: str
    fix: str = ""


class McpGiver(Protocol):
    """How one CLI is given the waaah MCP server (``Adapter.mcp``)."""

    def existing(self, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
        """The waaah entry the user already has (its URL is the server's default); raises
        UsageError when a file that is ours to edit cannot be read."""
        ...

    def give(
        self, env: Mapping[str, str], server: ServerChoice, session_dir: Path, per_run_env: Mapping[str, str]
    ) -> Given:
        """Point this run of the CLI at our proxy for ``server``."""
        ...

    def doctor(self, env: Mapping[str, str]) -> Finding:
        """Where the CLI's entry stands now, for `waaah doctor`."""
        ...


@dataclass(frozen=True)
class UserSettings:
    """The waaah entry goes into a JSON settings file of the user's, every other key kept."""

    #: The settings file, from the environment (HOME and the CLI's own variables).
    path: Callable[[Mapping[str, str]], Path]
    #: The entry: (proxy command, server URL, API key) -> the dict under ``mcpServers.waaah``.
    entry: Callable[[list[str], str, str | None], dict[str, Any]]
    #: The clock that stamps backups (a test passes a fixed one).
    now: Callable[[], datetime] = datetime.now

    def existing(self, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
        return mcpconf.find_entry(read_json(self.path(env)))

    def give(
        self, env: Mapping[str, str], server: ServerChoice, session_dir: Path, per_run_env: Mapping[str, str]
    ) -> Given:
        entry = self.entry(PROXY_COMMAND, server.url, server.api_key)
        return Given(install_entry(self.path(env), entry, server, self.now()), [])

    def doctor(self, env: Mapping[str, str]) -> Finding:
        try:
            entry = self.existing(env)
        except UsageError as err:
            return Finding("fail", str(err), "fix the JSON of that file")
        where = self.path(env)
        if entry is None:
            return Finding(
                "warn", f"no waaah entry in {where}", "waaah agent adds it on start (with a backup)"
            )
        if entry.kind == "ours":
            return Finding("ok", f"waaah mcp-proxy -> {entry.url} ({where})")
        return Finding(
            "warn",
            f"{entry.kind} proxy -> {entry.url} ({where})",
            "waaah agent replaces it with waaah mcp-proxy",
        )


def install_entry(path: Path, entry: dict[str, Any], server: ServerChoice, now: datetime) -> list[str]:
    """Put ``entry`` into the settings file at ``path``; return notes for the user (empty if unchanged)."""
    settings = read_json(path)
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


@dataclass(frozen=True)
class PerRunConfig:
    """A config file per run in the session folder, named to the CLI by a flag."""

    #: The flag that names the file, e.g. ``--mcp-config``.
    flag: str
    #: The file's document: (proxy command, the proxy's environment) -> JSON object.
    document: Callable[[list[str], dict[str, str]], dict[str, Any]]
    #: Arguments given with it, e.g. ``--allowedTools mcp__waaah``.
    extra_args: tuple[str, ...] = ()
    #: A file of the CLI's own that may hold a waaah entry; only its URL is used.
    user_file: Callable[[Mapping[str, str]], Path] | None = None

    def existing(self, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
        if self.user_file is None:
            return None
        try:
            return mcpconf.find_entry(read_json(self.user_file(env)))
        except UsageError:
            return None  # the CLI's own file; not ours to judge

    def give(
        self, env: Mapping[str, str], server: ServerChoice, session_dir: Path, per_run_env: Mapping[str, str]
    ) -> Given:
        path = session_dir / "mcp.json"
        proxy_env = {**settings.proxy_env(server.url, server.api_key), **per_run_env}
        atomic_write(path, json.dumps(self.document(PROXY_COMMAND, proxy_env), indent=2) + "\n", 0o600)
        return Given([], [self.flag, str(path), *self.extra_args])

    def doctor(self, env: Mapping[str, str]) -> Finding:
        return Finding("ok", f"given per run with {self.flag} (your files are not touched)")


@dataclass(frozen=True)
class PerRunHooks:
    """Hooks given per run in a settings file, each running ``python -m waaah_agent.hook <cli>``,
    which appends the event to the session inbox (``Adapter.hooks``)."""

    cli: str
    #: The flag that names the settings file, e.g. ``--settings``.
    flag: str
    #: The hook events to report, e.g. ``Stop``.
    events: tuple[str, ...]

    def args(self, session_dir: Path) -> list[str]:
        command = " ".join([sys.executable, "-m", "waaah_agent.hook", self.cli])
        hooks = {name: [{"hooks": [{"type": "command", "command": command}]}] for name in self.events}
        path = session_dir / f"{self.cli}-settings.json"
        atomic_write(path, json.dumps({"hooks": hooks}, indent=2) + "\n", 0o600)
        return [self.flag, str(path)]


def server_warning(server: ServerChoice, health: Health) -> str | None:
    if health.ok:
        return None
    if health.detail == "bad key":
        return (
            f"WAAAH server at {server.url} rejected the API key (HTTP 401): "
            f"set the right one with --api-key or {settings.API_KEY}"
        )
    return f"Cannot connect to WAAAH server at {server.url}. Agent will run without MCP."
