"""Re-record the real CLI screens used as detector fixtures, from the pinned versions.

    .venv/bin/python scripts/record_screens.py [gemini|claude|codex]   (default: gemini and claude)

For each CLI it starts the fake model API (tests/doubles/fake_model.py), runs the installed CLI
in a 120x40 PTY (TERM=xterm-256color) with a throwaway HOME, drives it into each state and saves
the raw PTY bytes read so far at that moment to
``tests/fixtures/screens/<cli>-<version>/<state>.bin``, plus ``meta.json`` describing how each
state was reached. The bytes include the window title (OSC 0) the CLI set.

States: idle, draft, busy, reply, tool, exit, dialog, login, limit (a final usage-limit error)
and, for claude and codex, trust; for gemini also loop (its loop detector halting a run of identical
wait_for_prompt calls), oauth ("Sign in with Google" with no credentials: the authorization code
prompt) and refused (a Google account the Code Assist API refuses: IneligibleTierError). Each group of states comes from its own short session (fresh start).
``--only STATE`` re-records one state of the installed version and keeps the others.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a plain script from the repository root

from codex_screens import codex_session  # noqa: E402

from tests.doubles import fake_openai  # noqa: E402
from tests.doubles.cli_homes import (  # noqa: E402
    ENTER_GAP,
    CliPty,
    Rendered,
    claude_env,
    claude_idle,
    cli_bin,
    cli_version,
    codex_idle,
    gemini_env,
    gemini_idle,
    slow_mcp_server,
)
from tests.doubles.fake_code_assist import FakeCodeAssist, code_assist_env  # noqa: E402
from tests.doubles.fake_model import FakeModel, HttpError, Rule, Text, ToolCall  # noqa: E402

ROWS, COLS = 40, 120
FIXTURES = REPO / "tests" / "fixtures" / "screens"
BUSY_SECONDS = 5.0
TOOL_SECONDS = 3.0

#: How long after the state first shows to take the snapshot (the spinner has drawn a few frames).
BUSY_SNAPSHOT_AFTER = 0.3
TOOL_SNAPSHOT_AFTER = 0.3

DRAFT = "BUSY-MARKER please summarise the plan"
BUSY_REPLY = "Here is the summary you asked for."
REPLY_PROMPT = "REPLY-MARKER say hello"
QUICK_REPLY = "Hello from the fake model."
TOOL_PROMPT = "TOOL-MARKER wait for the next task"
TOOL_REPLY = "Back from wait_for_prompt."

Check = Callable[[Rendered], bool]
JsonEdit = Callable[[dict[str, Any]], None]


def model_rules() -> list[Rule]:
    """Scripted replies: a slow and a quick text answer, a final 429, one wait_for_prompt round trip."""
    return [
        Rule(marker="BUSY-MARKER", reply=Text(BUSY_REPLY, delay=BUSY_SECONDS)),
        Rule(marker="REPLY-MARKER", reply=Text(QUICK_REPLY)),
        Rule(marker="LIMIT-MARKER", reply=HttpError(429, retryable=False)),
        Rule(
            marker="TOOL-MARKER",
            reply=[ToolCall("wait_for_prompt", {"agentId": "recorder", "timeout": 290}), Text(TOOL_REPLY)],
        ),
    ]


def codex_rules() -> list[fake_openai.Rule]:
    """The same script for codex's fake (the OpenAI Responses API)."""
    o = fake_openai
    return [
        o.Rule("BUSY-MARKER", o.Text(BUSY_REPLY, delay=BUSY_SECONDS)),
        o.Rule("REPLY-MARKER", o.Text(QUICK_REPLY)),
        o.Rule("LIMIT-MARKER", o.HttpError(429, body=o.CODEX_QUOTA)),
        o.Rule("TOOL-MARKER", o.McpCall("waaah", "wait_for_prompt", {"agentId": "recorder", "timeout": 290})),
        o.Rule("", o.Text(TOOL_REPLY), after_tool="wait_for_prompt"),
    ]


# --------------------------------------------------------------------------------------------
# Per-CLI knowledge
# --------------------------------------------------------------------------------------------


@dataclass
class Profile:
    """How to recognise one CLI's states on screen and how to leave it."""

    name: str
    idle: Check
    busy: Check
    tool: Check
    quit_command: str
    idle_how: str
    busy_how: str
    tool_how: str


