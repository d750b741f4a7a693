"""Anthropic's Claude Code (screens recorded from @anthropic-ai/claude-code 2.1.332)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from waaah_agent.adapters.base import Adapter, Headless, ScreenRules, install_command
from waaah_agent.adapters.claude.stream import apply_claude
from waaah_agent.adapters.claude.transcript import (
    claude_compactions,
    claude_counter,
    claude_holds,
    claude_thinking,
)
from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.mcp.givers import FilePerRun, HooksPerRun, Persistent
from waaah_agent.core.oneshot import run_inputs
from waaah_agent.core.oneshot.run_inputs import CliInputs
from waaah_agent.core.oneshot.streams import StreamParser
from waaah_agent.core.versions import ReleaseSupport


def _transcript(env: Mapping[str, str], workspace: Path, session_id: str) -> Path | None:
    """claude keeps ``~/.claude/projects/<cwd with / replaced by ->/<uuid>.jsonl``."""
    folder = re.sub(r"[^A-Za-z0-9]", "-", str(workspace))
    config = env.get("CLAUDE_CONFIG_DIR") or str(Path(env.get("HOME", "~")) / ".claude")
    path = Path(config).expanduser() / "projects" / folder / f"{session_id}.jsonl"
    return path if path.exists() else None


def _user_file(env: Mapping[str, str]) -> Path:
    """claude's own ``~/.claude.json``, where a user may have added a waaah entry."""
    return Path(env.get("HOME") or "~").expanduser() / ".claude.json"


