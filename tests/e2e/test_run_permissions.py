"""`waaah run --permission-mode/--yolo` through each real CLI, offline: the CLI takes the flags
its adapter records and answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.doubles.cli_homes import cli_bin
from tests.doubles.fake_model import FakeModel
from tests.doubles.fake_openai import FAKE_KEY, FakeOpenAI
from tests.e2e import test_run_openai_clis as openai_clis
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import ANSWER, both_env, records, rules, waaah_run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

FLAGS = {
    ("gemini", "plan"): ["--approval-mode", "plan"],
    ("claude", "plan"): ["--permission-mode", "plan"],
    ("gemini", "yolo"): ["--yolo"],
    ("claude", "yolo"): ["--dangerously-skip-permissions"],
    ("codex", "plan"): ["-c", 'sandbox_mode="read-only"'],
    ("codex", "yolo"): ["--dangerously-bypass-approvals-and-sandbox"],
    ("opencode", "plan"): ["--agent", "plan"],
    ("opencode", "yolo"): ["--auto"],
}


def as_args(mode: str) -> list[str]:
    return ["--yolo"] if mode == "yolo" else ["--permission-mode", mode]


@pytest.mark.parametrize("mode", ["plan", "yolo"])
def test_gemini_and_claude_take_their_permission_flags(cli: str, mode: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "ANSWER-MARKER hi", "--agent", cli, *as_args(mode))
        assert code == 0, err
        assert out["response"] == ANSWER
        argv = records(out["log_path"], "attempt")[0]["argv"]
        flags = FLAGS[(cli, mode)]
        assert any(argv[i : i + len(flags)] == flags for i in range(len(argv))), argv


@pytest.mark.parametrize("name", ["codex", "opencode"])
@pytest.mark.parametrize("mode", ["plan", "yolo"])
def test_codex_and_opencode_take_their_permission_flags(name: str, mode: str, tmp_path: Path) -> None:
    cli_bin(name)  # a missing install is a failure, never a skip
    ws = workspace_for(tmp_path)
    with FakeOpenAI(api_key=FAKE_KEY, log_path=tmp_path / "requests.jsonl") as fake:
        env = openai_clis.cli_env(name, tmp_path, ws, f"{fake.url}/v1")
        out = openai_clis.waaah_run(
            [openai_clis.FIRST, "--agent", name, "--timeout", "120", *as_args(mode)], env, ws
        )
        assert out["ok"], json.dumps(out)[:2000]
        argv = records(out["log_path"], "attempt")[0]["argv"]
        flags = FLAGS[(name, mode)]
        assert any(argv[i : i + len(flags)] == flags for i in range(len(argv))), argv
        # The same flags on the CLI's own resume (`codex exec resume` has no --sandbox).
        again = openai_clis.waaah_run(
            [openai_clis.SECOND, "--session", out["session_id"], "--timeout", "120", *as_args(mode)], env, ws
        )
        assert again["ok"] and again["session_id"] == out["session_id"], json.dumps(again)[:2000]
        argv = records(out["log_path"], "attempt")[-1]["argv"]
        assert any(argv[i : i + len(flags)] == flags for i in range(len(argv))), argv
