"""Re-record the real CLI transcripts used as token-usage fixtures, from the pinned versions.

    .venv/bin/python scripts/record_transcripts.py [gemini|claude|codex]   (default: gemini and claude)
    .venv/bin/python scripts/record_transcripts.py gemini --release 0.34.0   (from make clis-old)

For each CLI it starts the fake model API (tests/doubles/fake_model.py) with fixed token numbers
per reply, runs the installed CLI in a PTY with a throwaway HOME and does two turns: a plain text
reply, then a turn where the model calls ``wait_for_prompt`` (tests/doubles/slow_mcp.py) and
answers after the result. So each session makes three model calls. After the CLI exits, the
session file it wrote is copied to ``tests/fixtures/transcripts/<cli>-<version>.jsonl`` (``.json``
for gemini 0.34.0, which keeps its session as one JSON document) with the
throwaway paths replaced by neutral ones (see NEUTRAL).

Where the files are:

* claude: ``$HOME/.claude/projects/<cwd with non-alphanumerics as ->/<session uuid>.jsonl``
* gemini: ``$HOME/.gemini/tmp/<project short name>/chats/session-<date>-<id8>.jsonl``
* codex: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`` (the fake OpenAI API)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a plain script from the repository root

from tests.doubles import fake_openai  # noqa: E402
from tests.doubles.cli_homes import (  # noqa: E402
    IDLE_CHECKS,
    CliPty,
    Rendered,
    claude_env,
    cli_bin,
    cli_version,
    codex_env,
    gemini_env,
    old_cli_bin_dir,
    slow_mcp_server,
)
from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall, Usage  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "transcripts"

#: Token numbers the fake model reports for every reply (tests/unit/test_tokens.py relies on them).
USAGE = Usage(input_tokens=1200, output_tokens=34)
#: Model calls in one recorded session: one for the first turn, two for the tool turn.
MODEL_CALLS = 3

FIRST_PROMPT = "FIRST-MARKER say hello"
FIRST_REPLY = "Hello from the fake model."
TOOL_PROMPT = "TOOL-MARKER wait for the next task"
TOOL_REPLY = "Back from wait_for_prompt."
QUIT = {"gemini": "/quit", "claude": "/exit", "codex": "/quit"}
#: Each CLI's command that compacts its conversation, and what its screen says when done.
COMPACT = {
    "gemini": ("/compress", "Chat history compressed"),
    "claude": ("/compact", "Compacted"),
    "codex": ("/compact", "compacted"),
}
SUMMARY = "SUMMARY-MARKER: the user said hello, then asked to wait for the next task."

#: Neutral stand-ins for the throwaway directories, applied longest first.
NEUTRAL = {"ws": "/home/user/project", "home": "/home/user", "": "/tmp/recording"}


def model_rules() -> list[Rule]:
    """A plain text answer, and one wait_for_prompt round trip followed by a text answer."""
    return [
        Rule(marker="FIRST-MARKER", reply=Text(FIRST_REPLY)),
        Rule(
            marker="TOOL-MARKER",
            reply=[ToolCall("wait_for_prompt", {"agentId": "recorder", "timeout": 290}), Text(TOOL_REPLY)],
        ),
    ]


def codex_rules() -> list[fake_openai.Rule]:
    """The same two turns from the fake OpenAI API."""
    o = fake_openai
    return [
        o.Rule("FIRST-MARKER", o.Text(FIRST_REPLY)),
        o.Rule("TOOL-MARKER", o.McpCall("waaah", "wait_for_prompt", {"agentId": "recorder", "timeout": 290})),
        o.Rule("", o.Text(TOOL_REPLY), after_tool="wait_for_prompt"),
    ]


def replied(reply: str, idle: Callable[[Rendered], bool]) -> Callable[[Rendered], bool]:
    """A check: ``reply`` is on screen and the CLI is idle again."""
    return lambda screen: reply in screen.text and idle(screen)


def session_file(cli: str, home: Path) -> Path:
    """The one session file the CLI wrote under ``home``."""
    if cli == "gemini":
        found = sorted((home / ".gemini" / "tmp").glob("*/chats/session-*.json*"))
    elif cli == "codex":
        found = sorted((home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))
    else:
        found = sorted((home / ".claude" / "projects").glob("*/*.jsonl"))
    if len(found) != 1:
        raise RuntimeError(f"expected one {cli} session file under {home}, found {found}")
    return found[0]


def _dashed(path: str) -> str:
    """claude's project directory name for a workspace path."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def neutralise(text: str, root: Path) -> str:
    """Replace the throwaway paths (also in their JSON-escaped and claude's dashed forms)."""
    for sub, neutral in NEUTRAL.items():
        real = str(root / sub) if sub else str(root)
        for old, new in ((real, neutral), (_dashed(real), _dashed(neutral))):
            text = text.replace(old, new)
            text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    return text