PROFILES = {
    "gemini": Profile(
        name="gemini",
        idle=gemini_idle,
        busy=lambda s: "esc to cancel" in s.text,
        tool=lambda s: "wait_for_prompt (waaah MCP Server)" in s.text and "esc to cancel" in s.text,
        quit_command="/quit",
        idle_how="title '◇  Ready (...)' and 'Type your message' placeholder",
        busy_how="'esc to cancel' spinner line; title '✦  Working… (...)'",
        tool_how="'⊷  wait_for_prompt (waaah MCP Server)' box plus spinner",
    ),
    "claude": Profile(
        name="claude",
        idle=claude_idle,
        busy=lambda s: "esc to interrupt" in s.text,
        tool=lambda s: "Calling waaah" in s.text and "esc to interrupt" in s.text,
        quit_command="/exit",
        idle_how="title '✳ Claude Code', '❯' prompt between rules, no 'esc to interrupt'",
        busy_how="'esc to interrupt' in the footer, spinner line; title '◐/◑ Claude Code'",
        tool_how="'Calling waaah…' plus 'esc to interrupt'",
    ),
    "codex": Profile(
        name="codex",
        idle=codex_idle,
        busy=lambda s: "esc to interrupt" in s.text,
        tool=lambda s: "waaah.wait_for_prompt" in s.text and "esc to interrupt" in s.text,
        quit_command="/quit",
        idle_how="'› Ask Codex to do anything' composer, no 'esc to interrupt'",
        busy_how="'• Working (0s • esc to interrupt)' line above the composer",
        tool_how="'• Calling waaah.wait_for_prompt(...)' plus 'esc to interrupt'",
    ),
}


# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------


@dataclass
class Recorder:
    """Collects state snapshots of one CLI into its fixture directory."""

    cli: str
    out: Path
    version: str
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def save(self, state: str, pty: CliPty, how: str) -> None:
        """Write the bytes read so far as ``<state>.bin`` and note how the state was reached."""
        data = bytes(pty.raw)
        (self.out / f"{state}.bin").write_bytes(data)
        screen = pty.screen()
        self.states[state] = {"file": f"{state}.bin", "bytes": len(data), "title": screen.title, "how": how}
        print(f"  {state:7s} {len(data):7d} bytes  title={screen.title!r}")

    def write_meta(self) -> None:
        """meta.json: version, terminal size and every state's description."""
        meta = {
            "cli": self.cli,
            "version": self.version,
            "rows": ROWS,
            "cols": COLS,
            "term": "xterm-256color",
            "colorterm": "truecolor",
            "recorded_by": "scripts/record_screens.py",
            "enter_gap_seconds": ENTER_GAP,
            "timings_seconds": {k: round(v, 2) for k, v in self.timings.items()},
            "states": self.states,
        }
        (self.out / "meta.json").write_text(
            json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )


#: What each CLI shows once a usage-limit error is final (see HttpError.retryable).
LIMIT_SIGNS: dict[str, tuple[str, str]] = {
    "gemini": (
        "Usage limit reached",
        "'Usage limit reached for all Pro models.' dialog (Keep trying / Stop)",
    ),
    "claude": ("Request rejected (429)", "'API Error: Request rejected (429) · ...rate limit.', idle again"),
    "codex": (
        "usage limit",
        "429 usage_limit_reached (resets in 2 h): codex's '■ You've hit your usage limit' line",
    ),
}


def record_limit(rec: Recorder, profile: Profile) -> None:
    """limit: the model API answers 429 with a non-retryable usage-limit error."""
    sign, how = LIMIT_SIGNS[rec.cli]
    with session(rec.cli) as (pty, _):
        start_idle(pty, profile)
        pty.paste("LIMIT-MARKER hello")
        pty.enter()
        pty.wait(lambda s: sign in s.text, "usage-limit message")
        pty.settle()
        rec.save("limit", pty, f"fake model answers 429 (HttpError retryable=False); {how}")


def _edit_json(path: Path, edit: JsonEdit) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


