"""`waaah service install|status|remove`: a crew of supervisors that come back after a reboot."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from waaah_agent import settings
from waaah_agent.commands.options import CLI_NAMES, JsonOption, WorkflowOption, WorkspaceOption
from waaah_agent.commands.running import _exit

service_app = typer.Typer(
    name="service",
    help="Keep agents that come back after a reboot.\n\n"
    "Instances of one systemd user template unit (a launchd agent each on macOS).",
    no_args_is_help=True,
)


@service_app.command()
def install(
    start: Annotated[str, typer.Option(*CLI_NAMES, help="The agent CLI, as for waaah agent.")],
    workflow: WorkflowOption = settings.DEFAULT_WORKFLOW,
    workspace: WorkspaceOption = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="The instance's name (waaah@NAME.service). Default: <agent>-<workflow>-<folder>."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=1,
            max=65535,
            help="Its /healthz, /readyz and /metrics port. Default: the first free one from 9470.",
        ),
    ] = None,
    notify: Annotated[
        list[str] | None,
        typer.Option("--notify", metavar="URL", help="Alerts (kept in the instance's 0600 settings file)."),
    ] = None,
) -> None:
    """Install one agent of the crew as a service.

    Install one agent of the crew: `waaah agent --resume-or-start` for this CLI, workflow and
    workspace, enabled and started. Install as many as you like (one per workspace and workflow).
    Example: waaah service install --start=gemini --as=waaah-orc --workspace ~/src/app"""
    from waaah_agent import adapters
    from waaah_agent.core.night.service import Instance, NameProblem, Service, checked_name, instance_name
    from waaah_agent.errors import UsageError
    from waaah_agent.runtime.night import service
    from waaah_agent.runtime.workspace import find_workflow, git_root

    def go() -> int:
        if start not in adapters.names():
            raise UsageError(f"--start {start!r}: choose one of {', '.join(adapters.names())}")
        folder = (workspace or Path.cwd()).resolve()
        if not folder.is_dir():
            raise UsageError(f"--workspace {workspace}: no such folder (the service runs the agent there)")
        folder = git_root(folder) or folder
        try:
            str(folder).encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                f"--workspace {folder!s}: its path is not UTF-8, which systemd requires"
            ) from None
        # The workflow the agent will be given, found as `waaah agent` finds it (its name, never
        # a path): one it would refuse is refused now, before a file is written.
        as_name = find_workflow(workflow, folder).name
        try:
            unit_name = checked_name(name) if name else instance_name(start, as_name, folder)
        except NameProblem as err:
            raise UsageError(f"--name: {err}" if name else f"{err}; give --name") from None
        path = os.environ.get("PATH", "/usr/bin:/bin")
        if sys.platform == "darwin":
            launchd = Service(unit_name, service.waaah_path(), start, as_name, folder, path)
            variables = {"WAAAH_NOTIFY": " ".join(notify)} if notify else {}
            lines = service.install_launchd(launchd, variables, os.environ)
        else:
            port = metrics_port or service.new_port(os.environ, unit_name)
            unit = Instance(unit_name, start, as_name, folder, port, tuple(notify or ()))
            lines = service.install(unit, service.waaah_path(), path, os.environ)
        for line in lines:
            print(f"waaah: {line}")
        return 0

    _exit(go)


@service_app.command()
def status(
    name: Annotated[str | None, typer.Argument(help="One service's name; none: list them all.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Show every agent of the crew with its state.

    Every agent of the crew with its state (systemd's, and what its /readyz says), or what
    systemd says of one."""
    from waaah_agent.runtime.night import service

    def go() -> int:
        if name is not None:
            ok, said = service.status(name, os.environ)
            print(_shown(said))
            return 0 if ok else 3
        rows = service.status_all(os.environ)
        if as_json:
            print(json.dumps([asdict(r) for r in rows], indent=2))
            return 0
        if not rows:
            print("waaah: no agents installed (waaah service install --start=... adds one)")
            return 0
        for r in rows:
            print(
                _shown(
                    f"waaah@{r.name}.service  {r.systemd}  {r.ready}  "
                    f"({r.agent}, {r.workflow}, {r.workspace}, metrics :{r.port})"
                )
            )
        return 0

    _exit(go)


def _shown(text: str) -> str:
    """Control characters from files (a folder's name, systemctl's answer) spelled out, never
    sent to the terminal; line breaks kept."""
    return "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in text)


@service_app.command()
def remove(name: Annotated[str, typer.Argument(help="The service's name, as status lists it.")]) -> None:
    """Stop, disable and remove one agent of the crew.

    Its settings go; the others and every session stay."""
    from waaah_agent.runtime.night import service

    def go() -> int:
        for line in service.remove(name, os.environ):
            print(f"waaah: {line}")
        return 0

    _exit(go)
