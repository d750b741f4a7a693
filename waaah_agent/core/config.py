"""The config file (``~/.config/waaah-agent/config.toml``): what each key means, checked.

Every key stands for an environment variable of waaah, so the order of precedence stays one
rule everywhere: a flag, else the variable, else the config file, else the default. Pure: the
file's TOML text in, the variables it sets (or one line naming the key and what is wrong) out.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from waaah_agent.core.nesting import TooDeep, loads_toml


@dataclass(frozen=True)
class Key:
    variable: str
    kind: str  # "url", "text", "path", "seconds", "count", "dollars", "list", "agents"
    help: str
    example: str


KEYS: dict[str, Key] = {
    "server": Key("WAAAH_SERVER_URL", "url", "the WAAAH server", '"http://localhost:3456"'),
    "api_key_file": Key(
        "WAAAH_API_KEY_FILE",
        "path",
        "a file (mode 0600) holding the WAAAH API key",
        '"~/.config/waaah-agent/api-key"',
    ),
    "heartbeat": Key(
        "WAAAH_HEARTBEAT", "seconds", "seconds idle at the prompt before a heartbeat prompt", "120"
    ),
    "stall_timeout": Key("WAAAH_STALL_TIMEOUT", "seconds", "seconds without progress before Esc", "900"),
    "max_tokens": Key("WAAAH_MAX_TOKENS", "count", "the session's token budget", "5000000"),
    "max_cost": Key("WAAAH_MAX_COST", "dollars", "the session's cost budget, US dollars", "20.0"),
    "run_max_tokens": Key("WAAAH_RUN_MAX_TOKENS", "count", "each `waaah run`'s token budget", "500000"),
    "run_max_cost": Key("WAAAH_RUN_MAX_COST", "dollars", "each `waaah run`'s cost budget, US dollars", "1.0"),
    "prices": Key(
        "WAAAH_PRICES",
        "path",
        "the price table (US dollars per million tokens per model) for max_cost",
        '"~/.config/waaah-agent/prices.toml"',
    ),
    "notify": Key("WAAAH_NOTIFY", "list", "apprise URLs for alerts", '["ntfys://ntfy.sh/my-night"]'),
    "record_budget_mb": Key(
        "WAAAH_RECORD_BUDGET_MB", "count", "disk for a session's logs and record, MB", "200"
    ),
    "default_agent": Key("WAAAH_DEFAULT_AGENT", "text", "`waaah run`'s CLI when none is named", '"claude"'),
    "fallback": Key("WAAAH_FALLBACK", "agents", "`waaah run`'s fallback chain", '["claude", "gemini"]'),
    "routes": Key(
        "WAAAH_ROUTES",
        "path",
        "the routing table of `waaah route` and `waaah run --role`",
        '"~/.config/waaah-agent/routes.json"',
    ),
    "providers": Key(
        "WAAAH_PROVIDERS",
        "path",
        "`waaah run`'s providers file: each CLI's model and aliases",
        '"~/.config/waaah-agent/providers.yaml"',
    ),
    "breaker_cooldown": Key(
        "WAAAH_BREAKER_COOLDOWN", "seconds", "seconds a tripped CLI rests before one probe", "60"
    ),
}


class ConfigProblem(ValueError):
    """One line: the key (or the file) and what is wrong with it."""


def parse(text: str) -> dict[str, str]:
    """The variables the config sets, as strings."""
    try:
        data = loads_toml(text)
    except TooDeep as err:
        raise ConfigProblem(str(err)) from None
    except ValueError as err:  # tomllib.TOMLDecodeError
        raise ConfigProblem(f"not TOML ({err})") from None
    found: dict[str, str] = {}
    for name, value in data.items():
        key = KEYS.get(name)
        if key is None:
            close = difflib.get_close_matches(name, KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(KEYS)})"
            raise ConfigProblem(f"unknown key {name!r}{hint}")
        found[key.variable] = _value(name, key, value)
    return found


def _value(name: str, key: Key, value: Any) -> str:
    wrong = ConfigProblem(
        f"{name} = {value!r:.60}: expected {_expected(key.kind)}, e.g. {name} = {key.example}"
    )
    if key.kind in ("url", "text", "path"):
        if not isinstance(value, str) or not value.strip() or "\n" in value:
            raise wrong
        if key.kind == "url" and not value.startswith(("http://", "https://")):
            raise wrong
        return value.strip()
    if key.kind in ("seconds", "count", "dollars"):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1e12
        if not ok or (key.kind == "count" and not float(value).is_integer()):
            raise wrong
        return str(int(value)) if key.kind == "count" else str(float(value))
    if not isinstance(value, list) or not all(
        isinstance(v, str) and v.strip() and " " not in v.strip() for v in value
    ):
        raise wrong
    if key.kind == "agents" and not value:
        return "none"  # `fallback = []`: no fallback at all, not the default chain
    return (" " if key.kind == "list" else ",").join(v.strip() for v in value)


def _expected(kind: str) -> str:
    return {
        "url": "an http(s) URL in quotes",
        "text": "a word in quotes",
        "path": "a path in quotes",
        "seconds": "a number of seconds above 0",
        "count": "a whole number above 0",
        "dollars": "an amount of US dollars above 0",
        "list": "a list of URLs in quotes",
        "agents": "a list of CLI names in quotes",
    }[kind]


def template() -> str:
    """A commented config file with every key, for `waaah config --example`."""
    lines = ["# waaah's config: each key stands for a variable; a flag or the variable wins over it."]
    for name, key in KEYS.items():
        lines.append(f"# {key.help} ({key.variable})\n# {name} = {key.example}")
    return "\n".join(lines) + "\n"
