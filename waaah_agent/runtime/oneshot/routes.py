"""`waaah route` and `waaah run --role`: the routing table (the bundled one, with the roles of a
table file on top) and the live availability of each CLI: installed, credentials present,
circuit breaker letting runs through, no usage limit in force. Nothing calls a model.

The table file, the first that exists: ``$WAAAH_ROUTES``, else ``.agent/routes.json`` in the
workspace, else ``routes.json`` in the user's config folder (``~/.config/waaah-agent/``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from waaah_agent import adapters, settings
from waaah_agent.core import quota as quota_rules
from waaah_agent.core.nesting import loads_json
from waaah_agent.core.oneshot import routing
from waaah_agent.core.oneshot.breaker import Breaker
from waaah_agent.core.oneshot.routing import Availability, Route
from waaah_agent.errors import UsageError
from waaah_agent.runtime import clis, config_file, quota
from waaah_agent.runtime.oneshot import breakers
from waaah_agent.safe_read import read_text

TABLE_CAP = 256 * 1024


def user_table() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir("waaah-agent")) / "routes.json"


def table_file(env: Mapping[str, str], workspace: Path) -> Path | None:
    """The table file in use (None: the bundled table alone); a named one must exist."""
    if env.get(settings.ROUTES):
        named = Path(env[settings.ROUTES]).expanduser()
        if not named.exists():
            raise UsageError(f"{config_file.origin(settings.ROUTES)} names {named}, which does not exist")
        return named
    for candidate in (workspace / ".agent" / "routes.json", user_table()):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return None


def load(env: Mapping[str, str], workspace: Path) -> tuple[dict[str, routing.Role], Path | None]:
    """The roles in force and the file that changed them; a bad file is a one-line UsageError."""
    known = {n for n, a in adapters.registry().items() if a.headless is not None}
    roles = routing.parse(routing.DEFAULT_TABLE, known, "the bundled routing table")
    path = table_file(env, workspace)
    if path is None:
        return roles, None
    try:
        data = loads_json(read_text(path, TABLE_CAP))
        return routing.merged(roles, routing.parse(data, known, str(path))), path
    except routing.BadTable as bad:
        raise UsageError(f"routing table {bad}") from None
    except (OSError, ValueError) as bad:
        why = bad.strerror if isinstance(bad, OSError) and bad.strerror else str(bad)
        raise UsageError(f"routing table {path} cannot be read: {why}; fix it or remove it") from None


def availability(
    agents: list[str], env: Mapping[str, str], workspace: Path, cooldown: float | None = None
) -> dict[str, Availability]:
    """Each CLI's availability now (no model call; the version is not asked either)."""
    now = time.time()
    store = breakers.BreakerStore(config=settings.breaker_config(env, cooldown))
    limits = quota.states(agents, workspace, datetime.now().astimezone())
    known = adapters.registry()
    out = {}
    for name in agents:
        adapter = known[name]
        found = clis.find(adapter, env)
        credentials = (  # never said of a CLI that is not installed
            "not checked"
            if not adapter.interactive or found is None
            else "missing"
            if adapter.needs_login(env)
            else "found"
        )
        try:
            breaker = store.get(name)
        except (OSError, ValueError):
            breaker = Breaker(config=store.config)
        reasons = [
            *(["not installed"] if found is None else []),
            *(["no credentials"] if credentials == "missing" else []),
            *([breakers.breaker_line(name, breaker, now)] if not breaker.allows(now) else []),
            *(
                [f"usage limit until {quota_rules.until(limits[name])}"]
                if limits[name]["state"] == "limited"
                else []
            ),
        ]
        details = {
            "installed": found,
            "credentials": credentials,
            "breaker": breakers.state_json(breaker, now),
            "quota": limits[name],
        }
        out[name] = Availability(name, not reasons, "; ".join(reasons), details)
    return out


def route(
    role: str, task: str, env: Mapping[str, str], workspace: Path, cooldown: float | None = None
) -> tuple[Route, Path | None]:
    roles, path = load(env, workspace)
    if role not in roles:
        raise UsageError(f"unknown role '{role}'; choose one of: {', '.join(roles)}")
    chain, _ = routing.chain_for(roles[role], task)
    found = availability(list(chain), env, workspace, cooldown)
    return routing.recommend(role, roles[role], task, found), path


def for_run(
    role: str, task: str, env: Mapping[str, str], workspace: Path, cooldown: float | None = None
) -> tuple[str, list[str], str]:
    """`waaah run --role`: the first CLI, its fallbacks, and a note for the log. With no CLI
    usable, the role's chain as it is (the run then says why each one failed)."""
    found, path = route(role, task, env, workspace, cooldown)
    source = f" ({path})" if path else ""
    if found.agent is None:
        return (
            found.chain[0],
            list(found.chain[1:]),
            f"role {role}{source}: no CLI is available; trying the chain",
        )
    return found.agent, list(found.fallback), f"role {role}{source}: {found.agent} ({found.why})"


def default_fallback(
    primary: str, env: Mapping[str, str], workspace: Path, cooldown: float | None = None
) -> list[str]:
    """`waaah run`'s fallback chain when none is given: the other CLIs usable now (installed,
    credentials found, breaker closed, no usage limit in force), in the bundled order."""
    from waaah_agent.core.oneshot.resilience import default_chain

    others = [n for n, a in adapters.registry().items() if a.headless is not None and n != primary]
    found = availability(others, env, workspace, cooldown)
    return default_chain(primary, {name: state.usable for name, state in found.items()})
