"""The goal, not only "continue": after the CLI compacted its conversation (seen in its own
transcript), the next prompt is the workflow again (its role and loop), through the real claude.

claude talks to the fake model API; the person sends `/compact` from another shell (`waaah
send`), so claude compacts for real (its summary request answered by the fake) and marks it in
its transcript (`compact_boundary`). Which CLIs mark what: adapters/<cli>/transcript.py.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.doubles.fake_model import FakeModel, Rule, Text
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_agent import CONTINUE_MARKER, MARKER, cli_env, save_and_exit, spawn
from tests.runtime.helpers import WAAAH, events, pump_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

AGAIN = "The supervisor sends your workflow again"


def test_after_claude_compacted_its_conversation_the_next_prompt_is_the_workflow(tmp_path):
    ws = workspace_for(tmp_path)
    script = [
        # claude's own request for the summary that replaces the conversation.
        Rule(Text("A SUMMARY of the work so far."), marker="Respond with TEXT ONLY"),
        Rule(Text("WORKFLOW-AGAIN-READ"), marker=AGAIN),
        Rule(Text("FIRST-TURN-DONE"), marker=MARKER),  # ends its turn: no MCP server here
        Rule(Text("CONTINUED"), marker=CONTINUE_MARKER),
    ]
    with FakeModel(script, default=Text("OK")) as model:
        env = cli_env("claude", tmp_path / "home", ws, model.url)
        child = spawn(ws, env, "--start=claude", "--no-mcp")
        child.expect("FIRST-TURN-DONE", timeout=120)
        sent = subprocess.run(
            [WAAAH, "send", "/compact"], cwd=ws, env=env, capture_output=True, text=True, timeout=60
        )
        assert sent.returncode == 0, sent.stderr
        pump_until(child, lambda: any(e["event"] == "compacted" for e in events(ws)), 120)
        pump_until(child, lambda: any(AGAIN in r["last_user_text"] for r in model.main_requests()), 120)
        nudges = [(e["kind"], e["reason"]) for e in events(ws) if e["event"] == "nudge"]
        print("nudges:", nudges)
        workflows = [reason for kind, reason in nudges if kind == "workflow"]
        assert workflows[:1] == ["claude compacted its conversation"], nudges
        (compacted,) = [e for e in events(ws) if e["event"] == "compacted"]
        assert compacted["source"].startswith("its transcript ") and compacted["source"].endswith(".jsonl")
        again = next(r for r in model.main_requests() if AGAIN in r["last_user_text"])
        assert "register_agent" in again["last_user_text"]  # the whole workflow, not a reminder
        assert save_and_exit(child) == 0
