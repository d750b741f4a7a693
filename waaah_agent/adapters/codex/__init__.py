"""OpenAI's Codex CLI (screens and streams recorded from @openai/codex 0.171.0; 0.169.0 too).

`waaah agent --start=codex` supervises its TUI; `waaah run --agent codex` drives ``codex exec
--json``. Model, provider and credentials come from codex's own configuration
(``$CODEX_HOME/config.toml``, ``OPENAI_API_KEY`` or ``codex login``), which waaah never edits:
the waaah MCP server and ``features.daemon_auto_start=false`` are given per run with ``-c``
overrides (see :data:`MCP`).

codex picks its session (thread) id itself and keeps each session in
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``, written from the first prompt on;
its first record (``session_meta``) names the id, the working folder and the start time.
:func:`own_session` finds the one a run began, so a restart resumes it (``codex resume <id>``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent.adapters.base import Adapter, Headless, ScreenRules, env_names_in, install_command
from waaah_agent.adapters.codex.stream import apply_codex
from waaah_agent.adapters.codex.transcript import (
    codex_compactions,
    codex_counter,
    codex_holds,
    codex_resets_at,
)
from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.mcp.givers import GivenInline
from waaah_agent.core.nesting import loads_json, loads_toml
from waaah_agent.core.oneshot.run_inputs import CliInputs
from waaah_agent.core.oneshot.streams import StreamParser
from waaah_agent.errors import ConfigRefused

#: Given on every start: without it codex launches a detached daemon that outlives it.
NO_DAEMON = ["-c", "features.daemon_auto_start=false"]
#: The largest head of a session file read to find its first record (it holds the instructions).
META_CAP = 1024 * 1024


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


#: `waaah run`'s inputs (codex-cli 0.169 `codex exec --help`). GPT-5 codex models take 272,000
#: input tokens: at about 4 bytes a token a prompt over 1,088,000 bytes cannot fit. The sandbox
#: is set as the config key ``sandbox_mode`` (``-c``), which ``codex exec`` and ``codex exec
#: resume`` both take; only ``exec`` has ``--sandbox`` (``resume`` refuses it: --session).


def _sandbox(mode: str) -> tuple[str, ...]:
    return ("-c", f'sandbox_mode="{mode}"')


INPUTS = CliInputs(
    prompt_warn=272_000,
    prompt_max=1_088_000,
    prompt_basis="its models' 272K-token input at ~4 bytes a token",
    permission={
        "default": (),  # exec's own default: the read-only sandbox, no approvals
        "acceptEdits": _sandbox("workspace-write"),
        "plan": _sandbox("read-only"),
        "bypassPermissions": ("--dangerously-bypass-approvals-and-sandbox",),
        **{m: _sandbox(m) for m in ("read-only", "workspace-write", "danger-full-access")},
    },
    yolo=("--dangerously-bypass-approvals-and-sandbox",),
    temperature_note="has no temperature setting (its reasoning models take none)",
    no_skills_note="codex exec has no option or prompt form that runs a named skill",
    allowed_tools_note="exec takes no list of tools (its sandbox decides: --permission-mode)",
)


_ENV_KEY = re.compile(r"^\s*env_key\s*=\s*[\"']([A-Za-z_][A-Za-z0-9_]*)[\"']", re.MULTILINE)


def codex_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("CODEX_HOME") or Path(env.get("HOME", "~")) / ".codex").expanduser()


def _config_env(env: Mapping[str, str], workspace: Path) -> tuple[str, ...]:
    """The variables codex's model providers read their keys from (``env_key`` in config.toml)."""
    return env_names_in([codex_home(env) / "config.toml"], _ENV_KEY)


def _config(env: Mapping[str, str]) -> dict[str, Any] | None:
    """codex's config.toml as read (``{}`` when there is none; None: unreadable)."""
    from waaah_agent.safe_read import read_capped  # I/O, only when a run asks

    path = codex_home(env) / "config.toml"
    if not path.exists():
        return {}
    try:
        return loads_toml(read_capped(path, 4 * 1024 * 1024).decode("utf-8"))
    except (OSError, ValueError):
        return None


