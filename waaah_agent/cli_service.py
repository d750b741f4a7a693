"""`waaah service install|status|remove`: a supervisor that comes back after a reboot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from waaah_agent.cli_run import _exit

service_app = typer.Typer(
    name="service",
    help="A supervisor that comes back after a reboot (a systemd user unit; launchd on macOS).",
    no_args_is_help=True,
)


@service_app.command()
def install(
    start: Annotated[str, typer.Option("--start", help="The agent CLI, as for waaah agent.")],
    workflow: Annotated[str, typer.Option("--as", help="The workflow.")] = "waaah-orc",
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Default: waaah-<agent>-<workflow>-<folder>.")
    ] = None,
    notify: Annotated[
        list[str] | None, typer.Option("--notify", metavar="URL", help="Alerts (kept in the unit file).")
    ] = None,
) -> None:
    """Write the unit that runs `waaah agent --start=... --as=... --resume-or-start` in the
    workspace, enable it and start it. Example: waaah service install --start=gemini --as=waaah-orc"""
    from waaah_agent import adapters
    from waaah_agent.core.service import Service, service_name
    from waaah_agent.errors import UsageError
    from waaah_agent.runtime import service
    from waaah_agent.runtime.workspace import git_root

    def go() -> int:
        if start not in adapters.names():
            raise UsageError(f"--start {start!r}: choose one of {', '.join(adapters.names())}")
        folder = (workspace or Path.cwd()).resolve()
        if not folder.is_dir():
            raise UsageError(f"--workspace {workspace}: no such folder (the service runs the agent there)")
        folder = git_root(folder) or folder
        extra = tuple(x for url in notify or [] for x in ("--notify", url))
        unit = Service(
            name or service_name(start, workflow, folder),
            service.waaah_path(),
            start,
            workflow,
            folder,
            os.environ.get("PATH", "/usr/bin:/bin"),
            extra,
        )
        for line in service.install(unit, os.environ):
            print(f"waaah: {line}")
        return 0

    _exit(go)


@service_app.command()
def status(name: Annotated[str, typer.Argument(help="The service's name, as install printed it.")]) -> None:
    """What systemd says of the service."""
    from waaah_agent.runtime import service

    def go() -> int:
        ok, said = service.status(name, os.environ)
        print(said)
        return 0 if ok else 3

    _exit(go)


@service_app.command()
def remove(name: Annotated[str, typer.Argument(help="The service's name.")]) -> None:
    """Stop and disable the service and remove its unit file (its sessions stay)."""
    from waaah_agent.runtime import service

    def go() -> int:
        for line in service.remove(name, os.environ):
            print(f"waaah: {line}")
        return 0

    _exit(go)
