"""opencode, headless only (streams recorded from opencode-ai 1.18.33).

`waaah run --agent opencode` drives ``opencode run --format json``; `waaah agent` cannot
supervise it (no recorded screens). Providers, models and credentials come from opencode's own
configuration (``opencode.json``, ``opencode auth login``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from waaah_agent.adapters.base import HEADLESS_ONLY_RULES, Adapter, Headless, env_names_in
from waaah_agent.core.streams import StreamParser, apply_opencode


def _headless(prompt: str | None, session_id: str, resume: bool, model: str | None) -> list[str]:
    """``opencode run --format json [--session ID] [--model PROVIDER/MODEL]``, prompt on stdin.

    opencode joins its message arguments and wraps each one that holds a space in double quotes,
    so an argv prompt would reach the model altered; on stdin it arrives as written. Its JSON
    error event says only "Unexpected server error" for local failures (such as a model missing
    from its configuration); ERROR-level logs on stderr name the cause."""
    args = ["run", "--format", "json", "--print-logs", "--log-level", "ERROR"]
    if resume:
        args += ["--session", session_id]
    if model:
        args += ["--model", model]
    return [*args, prompt] if prompt is not None else args


_ENV_REF = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _config_env(env: Mapping[str, str], workspace: Path) -> tuple[str, ...]:
    """The variables opencode's configs refer to as ``{env:NAME}`` (the user's, the workspace's)."""
    config = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME", "~")) / ".config").expanduser()
    files = [config / "opencode" / name for name in ("opencode.json", "opencode.jsonc", "config.json")]
    files += [workspace / "opencode.json", workspace / "opencode.jsonc"]
    return env_names_in(files, _ENV_REF)


ADAPTER = Adapter(
    name="opencode",
    display_name="opencode",
    binary="opencode",
    install_hint="npm install -g opencode-ai",
    login_hint="opencode auth login",
    rules=HEADLESS_ONLY_RULES,
    tested_version="1.18.33",
    interactive=False,
    provider_env=("OPENCODE_", "OPENAI_"),
    config_env=_config_env,
    headless=Headless(
        _headless, parser=lambda: StreamParser(apply_opencode), own_session_ids=False, stdin_prompt=True
    ),
)