def _needs_login(env: Mapping[str, str]) -> bool:
    """No key, no stored login (``auth.json``), and the OpenAI provider: codex would show its
    sign-in screen. A provider of the user's own takes its key from its ``env_key`` instead."""
    if env.get("OPENAI_API_KEY") or env.get("CODEX_API_KEY") or (codex_home(env) / "auth.json").exists():
        return False
    config = _config(env)
    return config is not None and config.get("model_provider", "openai") == "openai"


def _session_files(env: Mapping[str, str], since: float) -> Iterator[Path]:
    """The session files in the day folders (``YYYY/MM/DD``) from the day before ``since`` on."""
    first = datetime.fromtimestamp(since - 86400).strftime("%Y/%m/%d")
    for day in (codex_home(env) / "sessions").glob("[0-9]*/[0-9]*/[0-9]*"):
        if "/".join(day.parts[-3:]) >= first:
            yield from day.glob("rollout-*.jsonl")


def _transcript(env: Mapping[str, str], workspace: Path, session_id: str) -> Path | None:
    """codex keeps ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``."""
    if not re.fullmatch(r"[0-9a-fA-F-]{36}", session_id):
        return None
    return next((codex_home(env) / "sessions").glob(f"*/*/*/rollout-*-{session_id}.jsonl"), None)


#: How much of the end of a session file is read for its newest ``rate_limits``.
LIMITS_TAIL = 1024 * 1024


def _limit_reset(env: Mapping[str, str], workspace: Path, session_id: str) -> datetime | None:
    """When the usage window codex used up resets, from the end of its session file."""
    from datetime import timezone

    from waaah_agent.safe_read import read_tail  # I/O, only when a run asks

    path = _transcript(env, workspace, session_id)
    if path is None:
        return None
    try:
        tail = read_tail(path, LIMITS_TAIL).decode("utf-8", "replace")
    except OSError:
        return None
    return codex_resets_at(tail.splitlines(), datetime.now(timezone.utc))


def session_meta(path: Path) -> dict[str, Any] | None:
    """The ``session_meta`` payload that opens a codex session file (None: none readable)."""
    from waaah_agent.safe_read import read_capped  # I/O, only when a run asks

    try:
        head = read_capped(path, META_CAP, head=True)
        record = loads_json(head.split(b"\n", 1)[0])
    except (OSError, ValueError):
        return None
    payload = record.get("payload") if isinstance(record, dict) else None
    if not isinstance(payload, dict) or record.get("type") != "session_meta":
        return None
    return payload