@contextmanager
def session(
    cli: str,
    extra_args: tuple[str, ...] = (),
    *,
    settings_edit: JsonEdit | None = None,
    state_edit: JsonEdit | None = None,
    rules: list[Any] | None = None,
    extra_env: dict[str, str] | None = None,
    **env_kwargs: Any,
) -> Iterator[tuple[CliPty, Path]]:
    """A fresh fake model, temp HOME and git workspace, and the CLI running in a PTY.

    ``env_kwargs`` go to gemini_env/claude_env (``mcp_servers``, ``api_key``); ``settings_edit``
    changes the written settings.json and ``state_edit`` claude's ~/.claude.json before the start.
    Yields the Pty and the temp root; everything is stopped and removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="waaah-rec-"))
    try:
        ws = root / "ws"
        ws.mkdir()
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        if cli == "codex":
            script = codex_rules() if rules is None else rules
            with codex_session(script, root, ws, extra_args, **env_kwargs) as pty:
                yield pty, root
            return
        with FakeModel(model_rules() if rules is None else rules) as fake:
            if cli == "gemini":
                env = gemini_env(root / "home", fake.url, **env_kwargs)
            else:
                env = claude_env(root / "home", fake.url, ws, **env_kwargs)
            settings = root / "home" / (".gemini" if cli == "gemini" else ".claude") / "settings.json"
            if settings_edit is not None:
                _edit_json(settings, settings_edit)
            if state_edit is not None:
                _edit_json(root / "home" / ".claude.json", state_edit)
            env.update(extra_env or {})
            pty = CliPty([str(cli_bin(cli)), *extra_args], env, ws)
            try:
                yield pty, root
            finally:
                pty.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def start_idle(pty: CliPty, profile: Profile) -> float:
    """Wait for the idle screen and let the start-up output finish; returns seconds to idle."""
    took = pty.wait(profile.idle, "idle")
    pty.settle()
    return took


def record_main_states(rec: Recorder, profile: Profile) -> None:
    """idle, draft, busy / reply, exit / tool, each group from a fresh start.

    Every fixture holds all bytes since start-up, and gemini redraws its whole bottom area on
    each spinner frame (~40 KB/s while busy), so short sessions keep the fixtures small."""
    with session(rec.cli) as (pty, _):
        rec.timings["start_to_idle"] = start_idle(pty, profile)
        rec.save("idle", pty, f"fresh start with the offline HOME; {profile.idle_how}")
        pty.paste(DRAFT)
        pty.wait(lambda s: "BUSY-MARKER" in s.text, "draft text")
        pty.settle()
        rec.save("draft", pty, f"bracketed paste {DRAFT!r}, not submitted")
        pty.enter()
        submitted = time.monotonic()
        pty.wait(profile.busy, "busy")
        rec.timings["enter_to_busy"] = time.monotonic() - submitted
        pty.pump(BUSY_SNAPSHOT_AFTER)
        rec.save(
            "busy", pty, f"Enter; the fake model holds its reply {BUSY_SECONDS:.0f} s; {profile.busy_how}"
        )

    with session(rec.cli) as (pty, _):
        start_idle(pty, profile)
        pty.paste(REPLY_PROMPT)
        pty.enter()
        pty.wait(lambda s: QUICK_REPLY in s.text and profile.idle(s), "reply")
        pty.settle()
        rec.save("reply", pty, f"prompt {REPLY_PROMPT!r}; idle again after the text reply {QUICK_REPLY!r}")
        pty.keys(profile.quit_command)
        pty.enter()
        pty.wait_exit()
        rec.save("exit", pty, f"after the reply: typed {profile.quit_command}, Enter; the CLI exited")

    with session(rec.cli, mcp_servers={"waaah": slow_mcp_server(TOOL_SECONDS)}) as (pty, _):
        start_idle(pty, profile)
        pty.paste(TOOL_PROMPT)
        pty.enter()
        pty.wait(profile.tool, "tool call")
        pty.pump(TOOL_SNAPSHOT_AFTER)
        rec.save(
            "tool",
            pty,
            f"model called wait_for_prompt (slow_mcp sleeps {TOOL_SECONDS:.0f} s); {profile.tool_how}",
        )
        # Let the call finish so the CLI shuts its MCP server down itself.
        pty.wait(lambda s: TOOL_REPLY in s.text and profile.idle(s), "reply after tool", timeout=30)


def record_gemini_extras(rec: Recorder) -> None:
    """dialog: the folder trust dialog; login: the auth-method choice with no key."""

    def trust_on(settings: dict[str, Any]) -> None:
        settings["security"]["folderTrust"]["enabled"] = True

    def no_auth(settings: dict[str, Any]) -> None:
        del settings["security"]["auth"]

    with session("gemini", settings_edit=trust_on) as (pty, _):
        pty.wait(lambda s: "Do you trust the files in this folder?" in s.text, "trust dialog")
        pty.settle()
        rec.save("dialog", pty, "security.folderTrust.enabled=true, untrusted workspace: folder trust dialog")

    with session("gemini", api_key=None, settings_edit=no_auth) as (pty, _):
        pty.wait(lambda s: "How would you like to authenticate" in s.text, "auth dialog")
        pty.settle()
        rec.save(
            "login", pty, "no API key and no security.auth.selectedType: 'Get started' auth-method dialog"
        )


def record_gemini_google_login(rec: Recorder) -> None:
    """oauth: "Sign in with Google" chosen and no credentials: with no browser, gemini prints an
    OAuth URL and waits at `Enter the authorization code:` (a login, for a person to finish).
    refused: a Google account the Code Assist API refuses (tests/doubles/fake_code_assist.py), as
    it refuses personal accounts moved to Antigravity: gemini's auth dialog says why."""

    def google(settings: dict[str, Any]) -> None:
        settings["security"]["auth"]["selectedType"] = "oauth-personal"

    with session("gemini", api_key=None, settings_edit=google) as (pty, _):
        pty.wait(lambda s: "Enter the authorization code:" in s.text, "the authorization code prompt")
        pty.settle()
        rec.save(
            "oauth", pty, "security.auth.selectedType=oauth-personal, no key, no credentials, no browser"
        )

    with FakeCodeAssist() as code_assist:
        extra = code_assist_env(code_assist.url)
        with session("gemini", api_key=None, settings_edit=google, extra_env=extra) as (pty, _):
            pty.wait(lambda s: "Failed to sign in" in s.text, "the sign-in failure")
            pty.settle()
            rec.save(
                "refused",
                pty,
                "signed in with Google (GOOGLE_GENAI_USE_GCA, an access token); the Code Assist API "
                "(fake_code_assist.py) refuses the account: IneligibleTierError in the auth dialog",
            )


