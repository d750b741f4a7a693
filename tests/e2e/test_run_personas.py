"""`waaah run --agent-file/--persona` and `--dry-run` over the real gemini and claude CLIs,
offline: the fake model sees the persona once per conversation, and a dry run reaches no model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.doubles.fake_model import FakeModel
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import both_env, records, rules, waaah_run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

AGENT = """---
name: reviewer
persona: kind
---
You are a code reviewer. SHARED-AGENT-TEXT

## persona: strict
STRICT-PERSONA-TEXT: point out every problem.

## persona: kind
KIND-PERSONA-TEXT: start with what is good.
"""


def test_the_persona_is_sent_once_per_conversation(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    (ws / "reviewer.md").write_text(AGENT, encoding="utf-8")
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, first, err = waaah_run(
            ws,
            env,
            "ANSWER-MARKER review x.py",
            "--agent",
            cli,
            "--agent-file",
            "reviewer.md",
            "--persona",
            "strict",
        )
        assert code == 0, err
        sent = fake.main_requests()[-1]["prompt_text"]
        assert (
            sent.index("SHARED-AGENT-TEXT") < sent.index("STRICT-PERSONA-TEXT") < sent.index("ANSWER-MARKER")
        )
        assert "KIND-PERSONA-TEXT" not in json.dumps(fake.main_requests()[-1]["body"])
        # Continued: the CLI's conversation holds the persona; it is not sent again.
        code, second, err = waaah_run(
            ws,
            env,
            "AGAIN-MARKER and y.py?",
            "--session",
            first["session_id"],
            "--agent-file",
            "reviewer.md",
            "--persona",
            "strict",
        )
        assert code == 0, err
        assert second["response"] == "second answer" and second["session_id"] == first["session_id"]
        last = fake.main_requests()[-1]
        assert "AGAIN-MARKER" in last["prompt_text"] and "STRICT-PERSONA-TEXT" not in last["prompt_text"]
        assert json.dumps(last["body"]).count("STRICT-PERSONA-TEXT") == 1  # the first turn's, only
        starts = records(first["log_path"], "start")
        assert (
            "STRICT-PERSONA-TEXT" in starts[0]["prompt"] and "STRICT-PERSONA-TEXT" not in starts[1]["prompt"]
        )


def test_dry_run_resolves_the_real_cli_and_reaches_no_model(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    (ws / "reviewer.md").write_text(AGENT, encoding="utf-8")
    (ws / "CONTEXT.md").write_text("PROJECT-FACT\n" + "x" * 60_000, encoding="utf-8")
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(
            ws,
            env,
            "ANSWER-MARKER review x.py",
            "--dry-run",
            "--agent",
            cli,
            "--agent-file",
            "reviewer.md",
            "--yolo",
            "--model",
            "some-model",
        )
        assert code == 0, err
        assert out["dry_run"] is True and out["agent"] == cli and out["model"] == "some-model"
        binary = Path(out["binary"])
        assert binary.name == cli and os.access(binary, os.X_OK) and out["argv"][0] == str(binary)
        # Over 30 KB with its context: the prompt would go to the CLI's stdin, never its argv.
        assert out["prompt_on_stdin"] is True and "ANSWER-MARKER" not in json.dumps(out["argv"])
        yolo = {"gemini": "--yolo", "claude": "--dangerously-skip-permissions"}[cli]
        assert out["argv"][-3:] == ["--model", "some-model", yolo]
        assert out["persona"] == "kind"  # the front matter's default
        assert out["context"] == {
            "source": str(ws / "CONTEXT.md"),
            "bytes": 60_013,
            "cut": True,
            "max_bytes": 51_200,
        }
        assert out["prompt"]["bytes"] > 51_200 and out["prompt"]["max_bytes"] > out["prompt"]["warn_bytes"]
        assert fake.requests == [] and not (ws / ".waaah").exists()