def own_session(env: Mapping[str, str], workspace: Path, since: float) -> str | None:
    """The id of the first session codex began in ``workspace`` at or after ``since`` (epoch
    seconds), from its session files; None while there is none (it is written at the first prompt)."""
    found: list[tuple[float, str]] = []
    for path in _session_files(env, since):
        try:
            if path.stat().st_mtime < since:
                continue
        except OSError:
            continue
        meta = session_meta(path)
        if meta is None or meta.get("cwd") != str(workspace) or not isinstance(meta.get("id"), str):
            continue
        try:
            started = datetime.fromisoformat(str(meta.get("timestamp")).replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
        if started >= since - 1:  # the id is chosen before the record's time is taken
            found.append((started, meta["id"]))
    return min(found)[1] if found else None


def _toml(value: Any) -> str:
    """A TOML value for a ``-c key=value`` override (JSON strings and arrays are valid TOML)."""
    return json.dumps(value)


def _give(
    env: Mapping[str, str], command: list[str], proxy_env: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The waaah MCP entry given per run as ``-c mcp_servers.waaah.*`` overrides: codex's own
    config.toml is never touched. The proxy's variables (server, key, agent id, inbox) reach it
    by name (``env_vars``): their values go into the CLI's environment, never onto its command
    line, where any user of the machine could read a key. Tool calls are approved without a
    prompt, and a call may block for the whole long poll."""
    entry = {
        "command": command[0],
        "args": [*command[1:], "mcp-proxy"],
        "env_vars": sorted(proxy_env),
        "default_tools_approval_mode": "approve",
        "tool_timeout_sec": mcpconf.TOOL_TIMEOUT_SECONDS,
    }
    args = [
        a for key, value in entry.items() for a in ("-c", f"mcp_servers.{mcpconf.NAME}.{key}={_toml(value)}")
    ]
    return args, proxy_env


def refuse_remote_entry(env: Mapping[str, str], data: dict[str, Any]) -> None:
    """codex refuses to start ("url is not supported for stdio") when the user's config.toml has a
    waaah entry with a ``url`` (an HTTP server) and our per-run one names a command: say so first."""
    servers = data.get("mcp_servers")
    entry = servers.get(mcpconf.NAME) if isinstance(servers, dict) else None
    if isinstance(entry, dict) and "url" in entry:
        raise ConfigRefused(
            f"{codex_home(env) / 'config.toml'} has an HTTP waaah MCP server ([mcp_servers.waaah] url = "
            f"{str(entry['url'])!r}), which codex cannot combine with the waaah mcp-proxy given per run",
            "remove or rename that entry, then start again (or start with --no-mcp)",
        )


#: Given per run on the command line (`waaah mcp install` keeps no entry in codex's TOML config:
#: add one by hand); a waaah entry in its config.toml is read for its URL only.
MCP = GivenInline(
    give_inline=_give,
    says="given per run with -c mcp_servers.waaah.* (your config.toml is not touched)",
    user_file=lambda env: codex_home(env) / "config.toml",
    parse=loads_toml,
    servers=lambda doc: {"mcpServers": doc.get("mcp_servers")},
    check=refuse_remote_entry,
)


RULES = ScreenRules(
    # The composer: `› Ask Codex to do anything` when empty, `› <text>` with a draft. The `›`
    # also marks the chosen line of its dialogs: the dialog rule wins there.
    input_ready=re.compile(r"^› ", re.MULTILINE),
    input_empty=re.compile(r"^› Ask Codex to do anything", re.MULTILINE),
    # `• Working (0s • esc to interrupt)` above the composer, an MCP call included; the title
    # then starts with a braille spinner (0.169: `⠼ <folder>`; 0.171's tui_workspace names the
    # conversation: `⠋ <first prompt> | <folder>`; idle: the same without the spinner).
    busy=re.compile(r"esc to interrupt\)"),
    title_busy=re.compile(r"^[\u2800-\u28ff] "),
    # First start with a catalogued model that has a newer one ("Meet GPT-6 Sol ... 1. Try new
    # model 2. Use existing model"), an untrusted folder ("Trust this folder?").
    # At a usage limit with the plan's windows used up, 0.171 asks "Approaching rate limits /
    # Switch to <a cheaper model>?" (`› 1. Switch to ...`, `enter select · esc back`).
    dialog=re.compile(
        r"enter/esc confirm · \^c quit|Trust this folder\?|^\s*› 1\. Trust and continue|"
        r"Approaching rate limits|enter select · esc back",
        re.MULTILINE,
    ),
    # No provider key and no login: its welcome screen with the ways to sign in.
    login=re.compile(r"Choose how you want to use Codex\.|^\s*> 1\. Sign in with ChatGPT", re.MULTILINE),
    exited=re.compile(r"^To continue this session, run:", re.MULTILINE),
    # `■ You’ve hit your usage limit. Upgrade to Pro (...) or try again later.` (or a time).
    limit=re.compile(r"■ You[’']ve hit your usage limit\.[^\n]*"),
    # codex draws its history from the top of the screen down and keeps the composer at the
    # bottom: an error line can be anywhere on the visible screen (never the scrollback), so
    # dialogs, login and limits are looked for on all of it, anchored on codex's own markers.
    dialog_rows=200,
)

ADAPTER = Adapter(
    name="codex",
    display_name="Codex CLI",
    binary="codex",
    install_hint=install_command("codex", "@openai/codex", "0.171.0"),
    login_hint="codex login, or set OPENAI_API_KEY",
    rules=RULES,
    tested_version="0.171.0",
    # An Enter within ~120 ms of typed text is taken as a newline in the composer.
    enter_delay=0.5,
    fresh_args=lambda sid: [*NO_DAEMON],
    resume_args=lambda sid: ["resume", sid, *NO_DAEMON],
    transcript=_transcript,
    compactions=codex_compactions,
    limit_reset=_limit_reset,
    session_files=lambda env, ws, sid: [p for p in [_transcript(env, ws, sid)] if p is not None],
    holds_conversation=codex_holds,
    own_session=own_session,
    needs_login=_needs_login,
    mcp=MCP,
    tokens=codex_counter,
    provider_env=("OPENAI_", "CODEX_"),
    config_env=_config_env,
    headless=Headless(
        _headless, parser=lambda: StreamParser(apply_codex), own_session_ids=False, inputs=INPUTS
    ),
)
