"""`waaah route` and `waaah quota`, and the `waaah run` options they share: which CLI for a
role, given what is installed, logged in, not broken and not rate limited right now."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from waaah_agent import settings
from waaah_agent.commands.options import NOT_NEGATIVE, _flag_only
from waaah_agent.commands.running import _exit, _masked
from waaah_agent.core.oneshot.routing import ROLES, Route

ROLE_HELP = f"A role from the routing table ({'|'.join(ROLES)}, or one a table file adds); see `waaah route`."

#: `waaah run --role`: the CLI and its fallbacks come from `waaah route` (--agent and --fallback win).
RoleOption = Annotated[
    str | None,
    typer.Option(
        "--role",
        metavar="ROLE",
        help=ROLE_HELP + " Used when no --agent is given. Example: --role reviewer",
    ),
]
#: `waaah run --breaker-cooldown`.
CooldownOption = Annotated[
    float | None,
    typer.Option(
        "--breaker-cooldown",
        envvar=settings.BREAKER_COOLDOWN_SECONDS,
        callback=lambda ctx, param, value: NOT_NEGATIVE(ctx, param, _flag_only(ctx, param, value)),
        metavar="SECONDS>=0",
        help=f"Seconds a CLI's circuit breaker stays open before one run probes it (default "
        f"{settings.BREAKER_COOLDOWN:g}). Example: --breaker-cooldown 300",
    ),
]


def route(
    role: Annotated[str, typer.Option("--role", metavar="ROLE", help=ROLE_HELP)],
    task: Annotated[
        str, typer.Option("--task", help="What the work is; its words may pick another chain.")
    ] = "",
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Recommend a CLI and its fallbacks for a role.

    Recommend a CLI and its fallback chain for a role, from the routing table and what is
    available now (installed, credentials, circuit breaker, usage limit). No model is called.
    Exit code 15 when no CLI of the chain is available. Example: waaah route --role reviewer --json
    """
    from waaah_agent.errors import ExitCode
    from waaah_agent.runtime.oneshot import routes
    from waaah_agent.runtime.workspace import git_root

    def go() -> int:
        start = (workspace or Path.cwd()).resolve()
        found, path = routes.route(role, task, _env(), git_root(start) or start)
        if as_json:
            print(
                _masked(json.dumps({**found.to_json(), "table": str(path) if path else "bundled"}, indent=2))
            )
        else:
            print(_masked(_route_text(found, path)))
        return 0 if found.agent else ExitCode.CRASH

    _exit(go)


def _route_text(found: Route, path: Path | None) -> str:
    lines = [
        f"{found.role}: {found.agent or 'no CLI available'}"
        + (f", then {', '.join(found.fallback)}" if found.fallback else ""),
        f"  why: {found.why or '-'} (table: {path or 'bundled'})",
    ]
    lines += [f"  skipped {a.agent}: {a.reason}" for a in found.unavailable]
    if found.agent:
        lines.append(f'  run it: waaah run --role {found.role} "..."')
    return "\n".join(lines)


def quota(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show the last usage limit known per CLI.

    The last usage limit known per CLI (from `waaah run` results and this workspace's
    supervised sessions) and whether it still holds. No model is called."""
    from waaah_agent import adapters
    from waaah_agent.core import quota as Q
    from waaah_agent.runtime import quota as state
    from waaah_agent.runtime.workspace import git_root

    def go() -> int:
        start = (workspace or Path.cwd()).resolve()
        names = [n for n, a in adapters.registry().items() if not a.simulated]
        found = state.states(sorted(names), git_root(start) or start, datetime.now().astimezone())
        if as_json:
            print(_masked(json.dumps(found, indent=2)))
        else:
            print(_masked("\n".join(Q.line(n, s) for n, s in found.items())))
        return 0

    _exit(go)


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def _from_env(ctx: typer.Context, name: str) -> bool:
    """Whether the option ``name`` got its value from its variable (not a flag)."""
    return getattr(ctx.get_parameter_source(name), "name", "") == "ENVIRONMENT"
