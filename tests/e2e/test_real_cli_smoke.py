"""Smoke tests of the offline harness itself: the real pinned CLIs, run directly (no supervisor)
in a PTY against the fake model API and a throwaway HOME.

They fail, never skip, when a CLI is missing: `make test` installs them first
(scripts/install_clis.sh).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.cli_homes import (
    IDLE_CHECKS,
    CliNotInstalled,
    CliPty,
    claude_env,
    cli_bin,
    gemini_env,
    slow_mcp_server,
)
from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall
from tests.e2e.conftest import assert_no_python_noise

pytestmark = pytest.mark.e2e
CLIS = ["gemini", "claude"]


def installed(cli: str) -> Path:
    """The CLI's binary, or a test failure that says how to install it."""
    try:
        return cli_bin(cli)
    except CliNotInstalled as exc:
        pytest.fail(str(exc), pytrace=False)


@contextmanager
def running_cli(
    cli: str, tmp_path: Path, fake: FakeModel, mcp_servers: dict[str, dict[str, Any]] | None = None
) -> Iterator[CliPty]:
    """The CLI started in a fresh git workspace with a throwaway HOME, waited until idle."""
    binary = installed(cli)
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    if cli == "gemini":
        env = gemini_env(tmp_path / "home", fake.url, mcp_servers=mcp_servers)
    else:
        env = claude_env(tmp_path / "home", fake.url, ws, mcp_servers=mcp_servers)
    with CliPty([str(binary)], env, ws) as pty:
        pty.wait(IDLE_CHECKS[cli], f"{cli} idle screen", timeout=30)
        pty.settle(quiet=0.5, limit=3)
        yield pty
        assert_no_python_noise(bytes(pty.raw), f"{cli}'s screen")


def submit(pty: CliPty, text: str) -> None:
    """Type a prompt the way the supervisor does: a bracketed paste, then Enter on its own."""
    pty.paste(text)
    pty.enter(gap=0.5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cli", CLIS)
def test_prompt_reaches_the_fake_model_and_the_reply_shows(cli: str, tmp_path: Path) -> None:
    with FakeModel([Rule(Text("SMOKE-PONG from the fake"), marker="SMOKE-PING")]) as fake:
        with running_cli(cli, tmp_path, fake) as pty:
            submit(pty, "SMOKE-PING are you there?")
            pty.wait(lambda s: "SMOKE-PONG from the fake" in s.text, "the reply on screen", timeout=20)
            pty.wait(IDLE_CHECKS[cli], "idle after the reply", timeout=10)
        prompts = [r for r in fake.main_requests() if "SMOKE-PING are you there?" in r["last_user_text"]]
        assert len(prompts) == 1, [r["last_user_text"][:80] for r in fake.main_requests()]
        assert prompts[0]["api"] == ("gemini" if cli == "gemini" else "anthropic")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cli", CLIS)
def test_large_multiline_paste_is_submitted_whole_by_one_enter(cli: str, tmp_path: Path) -> None:
    lines = [f"line {i:03d}: the quick brown fox jumps over the lazy dog, twice over" for i in range(160)]
    prompt = "SMOKE-BIG\n" + "\n".join(lines) + "\nSMOKE-BIG-END"
    assert len(prompt) > 10_000
    with FakeModel([Rule(Text("SMOKE-BIG-OK"), marker="SMOKE-BIG")]) as fake:
        with running_cli(cli, tmp_path, fake) as pty:
            submit(pty, prompt)
            pty.wait(lambda s: "SMOKE-BIG-OK" in s.text, "the reply to the paste", timeout=20)
        sent = [r for r in fake.main_requests() if "SMOKE-BIG" in r["last_user_text"]]
        assert len(sent) == 1
        # claude wraps long pastes in <pasted_content> tags; the text itself arrives unchanged.
        assert prompt in sent[0]["last_user_text"]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("cli", CLIS)
def test_mcp_wait_for_prompt_result_goes_back_to_the_model(cli: str, tmp_path: Path) -> None:
    calls = tmp_path / "mcp-calls.jsonl"
    rules = [
        Rule(
            [ToolCall("wait_for_prompt", {"agentId": "smoke", "timeout": 5}), Text("SMOKE-LOOP-DONE")],
            marker="SMOKE-LOOP",
        )
    ]
    mcp = {"waaah": slow_mcp_server(seconds=1.0, log=calls)}
    with FakeModel(rules) as fake:
        with running_cli(cli, tmp_path, fake, mcp_servers=mcp) as pty:
            submit(pty, "SMOKE-LOOP wait for a task")
            pty.wait(lambda s: "SMOKE-LOOP-DONE" in s.text, "the text after the tool call", timeout=40)
        results = [r for r in fake.main_requests() if r["has_tool_result"]]
        assert len(results) == 1, [r["reply"] for r in fake.main_requests()]
        assert results[0]["tool_result_name"] in ("mcp_waaah_wait_for_prompt", "mcp__waaah__wait_for_prompt")
        assert '"status": "IDLE"' in results[0]["tool_result_text"]
        assert results[0]["prompt_text"] == "SMOKE-LOOP wait for a task"
    served = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [c["args"]["agentId"] for c in served] == ["smoke"]
