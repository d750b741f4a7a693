"""opencode (screens and streams recorded from opencode-ai 1.18.33).

`waaah agent --start=opencode` supervises its TUI; `waaah run --agent opencode` drives
``opencode run --format json``. Providers, models and credentials come from opencode's own
configuration (``opencode.json``, ``opencode auth login``).

What differs from gemini and claude:

* it draws nothing until the terminal answers its queries (cursor position, device attributes,
  colours): headless, the supervisor answers them (``answers_queries``);
* it picks its own session id (``ses_…``), kept in its SQLite store
  (``$XDG_DATA_HOME/opencode/opencode.db``, table ``session``): the id of the session a run began
  in the workspace is read from there, and a restart resumes it with ``--session <id>``;
* it takes a config merged over the user's from ``OPENCODE_CONFIG_CONTENT`` (JSON): the waaah
  MCP server (``mcp.waaah``, a local command) and ``permission`` allowing its tools
  (``waaah_*``) go there; the user's ``opencode.json`` is never touched.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from waaah_agent.adapters.base import (
    Adapter,
    Headless,
    ScreenRules,
    env_names_in,
    install_command,
)
from waaah_agent.adapters.opencode.stream import apply_opencode
from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.mcp.givers import GivenInline
from waaah_agent.core.nesting import loads_json, strip_json_comments
from waaah_agent.core.oneshot.run_inputs import CliInputs
from waaah_agent.core.oneshot.streams import StreamParser
from waaah_agent.errors import ConfigRefused

#: The variable opencode merges last over its configs (a JSON document).
CONFIG_CONTENT = "OPENCODE_CONFIG_CONTENT"


def _headless(prompt: str | None, session_id: str, resume: bool, model: str | None) -> list[str]:
    """``opencode run --format json [--session ID] [--model PROVIDER/MODEL]``, prompt on stdin.

    opencode joins its message arguments and wraps each one that holds a space in double quotes,
    so an argv prompt would reach the model altered; on stdin it arrives as written. Its JSON
    error event says only "Unexpected server error" for local failures (such as a model missing
    from its configuration); ERROR-level logs on stderr name the cause. ``--thinking`` makes it
    emit the model's reasoning parts (the envelope's ``reasoning``)."""
    args = ["run", "--format", "json", "--thinking", "--print-logs", "--log-level", "ERROR"]
    if resume:
        args += ["--session", session_id]
    if model:
        args += ["--model", model]
    return [*args, prompt] if prompt is not None else args


#: `waaah run`'s inputs (opencode 1.18 `opencode run --help`). Its window is its provider's:
#: figured on 128,000 tokens, the smallest common one (about 4 bytes a token).
INPUTS = CliInputs(
    prompt_warn=128_000,
    prompt_max=512_000,
    prompt_basis="a 128K-token window (its provider's may be larger) at ~4 bytes a token",
    permission={
        "default": (),
        "plan": ("--agent", "plan"),  # its read-only planning agent
        "bypassPermissions": ("--auto",),
    },
    yolo=("--auto",),
    temperature_note="has no flag for it (only an agent's temperature in opencode.json)",
    no_skills_note="opencode run has no option that runs a named skill",
    allowed_tools_note="run takes no list of tools (only opencode.json's permission settings)",
)


_ENV_REF = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _config_dir(env: Mapping[str, str]) -> Path:
    return (
        Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME", "~")) / ".config").expanduser() / "opencode"
    )


#: What a workspace's config may name: a model provider's key (``ANTHROPIC_API_KEY``,
#: ``OPENROUTER_API_KEY``, ...), never a cloud credential, a database URL or another token.
_PROVIDER_KEY = re.compile(r"[A-Z][A-Z0-9_]*_API_KEY")


def _named(env: Mapping[str, str], workspace: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``{env:NAME}`` references of the user's own configs (under their home: trusted) and of
    the workspace's (anyone who can commit to the repository wrote them), comments left out."""
    mine = [_config_dir(env) / name for name in ("opencode.json", "opencode.jsonc", "config.json")]
    theirs = [workspace / "opencode.json", workspace / "opencode.jsonc"]
    return env_names_in(mine, _ENV_REF, strip_json_comments), env_names_in(
        theirs, _ENV_REF, strip_json_comments
    )


def _config_env(env: Mapping[str, str], workspace: Path) -> tuple[str, ...]:
    """The variables opencode's configs refer to as ``{env:NAME}``: all of the user's own, of the
    workspace's only model providers' keys."""
    mine, theirs = _named(env, workspace)
    return tuple(dict.fromkeys([*mine, *(n for n in theirs if _PROVIDER_KEY.fullmatch(n))]))


def _config_env_refused(env: Mapping[str, str], workspace: Path) -> tuple[str, ...]:
    """What the workspace's configs name, is set, and is not given (:func:`_config_env`)."""
    given = set(_config_env(env, workspace))
    return tuple(n for n in _named(env, workspace)[1] if n in env and n not in given)


# ---- its sessions ------------------------------------------------------------------------


def _store(env: Mapping[str, str]) -> Path:
    data = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")) / ".local" / "share")
    return Path(data).expanduser() / "opencode" / "opencode.db"


def _query(env: Mapping[str, str], sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Rows from opencode's store, read-only; a missing, locked or foreign file gives none."""
    path = _store(env)
    if not path.is_file():
        return []
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=1.0)) as db:
            return list(db.execute(sql, args).fetchall())
    except sqlite3.Error:
        return []


def _transcript(env: Mapping[str, str], workspace: Path, session_id: str) -> Path | None:
    """The store, when it holds ``session_id`` (so ``--session`` can resume it)."""
    rows = (
        _query(env, "SELECT 1 FROM session WHERE id = ?", (session_id,))
        if session_id.startswith("ses_")
        else []
    )
    return _store(env) if rows else None