def record_gemini_loop(rec: Recorder) -> None:
    """loop: the model calls wait_for_prompt with the same arguments again and again, as an agent
    waiting in its loop does, and keeps doing so after gemini's first loop detection (which only
    tells the model): at the second, gemini asks whether to keep loop detection on.
    loop-halted: "keep it enabled" (Esc) chosen there; gemini halts the request."""
    call = ToolCall("wait_for_prompt", {"agentId": "recorder", "timeout": 1})
    rules = [
        Rule(marker="LOOP-MARKER", reply=call),
        Rule(tool_result="wait_for_prompt", reply=call),
        Rule(marker="Potential loop detected", reply=call),  # gemini's own feedback to the model
    ]
    with session("gemini", rules=rules, mcp_servers={"waaah": slow_mcp_server(0.2)}) as (pty, _):
        start_idle(pty, PROFILES["gemini"])
        pty.paste("LOOP-MARKER wait for tasks")
        pty.enter()
        pty.wait(lambda s: "keep loop detection enabled" in s.text, "loop detection dialog", timeout=90)
        pty.settle()
        rec.save(
            "loop", pty, "the same wait_for_prompt call repeated past gemini's loop feedback: its dialog"
        )
        pty.keys("\x1b")
        pty.wait(lambda s: "The request has" in s.text, "halt message", timeout=30)
        pty.settle()
        rec.save("loop-halted", pty, "Esc (keep loop detection enabled) in that dialog: the halt message")


def record_claude_extras(rec: Recorder) -> None:
    """dialog: an MCP permission prompt; trust: the folder trust dialog; login: no key."""

    def no_allow_rules(settings: dict[str, Any]) -> None:
        settings.pop("permissions", None)

    def untrusted(state: dict[str, Any]) -> None:
        state["projects"] = {}

    mcp = {"waaah": slow_mcp_server(1)}
    # Manual permission mode and no allow rule, so the tool call asks first. (In the default
    # auto mode claude first says its server-side safety check is unreachable.)
    with session(
        "claude", ("--permission-mode", "default"), mcp_servers=mcp, settings_edit=no_allow_rules
    ) as (pty, _):
        start_idle(pty, PROFILES["claude"])
        pty.paste(TOOL_PROMPT)
        pty.enter()
        pty.wait(lambda s: "Do you want to proceed?" in s.text, "permission dialog")
        pty.settle()
        rec.save(
            "dialog",
            pty,
            "--permission-mode default, no allow rule; model calls wait_for_prompt: permission dialog",
        )

    with session("claude", state_edit=untrusted) as (pty, _):
        pty.wait(lambda s: "Yes, I trust this folder" in s.text, "trust dialog")
        pty.settle()
        rec.save("trust", pty, "workspace not marked trusted in ~/.claude.json: folder trust dialog")

    with session("claude", api_key=None) as (pty, _):
        start_idle(pty, PROFILES["claude"])
        pty.paste("hello")
        pty.enter()
        pty.wait(lambda s: "Not logged in" in s.text, "not logged in")
        pty.settle()
        rec.save(
            "login",
            pty,
            "no API key (onboarding done): sent 'hello', got 'Not logged in · Please run /login'",
        )


