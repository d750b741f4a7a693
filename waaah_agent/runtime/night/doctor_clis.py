"""`waaah doctor --json`, per CLI: available, version and how long the version call took,
session support, circuit breaker and quota state. No model is called."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from waaah_agent import adapters
from waaah_agent.runtime.night.doctor import Check, default_env, timed_version
from waaah_agent.runtime.oneshot import routes
from waaah_agent.runtime.workspace import git_root


def clis_json(names: list[str], env: Mapping[str, str], workspace: Path) -> dict[str, dict[str, Any]]:
    known = adapters.registry()
    found = routes.availability(names, env, git_root(workspace) or workspace)
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        adapter, now = known[name], found[name]
        binary = now.details["installed"]
        version, took = timed_version(binary) if binary else (None, None)
        headless = adapter.headless
        out[name] = {
            "available": now.usable,
            "unavailable_because": now.reason or None,
            "installed": binary,
            "version": version,
            "version_ms": took,
            "credentials": now.details["credentials"],
            "sessions": {
                "run_resume": headless is not None,  # waaah run --session
                "id_chosen_by_waaah": bool(headless and headless.own_session_ids),
                "supervised_resume": adapter.interactive,  # waaah agent --resume
            },
            "breaker": now.details["breaker"],
            "quota": now.details["quota"],
        }
    return out


def doctor_json(checks: list[Check], agents: list[str] | None, workspace: Path) -> str:
    """`waaah doctor --json`: ``{"checks": [...], "clis": {<cli>: {...}}}``."""
    names = agents or [n for n, a in adapters.registry().items() if not a.simulated]
    found = clis_json(sorted(names), default_env(), workspace)
    return json.dumps({"checks": [c.to_json() for c in checks], "clis": found}, indent=2)