def _own_session(env: Mapping[str, str], workspace: Path, started: float) -> str | None:
    """The newest top-level session opencode began in ``workspace`` since ``started``."""
    rows = _query(
        env,
        "SELECT id FROM session WHERE directory = ? AND parent_id IS NULL AND time_created >= ?"
        " ORDER BY time_created DESC LIMIT 1",
        (str(workspace), int(started * 1000) - 2000),
    )
    return str(rows[0][0]) if rows else None


# ---- the waaah MCP server ------------------------------------------------------------------


def config_document(command: list[str], proxy_env: dict[str, str]) -> dict[str, Any]:
    """What opencode gets merged over its configs: our proxy as ``mcp.waaah``, its tools allowed."""
    entry = {
        "type": "local",
        "command": [*command, "mcp-proxy"],
        "environment": proxy_env,
        "enabled": True,
        "timeout": mcpconf.TOOL_TIMEOUT_MS,
    }
    return {"mcp": {mcpconf.NAME: entry}, "permission": {f"{mcpconf.NAME}_*": "allow"}}


def merged(given: str | None, ours: dict[str, Any]) -> dict[str, Any]:
    """The user's own ``OPENCODE_CONFIG_CONTENT`` (if any) with ours merged in, key by key."""
    base: Any = {}
    if given and given.strip():
        try:
            base = loads_json(given)
        except ValueError as err:
            raise ConfigRefused(
                f"{CONFIG_CONTENT} is not JSON ({err})", f"fix or unset {CONFIG_CONTENT}"
            ) from err
        if not isinstance(base, dict):
            raise ConfigRefused(
                f"{CONFIG_CONTENT} does not hold a JSON object", f"fix or unset {CONFIG_CONTENT}"
            )
    out = dict(base)
    for key, value in ours.items():
        mine = out.get(key)
        out[key] = {**mine, **value} if isinstance(mine, dict) and isinstance(value, dict) else value
    return out


def _servers(doc: dict[str, Any]) -> dict[str, Any]:
    """The waaah entry of the user's ``opencode.json`` (``mcp.waaah``: ``command`` a list,
    ``environment``) in the ``mcpServers`` shape."""
    mcp = doc.get("mcp")
    entry = mcp.get(mcpconf.NAME) if isinstance(mcp, dict) else None
    if not isinstance(entry, dict):
        return {}
    raw, environment = entry.get("command"), entry.get("environment")
    command: list[Any] = raw if isinstance(raw, list) else []
    shaped = {
        "command": str(command[0]) if command else "",
        "args": command[1:],
        "env": environment if isinstance(environment, dict) else {},
    }
    return {"mcpServers": {mcpconf.NAME: shaped}}


def _give(
    env: Mapping[str, str], command: list[str], proxy_env: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """Our config merged over the user's own ``OPENCODE_CONFIG_CONTENT``."""
    document = merged(env.get(CONFIG_CONTENT), config_document(command, proxy_env))
    return [], {CONFIG_CONTENT: json.dumps(document)}


#: The waaah entry given per run in ``OPENCODE_CONFIG_CONTENT``; none kept in the user's own
#: opencode.json (`waaah mcp install` does not offer one), where a waaah entry is read for its URL.
MCP = GivenInline(
    give_inline=_give,
    says=f"given per run in {CONFIG_CONTENT} (your opencode.json is not touched)",
    user_file=lambda env: _config_dir(env) / "opencode.json",
    servers=_servers,
)


RULES = ScreenRules(
    # The input box ends in a `╹▀▀▀` edge, drawn while busy too: `esc interrupt` in the footer
    # (left of `ctrl+p commands`) is what tells busy from ready. The window title says neither.
    input_ready=re.compile(r"^\s*╹▀+\s*$", re.MULTILINE),
    # The box's text row holds nothing or the placeholder ("Ask anything…"), a blank row, then
    # the agent and model row, then the edge.
    input_empty=re.compile(r"┃[ \t]*(?:Ask anything[^\n]*)?\n[ \t]*┃[ \t]*\n[ \t]*┃[ \t]+\S[^\n]*\n[ \t]*╹▀"),
    busy=re.compile(r"esc interrupt .*ctrl\+p commands"),
    dialog=re.compile(r"┃\s+△ Permission required"),
    # On its way out it prints the session and how to continue it, on the main screen.
    exited=re.compile(r"^\s*Continue\s+opencode -s ses_", re.MULTILINE),
    # A full-screen TUI (no scrollback under it), with the input box in the middle of its first
    # screen: the whole screen is read, through patterns anchored on its own frame and footer.
    region_rows=200,
    dialog_rows=200,
)

ADAPTER = Adapter(
    name="opencode",
    display_name="opencode",
    binary="opencode",
    install_hint=install_command("opencode", "opencode-ai", "1.18.33"),
    login_hint="opencode auth login",
    rules=RULES,
    reports_cost=True,
    tested_version="1.18.33",
    resume_args=lambda sid: ["--session", sid],
    transcript=_transcript,
    own_session=_own_session,
    answers_queries=True,
    mcp=MCP,
    # An update installed in the middle of the night is not what a supervised session wants.
    extra_env={"OPENCODE_DISABLE_AUTOUPDATE": "1"},
    provider_env=("OPENCODE_", "OPENAI_"),
    config_env=_config_env,
    config_env_refused=_config_env_refused,
    headless=Headless(
        _headless,
        parser=lambda: StreamParser(apply_opencode),
        own_session_ids=False,
        stdin_prompt=True,
        inputs=INPUTS,
    ),
)
