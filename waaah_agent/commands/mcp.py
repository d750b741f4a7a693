"""`waaah mcp install` / `uninstall`: a waaah entry in a CLI's own settings, when the user asks.

`waaah agent` never needs one (each run gets the server per run); this is for plain runs of the
CLI elsewhere. Each edit keeps every other key, writes a timestamped backup first and replaces
the file atomically (runtime/mcp_setup.py).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from waaah_agent import settings
from waaah_agent.commands.options import CLI_NAMES, _flag_only, api_key_option, server_option
from waaah_agent.commands.running import _exit
from waaah_agent.errors import UsageError

if TYPE_CHECKING:
    from waaah_agent.core.mcp.givers import Persistent

mcp_app = typer.Typer(
    name="mcp",
    help="Keep a waaah MCP entry in a CLI's own settings.\n\n"
    "For plain runs of the CLI (waaah agent needs none).",
    no_args_is_help=True,
)

AGENT = typer.Option(*reversed(CLI_NAMES), help="The CLI whose settings get the entry: gemini or claude.")
REPLACE = typer.Option(
    "--replace",
    help='Also replace or remove a "waaah" entry that waaah did not write (yours, or another server\'s).',
)


def _persistent(agent: str) -> Persistent:
    from waaah_agent import adapters

    adapter = adapters.registry().get(agent)
    giver = adapter.mcp if adapter is not None else None
    if giver is None or giver.persistent is None:
        have = [n for n, a in adapters.registry().items() if a.mcp is not None and a.mcp.persistent]
        raise UsageError(f"no MCP settings of {agent} that waaah can edit; choose one of: {', '.join(have)}")
    return giver.persistent


@mcp_app.command()
def install(
    agent: Annotated[str, AGENT] = "gemini",
    server: Annotated[
        str | None,
        server_option(f"WAAAH server URL (default {settings.DEFAULT_SERVER_URL})."),
    ] = None,
    api_key: Annotated[
        str | None,
        api_key_option("Written into the entry (the file becomes 0600)."),
    ] = None,
    replace: Annotated[bool, REPLACE] = False,
) -> None:
    """Add (or update) the waaah entry in a CLI's settings.

    In the CLI's own settings file, with a backup."""
    from waaah_agent.runtime.mcp import setup as mcp_setup

    def go() -> int:
        persistent = _persistent(agent)
        env = dict(os.environ)
        given = settings.waaah_server(server, api_key, env)
        entry = persistent.entry(mcp_setup.PROXY_COMMAND, settings.proxy_env(given.url, given.api_key))
        choice = mcp_setup.ServerChoice(given.url, given.api_key, "--server" if server else "default")
        notes = mcp_setup.install_entry(
            persistent.path(env),
            entry,
            choice,
            datetime.now(),
            persistent.limit,
            persistent.comments,
            replace,
        )
        for note in notes or [f"{persistent.path(env)} already holds this waaah entry"]:
            print(f"waaah: {note}")
        return 0

    _exit(go)


@mcp_app.command()
def uninstall(agent: Annotated[str, AGENT] = "gemini", replace: Annotated[bool, REPLACE] = False) -> None:
    """Remove the waaah entry from a CLI's settings.

    From the CLI's own settings file, with a backup."""
    from waaah_agent.runtime.mcp import setup as mcp_setup

    def go() -> int:
        persistent = _persistent(agent)
        path = persistent.path(dict(os.environ))
        notes = mcp_setup.remove_entry(path, datetime.now(), persistent.limit, persistent.comments, replace)
        for note in notes or [f"{path} holds no waaah entry"]:
            print(f"waaah: {note}")
        return 0

    _exit(go)


@mcp_app.command()
def settle() -> None:
    """Carry back what gemini wrote in per-run homes.

    Carry back what gemini wrote in the per-run homes no running session holds (left by a
    killed supervisor, or kept because something could not be carried), then remove them. A file
    that differs from yours is put beside it (NAME.waaah-<home>). Exit 1 when one is still kept."""
    from waaah_agent import adapters
    from waaah_agent.core.mcp.givers import HomePerRun
    from waaah_agent.runtime.mcp import homes
    from waaah_agent.runtime.mcp.cli_home import PerRunHome
    from waaah_agent.runtime.mcp.givers import giver

    def go() -> int:
        env = dict(os.environ)
        givers = [giver(a.mcp) for a in adapters.registry().values() if isinstance(a.mcp, HomePerRun)]
        notes = [
            note
            for home in givers
            if isinstance(home, PerRunHome)
            for note in home.settle_leftovers(env, everything=True)
        ]
        for note in notes or [f"no home left to settle in {homes.homes_root(env)}"]:
            print(f"waaah: {note}")
        return 1 if homes.leftovers(env) else 0

    _exit(go)


def mcp_proxy(
    server: Annotated[
        str | None,
        server_option(f"WAAAH server URL (default {settings.DEFAULT_SERVER_URL})."),
    ] = None,
    api_key: Annotated[
        str | None,
        api_key_option("API key."),
    ] = None,
    agent_id: Annotated[
        str | None,
        typer.Option(
            "--agent-id", envvar=settings.AGENT_ID, callback=_flag_only, help="Agent id filled into calls."
        ),
    ] = None,
    inbox: Annotated[
        Path | None,
        typer.Option(
            "--inbox",
            envvar=settings.INBOX,
            callback=_flag_only,
            help="File that receives one JSON line per tool call.",
        ),
    ] = None,
) -> None:
    """Serve the WAAAH agent tools over stdio MCP.

    Each call is forwarded to the WAAAH server."""
    from waaah_agent.runtime.mcp import proxy

    given = settings.proxy_settings(os.environ, server, api_key, agent_id, inbox)
    _exit(lambda: proxy.run(given))
