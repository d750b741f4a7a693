"""Carry out an adapter's ``mcp`` and ``hooks`` (core/mcp/givers.py): give one run of a CLI the
waaah MCP server and its hooks where it really reads them.

* ``HomePerRun``: runtime/mcp/cli_home.py's :class:`~waaah_agent.runtime.mcp.cli_home.PerRunHome`,
  a home of the CLI's own per run whose settings are the user's with the waaah entry over them;
* ``FilePerRun``: :class:`PerRunConfig`, a config file per run in the session folder named by a
  flag; the user's files are never touched;
* ``GivenInline``: :class:`InlineGiver`, arguments and variables only, nothing written.

:func:`write_hooks` writes a ``HooksPerRun`` settings file whose hooks report to the session inbox.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from waaah_agent import settings
from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.mcp.givers import FilePerRun, GivenInline, HomePerRun, HooksPerRun, McpShape, Persistent
from waaah_agent.errors import UsageError
from waaah_agent.runtime.mcp.setup import PROXY_COMMAND, ServerChoice
from waaah_agent.runtime.mcp.user_file import MAX_SETTINGS_BYTES, find_entry, read_json
from waaah_agent.runtime.store import atomic_write
from waaah_agent.safe_read import read_capped


@dataclass(frozen=True)
class Given:
    """What giving the server to one run did: notes for the user, arguments for the CLI."""

    notes: list[str]
    args: list[str]
    #: Variables for the CLI's environment (a home of its own for this run, the proxy's).
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Finding:
    """What `waaah doctor` says about a CLI's waaah MCP entry."""

    status: str  # "ok", "warn", "fail"
    detail: str
    fix: str = ""


class McpGiver(Protocol):
    """How one CLI is given the waaah MCP server (:func:`giver` of its ``Adapter.mcp``)."""

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

    def after_run(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        """One run of the CLI ended: carry back what it changed in what we gave it."""
        ...

    def finish(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        """The session ended: the same, then remove what was given for it."""
        ...

    @property
    def persistent(self) -> Persistent | None:
        """The entry a user may keep in their own settings (`waaah mcp install`), if any."""
        ...


#: What a file given to a CLI per run holds in place of the API key: the CLI fills it in from
#: its environment, so no file at rest holds the key.
KEY_REFERENCE = "${" + settings.API_KEY + "}"


def proxy_env(server: ServerChoice, per_run_env: Mapping[str, str]) -> dict[str, str]:
    """The proxy's environment for this run: the server, its key, the run's own variables."""
    return {**settings.proxy_env(server.url, server.api_key), **per_run_env}


@dataclass(frozen=True)
class PerRunConfig(FilePerRun):
    """A config file per run in the session folder, named to the CLI by a flag."""

    def existing(self, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
        if self.user_file is None:
            return None
        try:
            return find_entry(read_json(self.user_file(env), limit=self.user_limit))
        except UsageError:
            return None  # the CLI's own file; not ours to judge

    def give(
        self, env: Mapping[str, str], server: ServerChoice, session_dir: Path, per_run_env: Mapping[str, str]
    ) -> Given:
        path = session_dir / "mcp.json"
        env = proxy_env(server, per_run_env)
        run_env = {}
        if server.api_key and settings.API_KEY in env:
            # The key itself stays out of the file: the CLI fills the reference in from its own
            # environment when it reads the file (claude expands ${VAR} in MCP configs).
            env[settings.API_KEY], run_env[settings.API_KEY] = KEY_REFERENCE, server.api_key
        atomic_write(path, json.dumps(self.document(PROXY_COMMAND, env), indent=2) + "\n", 0o600)
        return Given([], [self.flag, str(path), *self.extra_args], run_env)

    def doctor(self, env: Mapping[str, str]) -> Finding:
        return Finding("ok", f"given per run with {self.flag} (your files are not touched)")

    def after_run(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        return []  # the CLI only reads the file

    def finish(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        return []  # the file stays with the session's other files


@dataclass(frozen=True)
class InlineGiver(GivenInline):
    """Arguments and variables per run; the CLI's own config file is only read."""

    def user_document(self, env: Mapping[str, str]) -> dict[str, Any] | None:
        """The CLI's own config file as read (``{}``: there is none; None: unreadable or damaged)."""
        if self.user_file is None:
            return {}
        path = self.user_file(env)
        if not path.exists() and not path.is_symlink():
            return {}
        try:
            document = self.parse(read_capped(path, MAX_SETTINGS_BYTES).decode("utf-8"))
        except (OSError, ValueError):
            return None  # the CLI's own file; not ours to judge
        return document if isinstance(document, dict) else None

    def existing(self, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
        document = self.user_document(env)
        return find_entry(self.servers(document)) if document else None

    def give(
        self, env: Mapping[str, str], server: ServerChoice, session_dir: Path, per_run_env: Mapping[str, str]
    ) -> Given:
        self.check(env, self.user_document(env) or {})
        args, run_env = self.give_inline(env, PROXY_COMMAND, proxy_env(server, per_run_env))
        return Given([], args, run_env)

    def doctor(self, env: Mapping[str, str]) -> Finding:
        return Finding("ok", self.says)

    def after_run(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        return []  # nothing was written

    def finish(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        return []


def giver(shape: McpShape) -> McpGiver:
    """The runtime object that carries out an adapter's ``mcp``."""
    values = {f.name: getattr(shape, f.name) for f in fields(shape)}
    if isinstance(shape, HomePerRun):
        from waaah_agent.runtime.mcp.cli_home import PerRunHome  # it builds on this module

        return PerRunHome(**values)
    if isinstance(shape, FilePerRun):
        return PerRunConfig(**values)
    return InlineGiver(**values)


def write_hooks(hooks: HooksPerRun, session_dir: Path) -> list[str]:
    """Write the run's hook settings (each hook runs ``python -m waaah_agent.runtime.mcp.hook
    <cli>``, which appends the event to the session inbox); returns the CLI's arguments."""
    command = " ".join([sys.executable, "-m", "waaah_agent.runtime.mcp.hook", hooks.cli])
    entries = {name: [{"hooks": [{"type": "command", "command": command}]}] for name in hooks.events}
    path = session_dir / f"{hooks.cli}-settings.json"
    atomic_write(path, json.dumps({"hooks": entries}, indent=2) + "\n", 0o600)
    return [hooks.flag, str(path)]
