"""`waaah run`'s fields under the older wrappers' names, over the real gemini and claude CLIs
offline against the fake model API: tokens_used, metadata.tool_activity, a fenced answer, and
--stream's lines as the run goes."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.doubles.fake_model import FakeModel, HttpError, Rule, Text, ToolCall, Usage
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import both_env, records, waaah_run
from tests.envelope_schema import check
from tests.runtime.helpers import WAAAH

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

FENCED = '```json\n{"port": 8080}\n```'


def test_a_fenced_answer_comes_unfenced_with_tokens_used(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel([Rule(Text(FENCED), marker="FENCE-MARKER")], usage=Usage(1200, 34)) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "FENCE-MARKER the config as JSON", "--agent", cli)
        assert code == 0, err
        assert json.loads(out["response"]) == {"port": 8080}
        used = check(out)["tokens_used"]
        assert (used["input_tokens"], used["output_tokens"], used["total_tokens"]) == (1200, 34, 1234)
        assert used["cache_read_input_tokens"] == out["tokens"]["cached"]
        assert used["estimated_output_tokens"] == len('{"port": 8080}') // 4
        # Numbers where the CLI reports none (gemini: no cost, no cache writes); `tokens` says which.
        assert (used["cost_usd"] > 0) == (cli == "claude") and used["cache_creation_input_tokens"] == 0
        assert ("cost_usd" in out["tokens"]) == (cli == "claude")
        assert "tool_activity" not in out["metadata"] and out["reasoning"] == ""  # no tool, no thinking
        assert out["metadata"]["reasoning_absent_reason"] == "model_not_emitted"
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
        assert activity["tool_names"] == [read.name] and activity["result_classes"] == ["read"]
        assert activity["activity_class"] in ("tool_active", "tool_errors")
        assert activity["source"] == f"wrapper:{cli}" and activity["class_counts"] == {"read": 1}
        assert activity["error_count"] == out["tool_activity"]["error_count"]
        assert out["tool_activity"]["call_count"] == 1  # the older field stays


def stream_run(ws: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [WAAAH, "run", *args, "--stream"],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_stream_lines_arrive_while_the_run_goes_on(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    slow = Rule(Text("at last", delay=20), marker="STREAM-MARKER")
    with FakeModel([slow]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        started = time.monotonic()
        run = stream_run(ws, env, "STREAM-MARKER take your time", "--agent", cli, "--timeout", "120")
        try:
            assert run.stdout is not None
            start = json.loads(run.stdout.readline())
            session = json.loads(run.stdout.readline())
            # Both came before the model was even asked, or while it holds its answer back.
            fake.wait_for_request(lambda r: "STREAM-MARKER" in r.get("prompt_text", ""), timeout=60)
            assert run.poll() is None and time.monotonic() - started < 20
            out, err = run.communicate(timeout=150)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
        assert run.returncode == 0, err
        assert start["record"] == "start" and start["agent"] == cli and start["parent_id"] is None
        assert session == {
            "record": "session",
            "session_id": session["session_id"],
            "agent": cli,
            "attempt": 1,
        }
        rest = out.splitlines()
        assert len(rest) == 1  # the envelope, on one line, last
        envelope = json.loads(rest[0])
        assert envelope["ok"] is True and envelope["response"] == "at last"
        assert envelope["log_id"] == start["log_id"] and envelope["log_path"] == start["log_path"]
        assert envelope["session_id"] == session["session_id"]


def test_stream_says_each_fallback_cli_s_session(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    rules = [
        Rule(HttpError(500, retryable=False), marker="FLAKY-MARKER", api="anthropic"),
        Rule(Text("the fallback answered"), marker="FLAKY-MARKER", api="gemini"),
    ]
    with FakeModel(rules) as fake:
        env = both_env(tmp_path, ws, fake.url)
        run = stream_run(ws, env, "FLAKY-MARKER go", "--agent", "claude", "--fallback", "gemini")
        out, err = run.communicate(timeout=150)
        assert run.returncode == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert lines[0]["record"] == "start" and lines[0]["fallback"] == ["gemini"]
        envelope = lines[-1]
        sessions = [(r["agent"], r["session_id"], r["attempt"]) for r in lines[1:-1]]
        assert all(r["record"] == "session" for r in lines[1:-1])
        assert sessions == [(a["agent"], a["session_id"], n) for n, a in enumerate(envelope["attempts"], 1)]
        assert [s[0] for s in sessions] == ["claude", "claude", "claude", "gemini"]
        assert envelope["agent"] == "gemini" and envelope["response"] == "the fallback answered"


def test_stream_needs_the_json_format(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    done = subprocess.run(
        [WAAAH, "run", "hi", "--stream", "--format", "llm"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    # The envelope as --format llm shows it (an error line and the exit footer).
    assert done.stdout.startswith("[error: invalid_input: --stream prints JSON lines: it needs --format json")
    assert done.stdout.rstrip().splitlines()[-1].startswith("[exit:2 | ")
    assert (
        done.stderr.strip() == "waaah: --stream prints JSON lines: it needs --format json, not --format llm"
    )


def test_claude_s_thinking_is_the_reasoning(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    thinking = "The user wants a greeting.\n\n  A short one   will do." + " Then stop." * 80
    with FakeModel([Rule(Text("Hi.", thinking=thinking), marker="THINK-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "THINK-MARKER greet me", "--agent", "claude")
        assert code == 0, err
        assert out["response"] == "Hi." and out["reasoning_source"] == "stream"
        assert out["reasoning"].startswith("The user wants a greeting. A short one will do. Then stop.")
        assert len(out["reasoning"]) == 600 and out["reasoning"].endswith("...")


def test_gemini_s_thoughts_come_from_its_session_file_and_back_from_the_log(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    rule = Rule(Text("Hi.", thinking="**Greeting** The user\n wants hi."), marker="THINK-MARKER")
    with FakeModel([rule]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "THINK-MARKER greet me", "--agent", "gemini")
        assert code == 0, err
        assert (
            out["reasoning"] == "Greeting: The user wants hi." and out["reasoning_source"] == "session_file"
        )
        requests = len(fake.main_requests())
        code, back, err = waaah_run(ws, env, "--reasoning-fallback", "--session", out["session_id"])
        assert code == 0, err
        assert back["mode"] == "reasoning_fallback" and back["log_id"] == out["log_id"]
        assert (back["reasoning"], back["reasoning_source"]) == (out["reasoning"], "session_file")
        assert back["tokens"] == out["tokens"] and back["response"] == ""
        # The figures the CLI reported come back; the estimate is of the answer, which has none.
        assert back["tokens_used"] == {**out["tokens_used"], "estimated_output_tokens": 0}
        assert len(fake.main_requests()) == requests  # the CLI was not called


def test_llm_format_cuts_a_long_answer_and_attaches_stderr_on_a_spent_quota(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    # ~30 KB of text that never repeats (gemini stops a stream that loops on the same chunk)
    long = "\n".join(f"line {n}: " + " ".join(f"w{n * 11 + i}" for i in range(11)) for n in range(400))
    rules = [
        Rule(Text(long), marker="LONG-MARKER"),
        # gemini's daily-quota failure (a final 429 with a QuotaFailure detail)
        Rule(HttpError(429, retryable=False), marker="QUOTA-MARKER"),
    ]
    with FakeModel(rules) as fake:
        env = both_env(tmp_path, ws, fake.url)
        cut = subprocess.run(
            [WAAAH, "run", "LONG-MARKER go", "--agent", "gemini", "--format", "llm"],
            cwd=ws, env=env, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
        assert cut.returncode == 0, cut.stderr
        head, _, rest = cut.stdout.partition("\n[... ")
        assert long.startswith(head) and "characters (" in rest and "lines) cut; full output: " in rest
        saved = Path(rest.split("full output: ", 1)[1].split(" ...]", 1)[0])
        assert saved.read_text() == long and saved.parent == next((ws / ".waaah" / "runs").iterdir())
        assert cut.stdout.rstrip().splitlines()[-1].startswith("[exit:0 | ")
        failed = subprocess.run(
            [WAAAH, "run", "QUOTA-MARKER go", "--agent", "gemini", "--format", "llm", "--timeout", "60"],
            cwd=ws, env=env, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
        assert failed.returncode == 18, failed.stderr
        lines = failed.stdout.rstrip().splitlines()
        assert lines[0].startswith("[error: quota: ") and "exhausted your daily quota" in lines[0]
        assert "[stderr]" in lines and "429" in failed.stdout.split("[stderr]", 1)[1]
        assert lines[-1].startswith("[exit:18 | ") and lines[-1].endswith("s]")
