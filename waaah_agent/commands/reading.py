"""`waaah sessions`, `status` and `replay`: the commands that read what sessions left behind."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from waaah_agent.commands.options import POSITIVE
from waaah_agent.commands.running import _exit, _masked
from waaah_agent.errors import ExitCode


def sessions(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """List this workspace's sessions and runs as a tree.

    Supervised sessions and `waaah run` runs of this workspace as a tree, newest day first:
    id, kind, agent, status, duration (runs), tokens in/out, first prompt line. `waaah run --list ID
    --paths` shows one tree with each run's log path. Example: waaah sessions --json"""
    from waaah_agent.runtime.oneshot import run_trees, runlog
    from waaah_agent.runtime.private import check_state
    from waaah_agent.runtime.workspace import workspace_root

    def show() -> int:
        root = workspace_root(workspace)
        check_state(root / ".waaah")  # someone else's state: one line, nothing of it shown
        run_trees.check_log_dir(root, write=False)  # WAAAH_LOG_DIR
        roots = runlog.tree(root)
        shown = json.dumps([r.to_json() for r in roots], indent=2) if as_json else runlog.render_tree(roots)
        print(_masked(shown))
        return 0

    _exit(show)


def status(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show what the running (else the newest) session is doing.

    Exit code 7 when there is none."""
    from waaah_agent.runtime.night import report

    def show() -> int:
        rows = report.reports_for(workspace or Path.cwd())
        chosen = [r for r in rows if r.live] or rows[:1]
        if not chosen:
            print(
                "waaah: no sessions in this workspace; start one with: waaah agent --start=gemini",
                file=sys.stderr,
            )
            return ExitCode.NO_SESSION
        if as_json:
            print(_masked(json.dumps([r.to_json() for r in chosen], indent=2)))
        else:
            print(_masked("\n\n".join(report.detail(r) for r in chosen)))
        return 0

    _exit(show)


def replay(
    session: Annotated[
        str | None,
        typer.Argument(help="The session id (or its start), as `waaah sessions` shows; default the newest."),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at", help="Where to start: +2h15m into the session, a time (03:12), or an ISO date and time."
        ),
    ] = None,
    speed: Annotated[
        float, typer.Option("--speed", callback=POSITIVE, metavar="N>0", help="Play N times as fast.")
    ] = 1.0,
    out: Annotated[
        str | None,
        typer.Option(
            "--out", help="Write the asciicast to this file (- for standard output) instead of playing it."
        ),
    ] = None,
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
) -> None:
    """Replay a session's screen from any point of the night.

    Replay a session's screen record from any point, through asciinema's player: the whole night,
    its compressed parts included. Example: waaah replay --at 03:12 --speed 4"""
    from waaah_agent.runtime.night.replay import replay_session

    _exit(lambda: replay_session(workspace or Path.cwd(), session, at, speed, out))
