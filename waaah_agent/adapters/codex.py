"""OpenAI's Codex CLI, headless only (streams recorded from @openai/codex 0.169.0).

`waaah run --agent codex` drives ``codex exec --json``; `waaah agent` cannot supervise it (no
recorded screens). Model, provider and credentials come from codex's own configuration
(``$CODEX_HOME/config.toml``, ``OPENAI_API_KEY`` or ``codex login``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from waaah_agent.adapters.base import HEADLESS_ONLY_RULES, Adapter, Headless, env_names_in
from waaah_agent.core.streams import StreamParser, apply_codex


def _headless(prompt: str | None, session_id: str, resume: bool, model: str | None) -> list[str]:
    """``codex exec --json [-m MODEL] PROMPT``; resume: ``codex exec resume --json ... ID PROMPT``.

    codex picks the session (thread) id itself, so a fresh run names none. A prompt of ``-``
    makes codex read it from stdin. Outside a git repository codex refuses to start unless told
    ``--skip-git-repo-check``; `waaah run` works in any folder, as it does with the other CLIs."""
    args = ["exec", "resume", "--json"] if resume else ["exec", "--json"]
    args.append("--skip-git-repo-check")
    if model:
        args += ["--model", model]
    if resume:
        args.append(session_id)
    return [*args, prompt if prompt is not None else "-"]


_ENV_KEY = re.compile(r"^\s*env_key\s*=\s*[\"']([A-Za-z_][A-Za-z0-9_]*)[\"']", re.MULTILINE)


def _config_env(env: Mapping[str, str], workspace: Path) -> tuple[str, ...]:
    """The variables codex's model providers read their keys from (``env_key`` in config.toml)."""
    home = Path(env.get("CODEX_HOME") or Path(env.get("HOME", "~")) / ".codex").expanduser()
    return env_names_in([home / "config.toml"], _ENV_KEY)


ADAPTER = Adapter(
    name="codex",
    display_name="Codex CLI",
    binary="codex",
    install_hint="npm install -g @openai/codex",
    login_hint="codex login, or set OPENAI_API_KEY",
    rules=HEADLESS_ONLY_RULES,
    tested_version="0.169.0",
    interactive=False,
    provider_env=("OPENAI_", "CODEX_"),
    config_env=_config_env,
    headless=Headless(_headless, parser=lambda: StreamParser(apply_codex), own_session_ids=False),
)
