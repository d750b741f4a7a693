"""Google's Gemini CLI (screens recorded from @google/gemini-cli 0.61.0)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from waaah_agent.adapters.base import Adapter, Headless, ScreenRules, install_command
from waaah_agent.adapters.gemini import models
from waaah_agent.adapters.gemini.stream import apply_gemini
from waaah_agent.adapters.gemini.transcript import (
    gemini_compactions,
    gemini_counter,
    gemini_holds,
    gemini_thoughts,
)
from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.mcp.givers import HomePerRun, Persistent
from waaah_agent.core.nesting import loads_json, strip_json_comments
from waaah_agent.core.oneshot import run_inputs
from waaah_agent.core.oneshot.run_inputs import CliInputs
from waaah_agent.core.oneshot.streams import StreamParser
from waaah_agent.core.versions import ReleaseSupport

_SESSION_FILE = re.compile(r"session-(\d{4}-\d\d-\d\dT\d\d-\d\d)-([0-9a-f]{8})\.(jsonl?)")


def pick_transcript(names: list[str], session_id: str) -> str | None:
    """Which of gemini's session files holds ``session_id``'s conversation. Every start of
    gemini, ``--resume`` too, first opens a file named for the minute it starts, with only a
    header; a resume then goes on in the session's first file (an old ``.json`` one is carried
    on as ``.jsonl`` beside it). So: the earliest minute, ``.jsonl`` before ``.json``; its own
    backups (``.unreadable-*``) and temporary files (``.tmp-*``) are never it."""
    found = []
    for name in names:
        match = _SESSION_FILE.fullmatch(name)
        if match and match.group(2) == session_id[:8].lower():
            found.append((match.group(1), match.group(3) != "jsonl", name))
    return min(found)[2] if found else None


def _transcript(env: Mapping[str, str], workspace: Path, session_id: str) -> Path | None:
    """gemini keeps ``~/.gemini/tmp/<project>/chats/session-<date>-<id8>.jsonl``."""
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME", "~")).expanduser()
    by_name = {
        p.name: p for p in (home / ".gemini" / "tmp").glob(f"*/chats/session-*-{session_id[:8]}*.json*")
    }
    name = pick_transcript(list(by_name), session_id)
    return by_name[name] if name else None


def _session_files(env: Mapping[str, str], workspace: Path, session_id: str) -> list[Path]:
    """Every file of the session: gemini names them ``session-<minute>-<id8>.json[l]`` and, at
    its next start, removes them all when one holds no conversation (core/kept_sessions.py)."""
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME", "~")).expanduser()
    short = session_id[:8].lower()
    found = (home / ".gemini" / "tmp").glob(f"*/chats/session-*-{short}.json*")
    return sorted(p for p in found if (m := _SESSION_FILE.fullmatch(p.name)) and m.group(2) == short)


_SESSION_HEAD = re.compile(r'"sessionId"\s*:\s*"([0-9a-f-]{8,64})"[^}]*?"projectHash"\s*:\s*"([0-9a-f]{64})"')


def _learn_session_id(env: Mapping[str, str], workspace: Path, since: float) -> str | None:
    """The id a release without ``--session-id`` picked (0.34.0): from the newest session file
    of this workspace written since ``since``. Its head names the id and the project's hash (the
    SHA-256 of the workspace path): ``{"sessionId": "...", "projectHash": "...", ...`` (a JSON
    file in 0.34.0, the first line of a JSONL file later)."""
    from waaah_agent.safe_read import read_capped  # I/O, only when a run asks

    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME", "~")).expanduser()
    project = hashlib.sha256(str(workspace).encode()).hexdigest()
    found: list[tuple[float, str]] = []
    for path in (home / ".gemini" / "tmp").glob("*/chats/session-*.json*"):
        try:
            when = path.stat().st_mtime
            head = read_capped(path, 4096, follow=False, head=True).decode("utf-8", "replace")
        except OSError:
            continue
        match = _SESSION_HEAD.search(head)
        if when >= since and match and match.group(2) == project:
            found.append((when, match.group(1)))
    return max(found)[1] if found else None


def _settings_path(env: Mapping[str, str]) -> Path:
    """The user settings every run of gemini reads (workspace settings only in trusted folders)."""
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or "~").expanduser()
    return home / ".gemini" / "settings.json"


def _settings(path: Path) -> dict[str, Any] | None:
    """The user's settings as read (``{}``: there is none; None: unreadable or damaged)."""
    from waaah_agent.safe_read import read_capped  # I/O, only when a run asks

    if not path.exists() and not path.is_symlink():
        return {}
    try:
        text = strip_json_comments(read_capped(path, 4 * 1024 * 1024).decode("utf-8"))
        data = loads_json(text.strip() or "{}")
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("mcpServers", {}), dict) else None