def claude_config(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """The document for claude's per-run ``--mcp-config <file>``."""
    entry = {"type": "stdio", "command": command[0], "args": [*command[1:], "mcp-proxy"], "env": env}
    return {"mcpServers": {mcpconf.NAME: entry}}


def claude_entry(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """The entry kept in ``~/.claude.json`` for every run (`waaah mcp install`)."""
    return dict(claude_config(command, env)["mcpServers"][mcpconf.NAME])


#: ~/.claude.json keeps claude's history too: it may be large.
USER_FILE_LIMIT = 64 * 4 * 1024 * 1024


def _needs_login(env: Mapping[str, str]) -> bool:
    """No API key or token and no stored credentials: claude would say `Not logged in`."""
    keys = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK")
    if any(env.get(k) for k in (*keys, "CLAUDE_CODE_USE_VERTEX")):
        return False
    config = Path(env.get("CLAUDE_CONFIG_DIR") or str(Path(env.get("HOME", "~")) / ".claude")).expanduser()
    return not (config / ".credentials.json").exists()


def _headless(prompt: str | None, session_id: str, resume: bool, model: str | None) -> list[str]:
    """``claude -p [PROMPT] --output-format stream-json --verbose``; without PROMPT, stdin."""
    args = ["-p", *([prompt] if prompt is not None else []), "--output-format", "stream-json", "--verbose"]
    args += ["--resume", session_id] if resume else ["--session-id", session_id]
    return [*args, "--model", model] if model else args


#: `waaah run`'s inputs (claude 2.1 `--help`). A 200,000-token window: at about 4 bytes a token
#: a prompt over 800,000 bytes cannot fit; over 200,000 it fills a quarter of the window.
INPUTS = CliInputs(
    prompt_warn=200_000,
    prompt_max=800_000,
    prompt_basis="its models' 200K-token window at ~4 bytes a token",
    permission={
        "default": (),  # its own default: no flag
        **{m: ("--permission-mode", m) for m in ("acceptEdits", "plan", "bypassPermissions")},
        **{m: ("--permission-mode", m) for m in ("auto", "manual", "dontAsk")},
    },
    yolo=("--dangerously-skip-permissions",),
    temperature_note="has no flag or setting for it",
    skills=(".claude/skills",),
    skill_prompt=run_inputs.slash_skill,
    # `--allowed-tools <tools...>` takes a comma-separated list; one word with `=` so that the
    # list cannot take the next argument too.
    allowed_tools=lambda tools: [f"--allowed-tools={','.join(tools)}"],
)


RULES = ScreenRules(
    # `❯` is drawn even while busy: only the absence of the busy footer makes it ready.
    input_ready=re.compile(r"^\s*❯", re.MULTILINE),
    input_empty=re.compile(r"^\s*❯\s*$", re.MULTILINE),
    busy=re.compile(r"esc to interrupt"),
    title_ready=re.compile(r"^✳"),
    title_busy=re.compile(r"^[◐◑◒◓]"),
    dialog=re.compile(r"Do you want to proceed\?|Yes, I trust this folder|Enter to confirm · Esc to cancel"),
    # `⎿` marks claude's own notices (the model's replies start with `●`), so a model that
    # merely talks about logging in does not stop the session.
    login=re.compile(r"⎿\s+Not logged in · Please run /login|^\s*Not logged in · run /login", re.MULTILINE),
    exited=re.compile(r"^Resume this session with:", re.MULTILINE),
    # The banners users report: "5-hour limit reached ∙ resets 3am", "You've hit your limit · resets 3pm".
    limit=re.compile(r"(?:limit reached|hit your limit)\s*[·∙]\s*resets [^\n]*"),
    # claude prints its notices under the prompt they answer, near the top of a short
    # conversation: dialogs and login are looked for on the whole visible screen (never
    # the scrollback), anchored on claude's own markers.
    dialog_rows=200,
)

ADAPTER = Adapter(
    name="claude",
    display_name="Claude Code",
    binary="claude",
    install_hint=install_command("claude", "@anthropic-ai/claude-code", "2.1.332"),
    login_hint="claude, then type /login (or set ANTHROPIC_API_KEY)",
    rules=RULES,
    reports_cost=True,
    tested_version="2.1.332",
    releases=ReleaseSupport(
        tested="2.1.332",
        oldest="2.1.200",
        update_hint=install_command("claude", "@anthropic-ai/claude-code", "2.1.332"),
        needs=("--resume", "--session-id"),
        older_tested=("2.1.330", "2.1.300", "2.1.200"),
    ),
    enter_delay=0.3,
    fresh_args=lambda sid: ["--session-id", sid],
    resume_args=lambda sid: ["--resume", sid],
    transcript=_transcript,
    compactions=claude_compactions,
    session_files=lambda env, ws, sid: [p for p in [_transcript(env, ws, sid)] if p is not None],
    holds_conversation=claude_holds,
    needs_login=_needs_login,
    # A per-run --mcp-config file in the session folder (the user's files are never touched), and
    # --allowedTools so tool calls do not stop at a permission dialog.
    mcp=FilePerRun(
        flag="--mcp-config",
        document=claude_config,
        extra_args=("--allowedTools", f"mcp__{mcpconf.NAME}"),
        user_file=_user_file,
        user_limit=USER_FILE_LIMIT,
        persistent=Persistent(_user_file, claude_entry, limit=USER_FILE_LIMIT),
    ),
    hooks=HooksPerRun(
        cli="claude", flag="--settings", events=("SessionStart", "UserPromptSubmit", "Stop", "Notification")
    ),
    tokens=claude_counter,
    # Only models its own catalogue lists.
    model_aliases={"fast": "claude-haiku-5-5", "smart": "claude-sonnet-5-5", "pro": "claude-opus-5-5"},
    reasoning=claude_thinking,
    # wait_for_prompt long-polls: give MCP tool calls room beyond that.
    extra_env={"MCP_TOOL_TIMEOUT": str(mcpconf.TOOL_TIMEOUT_MS)},
    # Its provider's variables and the settings claude reads from the environment by their own
    # names (timeouts, switches: see its settings documentation).
    provider_env=(
        "ANTHROPIC_",
        "CLAUDE_",
        "CLOUD_ML_REGION",
        "VERTEX_",
        "DISABLE_",
        "MCP_",
        "BASH_",
        "MAX_MCP_OUTPUT_TOKENS",
        "MAX_THINKING_TOKENS",
        "IS_SANDBOX",
        "ENABLE_TOOL_SEARCH",
        "USE_BUILTIN_RIPGREP",
        "SLASH_COMMAND_TOOL_CHAR_BUDGET",
    ),
    headless=Headless(_headless, parser=lambda: StreamParser(apply_claude), inputs=INPUTS),
)