def record_codex_ratelimits(rec: Recorder) -> None:
    """ratelimits: the usage limit answered with the plan's rate-limit headers (the 5-hour
    window used up): codex's limit line, then its "Approaching rate limits" question."""
    headers = fake_openai.codex_limit_headers(int(time.time()) + 7200)
    quota = fake_openai.HttpError(429, body=fake_openai.CODEX_QUOTA, headers=headers)
    rules = [fake_openai.Rule("LIMIT-MARKER", quota)]
    with session("codex", rules=rules) as (pty, _):
        start_idle(pty, PROFILES["codex"])
        pty.paste("LIMIT-MARKER hello")
        pty.enter()
        pty.wait(lambda s: "Approaching rate limits" in s.text, "the rate-limit question")
        pty.settle()
        rec.save(
            "ratelimits",
            pty,
            "429 usage_limit_reached with x-codex-primary-* headers (100 % used, resets in 2 h): the "
            "limit line and the 'Approaching rate limits' question",
        )


def record_codex_extras(rec: Recorder) -> None:
    """dialog: the "Meet <newer model>" migration codex shows on the first start with an older
    catalogued model; trust: an untrusted workspace; login: no provider configured, no key."""
    with session("codex", model="gpt-5.5") as (pty, _):
        pty.wait(lambda s: "Try new model" in s.text, "model migration dialog")
        pty.settle()
        rec.save("dialog", pty, "model gpt-5.5 (its catalogue offers an upgrade): 'Meet GPT-6 Sol' dialog")

    with session("codex", trusted=False) as (pty, _):
        pty.wait(lambda s: "trust" in s.text.lower() and "1." in s.text, "trust dialog")
        pty.settle()
        rec.save("trust", pty, "workspace not trusted in config.toml: the trust dialog")

    def no_provider(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if not line.startswith("model_provider"))

    with session("codex", api_key=None, config_edit=no_provider) as (pty, _):
        pty.wait(lambda s: "Sign in" in s.text or "API key" in s.text, "sign-in screen")
        pty.settle()
        rec.save("login", pty, "the OpenAI provider, no OPENAI_API_KEY and no login: the sign-in screen")


def record_one(cli: str, how: Callable[[Recorder], None]) -> None:
    """Add or replace one state in the installed version's fixtures, keeping the others."""
    version = cli_version(cli)
    out = FIXTURES / f"{cli}-{version}"
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    rec = Recorder(cli, out, version, states=meta["states"], timings=meta["timings_seconds"])
    how(rec)
    rec.write_meta()


def record(cli: str) -> Path:
    """Record every state of ``cli`` into a fresh fixture directory; returns it."""
    version = cli_version(cli)
    out = FIXTURES / f"{cli}-{version}"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rec = Recorder(cli, out, version)
    print(f"{cli} {version} -> {out.relative_to(REPO)}")
    record_main_states(rec, PROFILES[cli])
    record_limit(rec, PROFILES[cli])
    if cli == "gemini":
        record_gemini_extras(rec)
        record_gemini_google_login(rec)
        record_gemini_loop(rec)
    elif cli == "codex":
        record_codex_extras(rec)
        record_codex_ratelimits(rec)
    else:
        record_claude_extras(rec)
    rec.write_meta()
    total = sum(s["bytes"] for s in rec.states.values())
    print(f"  total {total} bytes; start-up to idle {rec.timings['start_to_idle']:.2f} s")
    return out


ONLY: dict[str, tuple[str, Callable[[Recorder], None]]] = {
    "loop": ("gemini", record_gemini_loop),
    "google-login": ("gemini", record_gemini_google_login),
    "ratelimits": ("codex", record_codex_ratelimits),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point: record the named CLI, or both."""
    parser = argparse.ArgumentParser(description="Re-record real CLI screens as detector fixtures.")
    parser.add_argument("cli", nargs="?", choices=["gemini", "claude", "codex", "all"], default="all")
    parser.add_argument(
        "--only",
        choices=list(ONLY),
        help="re-record these states only (gemini: loop, google-login; codex: ratelimits), keep the others",
    )
    args = parser.parse_args(argv)
    if args.only:
        record_one(*ONLY[args.only])
        return 0
    for cli in ["gemini", "claude"] if args.cli == "all" else [args.cli]:
        record(cli)
    return 0


if __name__ == "__main__":
    sys.exit(main())
