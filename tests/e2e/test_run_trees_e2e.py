"""`waaah run --continue-from` / `--continue-from-tree` / `waaah sessions` over the real gemini and claude CLIs, offline:
a tree of runs made by the CLIs, then restored into a new session of the other CLI. The fake model
API sees what the new session was given."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.doubles.fake_model import FakeModel, Rule, Text
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import both_env, records, waaah_run
from tests.runtime.helpers import WAAAH

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def rules() -> list[Rule]:
    # The first rule whose marker the prompt holds answers: a restored prompt holds the earlier
    # markers too, so the new one comes first.
    return [
        Rule(Text("restored answer"), marker="RESTORE-MARKER"),
        Rule(Text("PARENT-SAYS-42"), marker="PARENT-MARKER"),
        Rule(Text("CHILD-SAYS-17"), marker="CHILD-MARKER"),
    ]


def test_a_tree_of_runs_restored_into_the_other_cli(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, parent, err = waaah_run(ws, env, "PARENT-MARKER plan the work", "--agent", "gemini")
        assert code == 0 and parent["response"] == "PARENT-SAYS-42", err
        code, child, err = waaah_run(
            ws, env, "CHILD-MARKER do part one", "--agent", "gemini", "--parent", parent["log_id"]
        )
        assert code == 0 and child["response"] == "CHILD-SAYS-17", err

        # The whole tree, into claude: a new session whose first request holds both answers.
        code, out, err = waaah_run(
            ws,
            env,
            "RESTORE-MARKER what was decided?",
            "--continue-from-tree",
            parent["session_id"],
            "--agent",
            "claude",
        )
        assert code == 0, err
        assert out["response"] == "restored answer" and out["agent"] == "claude"
        assert out["restored_from"] == parent["log_id"]
        assert out["session_id"] not in (parent["session_id"], child["session_id"])
        sent = fake.main_requests()[-1]
        assert sent["api"] == "anthropic"
        text = sent["prompt_text"]
        assert text.index("PARENT-SAYS-42") < text.index("CHILD-SAYS-17") < text.index("RESTORE-MARKER")
        assert f"=== run {parent['log_id']} · gemini · depth 0 ===" in text
        assert f"=== run {child['log_id']} · gemini · depth 1 ===" in text
        start = records(out["log_path"], "start")[0]
        assert start["restored_from"]["runs"] == [parent["log_id"], child["log_id"]]
        assert start["restored_from"]["tree"] is True and start["agent"] == "claude"

        # One run (the child), by its log id, with the agent of that run by default (gemini).
        code, one, err = waaah_run(
            ws, env, "RESTORE-MARKER and part one?", "--continue-from", child["log_id"]
        )
        assert code == 0 and one["agent"] == "gemini" and one["restored_from"] == child["log_id"], err
        text = fake.main_requests()[-1]["prompt_text"]
        assert "CHILD-SAYS-17" in text and "PARENT-SAYS-42" not in text
        assert one["log_path"] not in (child["log_path"], parent["log_path"], out["log_path"])

        # The tree, with each run's log path under it.
        listed = subprocess.run(
            [WAAAH, "sessions", parent["log_id"], "--paths"],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
        assert f"log: {parent['log_path']}" in listed.stdout and f"log: {child['log_path']}" in listed.stdout
        assert f"└─ {child['log_id']}  run  gemini  ok  " in listed.stdout
        assert out["log_id"] not in listed.stdout  # a restored run is a new tree, not a child
        tree = json.loads(
            subprocess.run(
                [WAAAH, "sessions", "--json"], cwd=ws, env=env, capture_output=True, text=True, timeout=60
            ).stdout
        )
        by_id = {n["id"]: n for n in tree}
        assert by_id[parent["log_id"]]["duration_ms"] == parent["duration_ms"]


def test_run_logs_go_to_the_log_dir_and_are_found_there(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    logs = tmp_path / "all-runs"
    with FakeModel(rules()) as fake:
        env = {**both_env(tmp_path, ws, fake.url), "WAAAH_LOG_DIR": str(logs)}
        code, first, err = waaah_run(ws, env, "PARENT-MARKER remember PURPLE-FROG", "--agent", "claude")
        assert code == 0, err
        assert Path(first["log_path"]).parent.parent == logs and not (ws / ".waaah" / "runs").exists()
        # --session finds it there, and appends to it.
        code, again, err = waaah_run(ws, env, "CHILD-MARKER go on", "--session", first["session_id"])
        assert code == 0 and again["log_path"] == first["log_path"], err
        assert "PURPLE-FROG" in json.dumps(fake.main_requests()[-1]["body"])
        # --parent finds it there; --continue-from too.
        code, kid, err = waaah_run(
            ws, env, "CHILD-MARKER x", "--agent", "claude", "--parent", first["log_id"]
        )
        assert code == 0 and kid["parent_id"] == first["log_id"], err
        code, out, err = waaah_run(
            ws, env, "RESTORE-MARKER y", "--continue-from", first["log_id"], "--agent", "gemini"
        )
        assert code == 0, err
        text = fake.main_requests()[-1]["prompt_text"]
        assert "PARENT-SAYS-42" in text and "CHILD-SAYS-17" in text  # both turns of that log
