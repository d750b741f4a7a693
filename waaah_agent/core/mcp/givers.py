"""How a CLI is given the waaah MCP server, as data its adapter declares (``Adapter.mcp``).

Pure: each shape names what to write or pass and where; runtime/mcp/givers.py carries it out
(reads the user's files, writes the run's, removes them at the end). The user's own files are
written only by `waaah mcp install`, through :class:`Persistent`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from waaah_agent.core.nesting import loads_json

#: (proxy command, the proxy's environment) -> a JSON object: the entry under
#: ``mcpServers.waaah``, or a whole per-run config document.
Document = Callable[[list[str], dict[str, str]], dict[str, Any]]


@dataclass(frozen=True)
class Persistent:
    """Where a CLI keeps MCP servers for every run of it, and its waaah entry there."""

    #: The user's settings file, from the environment.
    path: Callable[[Mapping[str, str]], Path]
    #: The entry under ``mcpServers.waaah``.
    entry: Document
    #: The largest file read (a settings file that keeps the CLI's history too is large).
    limit: int = 4 * 1024 * 1024
    #: The CLI reads ``//`` and ``/* */`` comments in it (a rewrite would lose them: refused).
    comments: bool = False


@dataclass(frozen=True)
class HomePerRun:
    """A home of the CLI's own per run: the user's folder linked in, its settings file the
    user's with the waaah entry and ``run_settings`` (runtime/mcp/cli_home.py)."""

    #: The variable that moves the CLI's home.
    home_var: str
    #: The CLI's folder in a home.
    folder: str
    #: The entry under ``mcpServers.waaah``.
    entry: Document
    #: Settings of every supervised run besides the entry, as paths into the settings document.
    run_settings: Mapping[tuple[str, ...], Any] = field(default_factory=dict)
    #: The entry a user may ask to keep in their own settings (`waaah mcp install`).
    persistent: Persistent | None = None
    #: The CLI reads comments in its settings file (gemini does).
    comments: bool = False


@dataclass(frozen=True)
class FilePerRun:
    """A config file per run in the session folder, named to the CLI by a flag."""

    #: The flag that names the file, e.g. ``--mcp-config``.
    flag: str
    #: The file's document.
    document: Document
    #: Arguments given with it, e.g. a flag that allows the server's tools.
    extra_args: tuple[str, ...] = ()
    #: A file of the CLI's own that may hold a waaah entry; only its URL is used.
    user_file: Callable[[Mapping[str, str]], Path] | None = None
    #: The largest ``user_file`` read.
    user_limit: int = 4 * 1024 * 1024
    #: The entry a user may ask to keep in their own settings (`waaah mcp install`).
    persistent: Persistent | None = None


#: (the CLI's environment, proxy command, the proxy's environment) -> (arguments for the CLI,
#: variables for its environment); raises ``ConfigRefused`` when what the user set cannot be
#: combined with it.
Inline = Callable[[Mapping[str, str], list[str], dict[str, str]], tuple[list[str], dict[str, str]]]


@dataclass(frozen=True)
class GivenInline:
    """Given per run on the command line or in the environment: nothing is written."""

    give_inline: Inline
    #: What `waaah doctor` says of it.
    says: str
    #: The CLI's own config file that may hold a waaah entry (read, never written).
    user_file: Callable[[Mapping[str, str]], Path] | None = None
    #: Its text -> the document (JSON unless told).
    parse: Callable[[str], Any] = loads_json
    #: The document -> its MCP servers in the ``{"mcpServers": {...}}`` shape (only the waaah
    #: entry's URL is used).
    servers: Callable[[dict[str, Any]], dict[str, Any]] = lambda doc: {}
    #: Raises ``ConfigRefused`` when the user's document holds what the CLI cannot combine with ours.
    check: Callable[[Mapping[str, str], dict[str, Any]], None] = lambda env, doc: None
    #: No entry is kept in the user's own files.
    persistent: Persistent | None = None


@dataclass(frozen=True)
class HooksPerRun:
    """Hooks given per run in a settings file, each appending the event to the session inbox."""

    cli: str
    #: The flag that names the settings file.
    flag: str
    #: The hook events to report.
    events: tuple[str, ...]


McpShape = HomePerRun | FilePerRun | GivenInline
