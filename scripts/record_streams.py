"""Re-record the real CLIs' headless JSON streams used as `waaah run` parser fixtures.

    .venv/bin/python scripts/record_streams.py [gemini|claude|all]   (default: all)

For each pinned CLI it starts the fake model API (tests/doubles/fake_model.py) with fixed token
numbers, runs the CLI headless (``gemini -p ... --output-format stream-json``, ``claude -p ...
--output-format stream-json --verbose``) in a throwaway HOME and git workspace, one scenario at a
time, and saves what the CLI produced, byte for byte but for the throwaway paths:

    tests/fixtures/streams/<cli>-<version>/<scenario>.stdout   the JSON stream (and any noise)
    tests/fixtures/streams/<cli>-<version>/<scenario>.stderr
    tests/fixtures/streams/<cli>-<version>/<scenario>.exit     the exit code, or "timeout"

Scenarios: ``answer`` (plain reply), ``tool`` (an MCP tool call, then a reply), ``resume`` (a second
turn of ``answer``'s session through the CLI's own resume), ``rate_limit`` (a final 429),
``server_error`` (HTTP 500), ``auth`` (HTTP 401), ``no_key`` (no API key at all), ``bad_model``
(HTTP 404 for the model), ``bad_session`` (resume of an id the CLI never had), ``rate_limit_words`` (the model's own answer talks about rate limits:
not an error) and ``thinking`` (the model thinks first: the anthropic API's thinking block, gemini's
thought parts; the session file the CLI wrote is kept too, as ``thinking.session.jsonl``); for
gemini also ``oauth_needed`` ("Sign in with Google" chosen, no credentials: headless it cannot
ask) and ``account_refused`` (a Google account the Code Assist API refuses, as it refuses personal
accounts moved to Antigravity: tests/doubles/fake_code_assist.py).

``--scenario NAME`` (repeatable) records only those scenarios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a plain script from the repository root
sys.path.insert(0, str(REPO / "scripts"))

from record_transcripts import neutralise  # noqa: E402

from tests.doubles.cli_homes import claude_env, cli_bin, cli_version, gemini_env, slow_mcp_server  # noqa: E402
from tests.doubles.fake_code_assist import FakeCodeAssist, code_assist_env  # noqa: E402
from tests.doubles.fake_model import FakeModel, HttpError, Rule, Text, ToolCall, Usage  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "streams"

#: Token numbers of every reply (tests/unit/test_streams.py relies on them).
USAGE = Usage(input_tokens=1200, output_tokens=34)
ANSWER = "Hello from the fake model."
TOOL_REPLY = "Back from wait_for_prompt."
WORDS = "Note: the API has a rate limit of 60 requests per minute; 429 means slow down."
THOUGHT = "The user asks for a greeting.\n\nA short, friendly one will do."
#: A CLI that keeps retrying an error on its own is cut off after this many seconds.
SCENARIO_TIMEOUT = 20.0

PROMPTS = {
    "answer": "ANSWER-MARKER say hello",
    "tool": "TOOL-MARKER wait for the next task",
    "resume": "ANSWER-MARKER say it again",
    "rate_limit": "LIMIT-MARKER go",
    "server_error": "E500-MARKER go",
    "auth": "E401-MARKER go",
    "no_key": "ANSWER-MARKER say hello",
    "bad_model": "E404-MARKER go",
    "rate_limit_words": "WORDS-MARKER explain rate limits",
    "bad_session": "ANSWER-MARKER say hello",
    "thinking": "THINK-MARKER say hello",
    # gemini only: "Sign in with Google" chosen and no credentials (headless: no way to log in),
    # and a Google account the Code Assist API refuses (tests/doubles/fake_code_assist.py).
    "oauth_needed": "ANSWER-MARKER say hello",
    "account_refused": "ANSWER-MARKER say hello",
}
GEMINI_ONLY = ("oauth_needed", "account_refused")


def model_rules() -> list[Rule]:
    return [
        Rule(marker="ANSWER-MARKER", reply=Text(ANSWER)),
        Rule(
            marker="TOOL-MARKER",
            reply=[ToolCall("wait_for_prompt", {"agentId": "recorder"}), Text(TOOL_REPLY)],
        ),
        Rule(marker="LIMIT-MARKER", reply=HttpError(429, retryable=False)),
        # claude honours x-should-retry: false (so it fails at once); gemini retries a 500 on its
        # own for minutes, which is what gets recorded (cut off at SCENARIO_TIMEOUT).
        Rule(marker="E500-MARKER", reply=HttpError(500, retryable=False)),
        Rule(marker="E401-MARKER", reply=HttpError(401, retryable=False)),
        Rule(marker="E404-MARKER", reply=HttpError(404, retryable=False)),
        Rule(marker="WORDS-MARKER", reply=Text(WORDS)),
        Rule(marker="THINK-MARKER", reply=Text(ANSWER, thinking=THOUGHT)),
    ]


def headless_argv(cli: str, prompt: str, session: tuple[str, str]) -> list[str]:
    """The argv `waaah run` uses (see waaah_agent/adapters); ``session`` is (flag, id)."""
    argv = [str(cli_bin(cli)), "-p", prompt, "--output-format", "stream-json", *session]
    return [*argv, "--verbose"] if cli == "claude" else argv


def google_login_env(home: Path, url: str) -> dict[str, str]:
    """gemini in a home where "Sign in with Google" was chosen, with no key."""
    env = gemini_env(home, url, api_key=None)
    settings = home / ".gemini" / "settings.json"
    data = json.loads(settings.read_text(encoding="utf-8"))
    data["security"]["auth"]["selectedType"] = "oauth-personal"
    settings.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return env


def session_file(cli: str, home: Path, session_id: str) -> Path:
    """The CLI's own session file of ``session_id`` under the throwaway ``home``."""
    pattern = (
        f".gemini/tmp/*/chats/session-*-{session_id[:8]}.jsonl"
        if cli == "gemini"
        else f".claude/projects/*/{session_id}.jsonl"
    )
    found = sorted(home.glob(pattern))
    if not found:
        raise RuntimeError(f"{cli} wrote no session file {pattern} under {home}")
    return found[0]