def gemini_entry(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """The waaah entry: `trust` skips the per-call confirmation; `timeout` (ms) lets the long poll block."""
    return {
        "command": command[0],
        "args": [*command[1:], "mcp-proxy"],
        "env": env,
        "trust": True,
        "timeout": mcpconf.TOOL_TIMEOUT_MS,
    }


def _needs_login(env: Mapping[str, str]) -> bool:
    """No API key, no Vertex set-up, no OAuth credentials file: gemini would ask for a login."""
    if env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY") or env.get("GOOGLE_GENAI_USE_VERTEXAI"):
        return False
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME", "~")).expanduser() / ".gemini"
    if (home / "oauth_creds.json").exists() or env.get("GOOGLE_APPLICATION_CREDENTIALS"):
        return False
    settings = _settings(home / "settings.json")
    if settings is None:
        # What is wrong with the file is said once, naming it, by the MCP set-up (and by
        # `waaah doctor`'s MCP entry check); a login message would send the user the wrong way.
        return False
    security = settings.get("security")
    auth = security.get("auth") if isinstance(security, dict) else None
    auth = (auth.get("selectedType") if isinstance(auth, dict) else None) or settings.get("selectedAuthType")
    # Vertex, Cloud Shell and compute ADC logins leave no file we can check: trust them.
    return auth in (None, "gemini-api-key", "oauth-personal")


def _headless(prompt: str | None, session_id: str, resume: bool, model: str | None) -> list[str]:
    """``gemini -p PROMPT --output-format stream-json``; with ``-p ""`` gemini reads stdin."""
    args = ["-p", prompt if prompt is not None else "", "--output-format", "stream-json"]
    args += ["--resume", session_id] if resume else ["--session-id", session_id]
    return [*args, "--model", model] if model else args


#: `waaah run`'s inputs (gemini 0.61 `--help`). Models of 1,048,576 tokens: at about 4 bytes a
#: token a prompt over 4 MiB cannot fit; over 1 MiB it fills a quarter of the window.
INPUTS = CliInputs(
    prompt_warn=1024 * 1024,
    prompt_max=4 * 1024 * 1024,
    prompt_basis="its models' 1M-token window at ~4 bytes a token",
    permission={
        "default": ("--approval-mode", "default"),
        "acceptEdits": ("--approval-mode", "auto_edit"),
        "plan": ("--approval-mode", "plan"),
        "bypassPermissions": ("--approval-mode", "yolo"),
        "auto_edit": ("--approval-mode", "auto_edit"),
        "yolo": ("--approval-mode", "yolo"),
    },
    yolo=("--yolo",),
    temperature_note="has no flag for it (only settings.json's per-model generation settings)",
    skills=(".gemini/skills", ".agents/skills"),
    skill_prompt=run_inputs.inline_skill,
    # `--allowed-tools` is a yargs array: one flag per tool (deprecated for the policy engine in
    # 0.4x, still honoured by the pinned release).
    allowed_tools=lambda tools: [f"--allowed-tools={tool}" for tool in tools],
)


#: gemini's Code Assist login refusing the account for good: personal Google accounts were moved
#: to Google's Antigravity CLI on 2026-06-18 (its IneligibleTierError, "... migrate to the
#: Antigravity suite").
ACCOUNT_REFUSED = re.compile(r"(?i)IneligibleTierError|migrate to the Antigravity")
ANTIGRAVITY_HINT = (
    "Google moved personal Google accounts from Gemini CLI to its Antigravity CLI (agy), which waaah "
    "cannot supervise; what works: a Gemini API key (GEMINI_API_KEY, https://aistudio.google.com/apikey), "
    "a Gemini Code Assist Standard or Enterprise login, Vertex AI, or another CLI (--start=claude, "
    "codex or opencode)"
)

RULES = ScreenRules(
    # The input box line: ` >   Type your message...` when empty, ` > <text>` with a draft.
    input_ready=re.compile(r"^\s*│?\s*>\s", re.MULTILINE),
    input_empty=re.compile(r"^\s*│?\s*>\s+Type your message", re.MULTILINE),
    # The placeholder stays visible while an MCP tool runs, so busy must win over it.
    # "Resuming session..." shows under a Ready title while --resume loads the history; an
    # Enter typed then is lost.
    busy=re.compile(r"\(esc to cancel|Resuming session\.\.\."),
    title_ready=re.compile(r"^◇"),
    title_busy=re.compile(r"^✦"),
    dialog=re.compile(
        r"Do you trust the files in this folder\?|Allow execution|Apply this change\?|Waiting for user confirmation"
    ),
    # The auth-method choice, the key entry, and the code screen of "Sign in with Google" with no
    # browser (an OAuth URL, then `Enter the authorization code:`).
    login=re.compile(
        r"│\s+How would you like to authenticate for this project\?|│\s+Enter Gemini API Key|"
        r"^Enter the authorization code:",
        re.MULTILINE,
    ),
    secret_entry=re.compile(r"│\s+Enter Gemini API Key|^Enter the authorization code:", re.MULTILINE),
    # A personal Google account, moved to Google's Antigravity CLI: gemini's IneligibleTierError,
    # shown in its auth dialog as `Failed to sign in. Message: <the reason the server gave>`.
    login_refused=re.compile(r"Failed to sign in\. Message: [^╰]{0,400}?Antigravity[^│\n]*"),
    limit=re.compile(r"│\s+Usage limit reached for [^│\n]*|│\s+You have exhausted your [^│\n]*quota"),
    exited=re.compile(r"Agent powering down\. Goodbye!|│\s+To resume this session: gemini --resume"),
    # After its loop detector fired twice in a turn (identical wait_for_prompt calls trip it):
    # "● 1. Keep loop detection enabled (esc) / 2. Disable loop detection for this session";
    # kept on, "ℹ A potential loop was detected. ... The request has been halted."
    loop_dialog=re.compile(r"│\s+2\. Disable loop detection for this session"),
    loop_halted=re.compile(r"ℹ A potential loop was detected\."),
)

ADAPTER = Adapter(
    name="gemini",
    display_name="Gemini CLI",
    binary="gemini",
    install_hint=install_command("gemini", "@google/gemini-cli", "0.61.0"),
    login_hint="gemini (then choose a login method), or set GEMINI_API_KEY",
    refused_hint=ANTIGRAVITY_HINT,
    account_refused=ACCOUNT_REFUSED,
    rules=RULES,
    tested_version="0.61.0",
    releases=ReleaseSupport(
        tested="0.61.0",
        oldest="0.34.0",
        update_hint=install_command("gemini", "@google/gemini-cli", "0.61.0"),
        needs=("--resume",),
        own_id_option="--session-id",  # 0.34.0 has none: the id is read back (_learn_session_id)
        older_tested=("0.51.0", "0.34.0"),
    ),
    own_session=_learn_session_id,
    limit_resume_keys=b"\r",
    loop_dialog_keys=b"2",
    enter_delay=0.5,
    fresh_args=lambda sid: ["--session-id", sid],
    resume_args=lambda sid: ["--resume", sid],
    transcript=_transcript,
    compactions=gemini_compactions,
    session_files=_session_files,
    holds_conversation=gemini_holds,
    needs_login=_needs_login,
    # A home of its own per run: the user's ~/.gemini linked, its settings.json the user's with
    # the waaah entry and loop detection off (an agent waiting in its loop repeats one call).
    mcp=HomePerRun(
        home_var="GEMINI_CLI_HOME",
        folder=".gemini",
        entry=gemini_entry,
        run_settings={("model", "disableLoopDetection"): True},
        persistent=Persistent(_settings_path, gemini_entry, comments=True),
        comments=True,  # gemini reads its settings through strip-json-comments
    ),
    tokens=gemini_counter,
    model_aliases=models.ALIASES,
    smaller_model=models.smaller_model,
    reasoning=gemini_thoughts,
    # gemini takes CI=true (or CI_*) as "not interactive" and quits waiting for stdin; under
    # our PTY it always is interactive.
    drop_env=("CI", "CONTINUOUS_INTEGRATION", "CI_"),
    provider_env=("GEMINI_", "GOOGLE_", "GCLOUD_", "CLOUDSDK_", "CODE_ASSIST_"),
    headless=Headless(_headless, parser=lambda: StreamParser(apply_gemini), inputs=INPUTS),
)
