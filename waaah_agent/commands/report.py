"""`waaah report`: the night at a glance, in the terminal and as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from waaah_agent.commands.running import _exit, _masked


def report(
    session: Annotated[
        str | None,
        typer.Argument(
            help="A session id (or a unique start of one) as `waaah sessions` lists it; default: the newest."
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="LENGTH",
            help="Every session active in this window instead. Example: --since 12h",
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Also write the page here (no network needed to view it). Example: --html night.html",
        ),
    ] = None,
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
) -> None:
    """Show the night at a glance: time, tasks, nudges, restarts.

    The night at a glance: time working, in the loop, idle, limited, restarting; tasks served,
    nudges and whether each was answered, restarts and their causes, tokens. Exit code 7 when
    there is no such session."""
    from waaah_agent.runtime.night import files as night_files

    def go() -> int:
        print(_masked(night_files.report(workspace or Path.cwd(), session, since, html)))
        return 0

    _exit(go)
