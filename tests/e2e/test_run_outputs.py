"""`waaah run`'s fields under the older wrappers' names, over the real gemini and claude CLIs
offline against the fake model API: tokens_used, metadata.tool_activity, a fenced answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall, Usage
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import both_env, records, waaah_run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

FENCED = '```json\n{"port": 8080}\n```'


def test_a_fenced_answer_comes_unfenced_with_tokens_used(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel([Rule(Text(FENCED), marker="FENCE-MARKER")], usage=Usage(1200, 34)) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "FENCE-MARKER the config as JSON", "--agent", cli)
        assert code == 0, err
        assert json.loads(out["response"]) == {"port": 8080}
        used = out["tokens_used"]
        assert (used["input_tokens"], used["output_tokens"], used["total_tokens"]) == (1200, 34, 1234)
        assert used["cache_read_input_tokens"] == out["tokens"]["cached"]
        assert (used["cost_usd"] is None) == (cli == "gemini")
        assert (used["cache_creation_input_tokens"] is None) == (cli == "gemini")
        assert "metadata" not in out and "reasoning" not in out  # no tool ran, no thinking sent
        end = records(out["log_path"], "end")[0]
        assert end["response_raw"] == FENCED and end["envelope"]["response"] == out["response"]


def test_tool_activity_in_metadata(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    notes = ws / "notes.txt"
    notes.write_text("the notes\n")
    read = (
        ToolCall("read_file", {"file_path": str(notes)}, server=None)
        if cli == "gemini"
        else ToolCall("Read", {"file_path": str(notes)}, server=None)
    )
    with FakeModel([Rule([read, Text("I read it.")], marker="READ-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "READ-MARKER read notes.txt", "--agent", cli)
        assert code == 0, err
        assert out["response"] == "I read it."
        activity = out["metadata"]["tool_activity"]
        assert activity["call_count"] == 1 and activity["write_count"] == 0, activity
        assert activity["tool_names"] == [read.name] and activity["result_classes"] == {"read": 1}
        assert activity["activity_class"] in ("tool_active", "tool_errors") and activity["source"] == "stream"
        assert activity["error_count"] == out["tool_activity"]["error_count"]
        assert out["tool_activity"]["call_count"] == 1  # the older field stays