def record(cli: str, only: list[str] | None = None) -> Path:
    version = cli_version(cli)
    out = FIXTURES / f"{cli}-{version}"
    root = Path(tempfile.mkdtemp(prefix="waaah-rec-")).resolve()
    try:
        ws = root / "ws"
        ws.mkdir()
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        mcp = {"waaah": slow_mcp_server(0.3)}
        out.mkdir(parents=True, exist_ok=True)
        with FakeModel(model_rules(), usage=USAGE) as fake, FakeCodeAssist() as code_assist:
            special: dict[str, dict[str, str]] = {}
            if cli == "gemini":
                env = gemini_env(root / "home", fake.url, mcp_servers=mcp)
                no_key = gemini_env(root / "home", fake.url, mcp_servers=mcp, api_key=None)
                special["oauth_needed"] = google_login_env(root / "home-oauth", fake.url)
                special["account_refused"] = {
                    **google_login_env(root / "home-refused", fake.url),
                    **code_assist_env(code_assist.url),
                }
            else:
                env = claude_env(root / "home", fake.url, ws, mcp_servers=mcp)
                no_key = claude_env(root / "home", fake.url, ws, mcp_servers=mcp, api_key=None)
            first = str(uuid.uuid4())
            for scenario, prompt in PROMPTS.items():
                if only and scenario not in only and not (scenario == "answer" and "resume" in only):
                    continue
                if scenario in GEMINI_ONLY and cli != "gemini":
                    continue
                session = ("--resume", first) if scenario == "resume" else ("--session-id", str(uuid.uuid4()))
                if scenario == "answer":
                    session = ("--session-id", first)
                elif scenario == "bad_session":  # a session the CLI never had
                    session = ("--resume", "00000000-0000-4000-8000-000000000000")
                argv = headless_argv(cli, prompt, session)
                proc = subprocess.Popen(
                    argv,
                    cwd=ws,
                    env=special.get(scenario) or (no_key if scenario == "no_key" else env),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
                try:
                    stdout, stderr = proc.communicate(timeout=SCENARIO_TIMEOUT)
                    code = str(proc.returncode)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)  # the CLI's own group only
                    stdout, stderr = proc.communicate()
                    code = "timeout"
                for suffix, data in (("stdout", stdout), ("stderr", stderr)):
                    text = neutralise(data.decode("utf-8", "replace"), root)
                    (out / f"{scenario}.{suffix}").write_text(text, encoding="utf-8")
                (out / f"{scenario}.exit").write_text(code + "\n", encoding="utf-8")
                if scenario == "thinking":  # and the session file it wrote (where gemini keeps its thoughts)
                    kept = session_file(cli, root / "home", session[1])
                    text = neutralise(kept.read_text(encoding="utf-8"), root)
                    (out / "thinking.session.jsonl").write_text(text, encoding="utf-8")
                print(f"{cli} {version} {scenario}: exit {code}, {len(stdout.splitlines())} lines")
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Re-record the real CLIs' headless JSON streams.")
    parser.add_argument("cli", nargs="?", choices=["gemini", "claude", "all"], default="all")
    parser.add_argument("--scenario", action="append", choices=sorted(PROMPTS), help="only this one")
    args = parser.parse_args(argv)
    for cli in ["gemini", "claude"] if args.cli == "all" else [args.cli]:
        record(cli, args.scenario)
    return 0


if __name__ == "__main__":
    sys.exit(main())