def fake_model(cli: str) -> FakeModel | fake_openai.FakeOpenAI:
    """The fake model API the CLI talks to, reporting ``USAGE`` for every reply; a request no
    rule answers (the summary a compaction asks for) gets ``SUMMARY``."""
    if cli == "codex":
        usage = fake_openai.Usage(USAGE.input_tokens, USAGE.output_tokens, cached_tokens=0)
        return fake_openai.FakeOpenAI(
            [*codex_rules(), fake_openai.Rule("", fake_openai.Text(SUMMARY))], usage=usage
        )
    return FakeModel(model_rules(), usage=USAGE, default=Text(SUMMARY))


def record(cli: str, release: str = "", compact: bool = False) -> Path:
    """Run two turns of ``cli`` (the pinned release, or an older ``release``) and save its session
    file as a fixture; returns the fixture path. ``compact``: then have the CLI compact its
    conversation (its own command) and save it as ``<cli>-<version>.compacted.jsonl``."""
    version = release or cli_version(cli)
    binary = old_cli_bin_dir(cli, release) / cli if release else cli_bin(cli)
    root = Path(tempfile.mkdtemp(prefix="waaah-rec-")).resolve()
    try:
        ws = root / "ws"
        ws.mkdir()
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        mcp = {"waaah": slow_mcp_server(0.5)}
        with fake_model(cli) as fake:
            if cli == "gemini":
                env = gemini_env(root / "home", fake.url, mcp_servers=mcp)
            elif cli == "codex":
                env = codex_env(root / "home", f"{fake.url}/v1", ws, mcp_servers=mcp)
            else:
                env = claude_env(root / "home", fake.url, ws, mcp_servers=mcp)
            idle = IDLE_CHECKS[cli]
            with CliPty([str(binary)], env, ws) as pty:
                pty.wait(idle, "idle")
                pty.settle()
                for prompt, reply in ((FIRST_PROMPT, FIRST_REPLY), (TOOL_PROMPT, TOOL_REPLY)):
                    pty.paste(prompt)
                    pty.enter()
                    pty.wait(replied(reply, idle), f"reply {reply!r}")
                    pty.settle()
                if compact:
                    command, done = COMPACT[cli]
                    pty.keys(command)
                    pty.pump(1.0)  # its completion list under the box first
                    pty.enter()
                    pty.wait(lambda s: done in s.text and idle(s), f"{command} done", timeout=90)
                    pty.settle()
                pty.keys(QUIT[cli])
                pty.enter()
                pty.wait_exit()
        found = session_file(cli, root / "home")
        text = neutralise(found.read_text(encoding="utf-8"), root)
        out = FIXTURES / f"{cli}-{version}{'.compacted' if compact else ''}{found.suffix}"
        FIXTURES.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        print(f"{cli} {version} -> {out.relative_to(REPO)} ({len(text.splitlines())} lines)")
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point: record the named CLI, or both."""
    parser = argparse.ArgumentParser(description="Re-record real CLI transcripts as token fixtures.")
    parser.add_argument("cli", nargs="?", choices=["gemini", "claude", "codex", "all"], default="all")
    parser.add_argument("--release", default="", help="an older release installed by make clis-old")
    parser.add_argument(
        "--compact", action="store_true", help="then compact (<cli>-<version>.compacted.jsonl)"
    )
    args = parser.parse_args(argv)
    for cli in ["gemini", "claude"] if args.cli == "all" else [args.cli]:
        record(cli, args.release, args.compact)
    return 0


if __name__ == "__main__":
    sys.exit(main())
