"""The config file, read safely and laid under the environment (core/config.py says what it holds).

``$WAAAH_CONFIG``, else ``$XDG_CONFIG_HOME/waaah-agent/config.toml`` (default
``~/.config/waaah-agent/config.toml``). The default one missing: nothing is set. Anything else
stops the command with one line naming the file (exit code 2): a file ``$WAAAH_CONFIG`` names
that is not there, a link to nothing, a file another user owns (root aside) or others can write
(it sets the server's address: :func:`~waaah_agent.runtime.private.untrusted`), one that is not a
regular UTF-8 file of at most 1 MB holding the known keys with values of their kind (then the
key and an example too).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

from waaah_agent import settings
from waaah_agent.core.config import KEYS, ConfigProblem, parse
from waaah_agent.errors import UsageError
from waaah_agent.runtime import key_file
from waaah_agent.runtime.private import untrusted
from waaah_agent.safe_read import UnsafeFile, read_capped

CONFIG_VAR = "WAAAH_CONFIG"
CAP = 1024 * 1024
#: The variables the config file set in this process (what `waaah config` calls "config file").
FROM_CONFIG: dict[str, str] = {}
#: The config file they came from.
_SOURCE: list[Path] = []


def path(env: MutableMapping[str, str]) -> Path:
    given = env.get(CONFIG_VAR)
    return Path(given).expanduser() if given else key_file.folder(env) / "config.toml"


def read(env: MutableMapping[str, str]) -> dict[str, str]:
    where = path(env)
    if refused := untrusted(where, root_too=True):
        raise UsageError(f"the config file {refused}")
    try:
        raw = read_capped(where, CAP)
    except FileNotFoundError:
        if os.path.islink(where):  # where the user keeps it is not known: never taken as no config
            raise UsageError(
                f"the config file {where} is a link to {os.path.realpath(where)}, which does not exist; "
                "create that file or remove the link"
            ) from None
        if env.get(CONFIG_VAR):
            raise UsageError(
                f"the config file {where} that {CONFIG_VAR} names does not exist; create it, or fix or "
                f"unset {CONFIG_VAR}"
            ) from None
        return {}
    except UnsafeFile as err:
        raise UsageError(f"the config file {where} {err.reason}; fix or move it") from None
    except OSError as err:
        raise UsageError(f"cannot read the config file {where} ({err.strerror}); fix or move it") from None
    try:
        return parse(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise UsageError(
            f"the config file {where} is not UTF-8 text (byte {err.start}); fix or move it"
        ) from None
    except ConfigProblem as err:
        raise UsageError(f"the config file {where}: {err}") from None


def apply(env: MutableMapping[str, str]) -> None:
    """Set each variable of the config that the environment does not set already."""
    for variable, value in read(env).items():
        if variable not in env:
            env[variable] = value
            FROM_CONFIG[variable] = value
            _SOURCE[:] = [path(env)]


def origin(variable: str) -> str:
    """Where a variable's value came from, for a message: the variable itself, or the config
    file's key that set it (``providers in the config file ~/.config/waaah-agent/config.toml``)."""
    key = next((name for name, k in KEYS.items() if k.variable == variable), None)
    if variable in FROM_CONFIG and _SOURCE and key is not None:
        return f"{key} in the config file {_SOURCE[0]}"
    return variable


def defaults(env: MutableMapping[str, str]) -> dict[str, tuple[str, str]]:
    """Per key, what is in effect when neither the environment nor the config file sets it, and
    where that comes from: waaah's default, or what was typed at an earlier start and kept."""
    from waaah_agent import settings

    kept_server = key_file.read_server(env)
    out = {
        "server": (
            (kept_server, f"typed at an earlier start, kept in {key_file.folder(env) / 'server'}")
            if kept_server
            else (f"none (asked on a terminal; {settings.DEFAULT_SERVER_URL} offered)", "default")
        ),
        "api_key_file": (_kept_key(env), "default"),
        "heartbeat": (f"{settings.HEARTBEAT:g}", "default"),
        "stall_timeout": (f"{settings.STALL_TIMEOUT:g}", "default"),
        "max_tokens": ("none", "default"),
        "max_cost": ("none", "default"),
        "run_max_tokens": ("none", "default"),
        "run_max_cost": ("none", "default"),
        "prices": ("none (costs are not counted)", "default"),
        "notify": ("none (no alerts)", "default"),
        "record_budget_mb": (str(settings.RECORD_BUDGET), "default"),
        "default_agent": (settings.DEFAULT_AGENT, "default"),
        "fallback": ("none", "default"),
        "routes": ("the bundled table (or .agent/routes.json)", "default"),
        "providers": ("the bundled aliases (or providers.yaml)", "default"),
        "breaker_cooldown": (f"{settings.BREAKER_COOLDOWN:g}", "default"),
    }
    return out


def _kept_key(env: MutableMapping[str, str]) -> str:
    """The key file and, masked, the key it keeps (none: said so)."""
    where = key_file.path(env)
    try:
        kept = key_file.read(env)
    except UsageError as err:
        return f"{where} ({err})"
    if not kept:
        return f"{where} (no key kept)"
    return f"{where} (holds a key ending {'*' * 4}{kept[-4:] if len(kept) >= 16 else ''})"


def shown(env: MutableMapping[str, str]) -> list[dict[str, str]]:
    """Each key: its value now and where it came from (the environment, the config file, what
    was typed at an earlier start, waaah's default); never "-"."""
    rows = []
    fallback = defaults(env)
    for name, key in KEYS.items():
        value = (
            settings.private(env, key.variable)
            if key.variable in settings.PRIVATE
            else env.get(key.variable, "")
        )
        source = "config file" if key.variable in FROM_CONFIG else "environment"
        if not value:
            value, source = fallback.get(name, ("none", "default"))
        if name == "notify" and source != "default":
            value = " ".join(url.split("://", 1)[0] + "://..." for url in value.split())  # tokens stay out
        rows.append({"key": name, "variable": key.variable, "value": value, "from": source})
    return rows
