"""`waaah run --resume-tree` / `--resume` across codex and opencode: the real pinned CLIs against the
fake OpenAI API, offline. A codex run and its opencode child, restored into each other's CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doubles.cli_homes import cli_bin
from tests.doubles.fake_openai import FAKE_KEY, FakeOpenAI, Rule, Text
from tests.e2e.conftest import workspace_for
from tests.e2e.test_run_openai_clis import cli_env, logged_requests, waaah_run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

RULES = [  # the first marker the last user text holds picks the reply: the new one comes first
    Rule("RESTORE-MARKER", Text("restored answer")),
    Rule("PARENT-MARKER", Text("PARENT-SAYS-42")),
    Rule("CHILD-MARKER", Text("CHILD-SAYS-17")),
]


def test_a_codex_tree_restored_into_opencode_and_back(tmp_path: Path) -> None:
    for name in ("codex", "opencode"):
        cli_bin(name)  # installed by `make test`; absent: a failure naming the install command
    ws = workspace_for(tmp_path)
    log = tmp_path / "requests.jsonl"
    with FakeOpenAI(RULES, api_key=FAKE_KEY, log_path=log) as fake:
        env = cli_env("opencode", tmp_path / "oc", ws, f"{fake.url}/v1")
        env["CODEX_HOME"] = cli_env("codex", tmp_path / "cx", ws, f"{fake.url}/v1")["CODEX_HOME"]
        parent = waaah_run(["PARENT-MARKER plan", "--agent", "codex", "--timeout", "150"], env, ws)
        assert parent["ok"] and parent["response"] == "PARENT-SAYS-42", parent
        child = waaah_run(
            [
                "CHILD-MARKER part one",
                "--agent",
                "opencode",
                "--parent",
                parent["log_id"],
                "--timeout",
                "150",
            ],
            env,
            ws,
        )
        assert child["ok"] and child["parent_id"] == parent["log_id"], child

        # By the CLI's own session id of the parent (codex's thread id), into opencode.
        out = waaah_run(
            ["RESTORE-MARKER sum up", "--resume-tree", parent["session_id"], "--agent", "opencode"], env, ws
        )
        assert out["ok"] and out["response"] == "restored answer", out
        assert out["restored_from"] == parent["log_id"] and out["session_id"] != child["session_id"]
        sent = logged_requests(log)[-1]["last_user_text"]
        assert sent.index("PARENT-SAYS-42") < sent.index("CHILD-SAYS-17") < sent.index("RESTORE-MARKER")
        assert f"=== run {parent['log_id']} · codex · depth 0 ===" in sent
        assert f"=== run {child['log_id']} · opencode · depth 1 ===" in sent

        # The opencode child alone, into codex.
        one = waaah_run(["RESTORE-MARKER again", "--resume", child["log_id"], "--agent", "codex"], env, ws)
        assert one["ok"] and one["agent"] == "codex", one
        sent = logged_requests(log)[-1]["last_user_text"]
        assert "CHILD-SAYS-17" in sent and "PARENT-SAYS-42" not in sent
        assert fake.requests  # every answer above came from the fake, offline
