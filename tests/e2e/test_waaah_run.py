"""`waaah run` over the real gemini and claude CLIs, offline, exactly as a script calls it.

The fake model API answers (text, HTTP errors); each test has its own HOME, workspace and user
state dir (where the circuit breakers live).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.cli_homes import TEST_KEY, claude_env, gemini_env
from tests.doubles.fake_model import FakeModel, HttpError, Rule, Text, Usage
from tests.e2e.conftest import with_cli_path, workspace_for
from tests.envelope_schema import check
from tests.runtime.helpers import WAAAH, retry_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ANSWER = "Hello from the fake model."


def rules() -> list[Rule]:
    return [
        Rule(Text(ANSWER), marker="ANSWER-MARKER"),
        Rule(Text("second answer"), marker="AGAIN-MARKER"),
        Rule(Text("child answer"), marker="CHILD-MARKER"),
        # claude gives up at once on a 500 marked not-retryable; gemini answers the same prompt.
        Rule(HttpError(500, retryable=False), marker="FLAKY-MARKER", api="anthropic"),
        Rule(Text("the fallback answered"), marker="FLAKY-MARKER", api="gemini"),
        # gemini retries a 500 on its own for minutes: only the time budget ends it.
        Rule(HttpError(500), marker="DOWN-MARKER"),
        Rule(Text("slow answer", delay=60), marker="SLOW-MARKER"),
    ]


def both_env(tmp_path: Path, ws: Path, url: str, api_key: str | None = "default") -> dict[str, str]:
    """One HOME set up for both CLIs, the CLIs on PATH, a private user state dir."""
    kwargs: dict[str, Any] = {} if api_key == "default" else {"api_key": api_key}
    home = tmp_path / "home"
    env = gemini_env(home, url, **kwargs)
    env.update(claude_env(home, url, ws, **kwargs))
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env.pop("WAAAH_PARENT_ID", None)
    env.pop("WAAAH_DEFAULT_AGENT", None)
    # Each test names the chain it runs (--fallback); the default chain (every other usable
    # CLI, codex and opencode too) has tests of its own, which take this out.
    env["WAAAH_FALLBACK"] = "none"
    return with_cli_path(env)


def waaah_run(ws: Path, env: dict[str, str], *args: str, stdin: str = "") -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [WAAAH, "run", *args], cwd=ws, env=env, input=stdin, capture_output=True, text=True, timeout=150
    )
    try:
        envelope = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    except ValueError:
        envelope = {}
    return done.returncode, envelope, done.stderr


def records(path: str | Path, kind: str | None = None) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return [r for r in lines if kind is None or r["record"] == kind]


def test_one_answer_in_the_envelope(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules(), usage=Usage(1200, 34)) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "ANSWER-MARKER say hello", "--agent", cli)
        assert code == 0, err
        assert out["ok"] is True and out["response"] == ANSWER and out["agent"] == cli and out["version"] == 1
        assert (
            out["tokens"]["input"] == 1200
            and out["tokens"]["output"] == 34
            and out["tokens"]["total"] == 1234
        )
        assert ("cost_usd" in out["tokens"]) == (cli == "claude")  # only claude reports a cost
        assert out["tool_activity"] == {
            "call_count": 0,
            "error_count": 0,
            "tool_names": [],
            "activity_class": "none",
        }
        assert [a["outcome"] for a in out["attempts"]] == ["ok"] and out["fallback_chain"] == [cli]
        assert len(out["session_id"]) == 36 and out["model"] and out["duration_ms"] > 0
        assert any("ANSWER-MARKER" in r["prompt_text"] for r in fake.main_requests())
        # The log: start, the CLI's events as they came, end (with the same envelope).
        log = Path(out["log_path"])
        assert log.parent.parent == ws / ".waaah" / "runs" and log.name == f"{out['session_id']}.jsonl"
        assert records(log, "start")[0]["prompt"] == "ANSWER-MARKER say hello"
        assert len(records(log, "event")) >= 2
        assert records(log, "end")[0]["envelope"]["response"] == ANSWER
        assert TEST_KEY not in log.read_text()  # the key is in the CLI's env, never in the log
        # --format text: just the answer.
        text = subprocess.run(
            [WAAAH, "run", "ANSWER-MARKER again", "--agent", cli, "--format", "text"],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        assert text == ANSWER + "\n"


def test_a_long_prompt_goes_through_stdin_not_argv(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    prompt = "ANSWER-MARKER " + "lorem ipsum " * 5000 + "THE-END"
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        for cli in ("gemini", "claude"):
            code, out, err = waaah_run(ws, env, "--agent", cli, stdin=prompt)
            assert code == 0, err
            attempt = records(out["log_path"], "attempt")[0]
            assert attempt["prompt_on_stdin"] is True and all(len(a) < 1000 for a in attempt["argv"])
            assert fake.main_requests()[-1]["prompt_text"].strip().endswith("THE-END")


def test_context_md_goes_before_the_prompt_cut_with_a_marker(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    (ws / "CONTEXT.md").write_text("PROJECT-FACT: the build uses make.\n" + "x" * 60_000, encoding="utf-8")
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "ANSWER-MARKER what builds this?", "--agent", "claude")
        assert code == 0, err
        sent = fake.main_requests()[-1]["prompt_text"]
        assert sent.index("PROJECT-FACT") < sent.index("ANSWER-MARKER")
        assert "[... context truncated: 51,200 of 60,035 bytes of CONTEXT.md shown ...]" in sent
        assert records(out["log_path"], "start")[0]["context"] == str(ws / "CONTEXT.md")


def test_session_continues_the_cli_conversation(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, first, err = waaah_run(ws, env, "ANSWER-MARKER remember PURPLE-FROG", "--agent", cli)
        assert code == 0, err
        # The agent comes from the session's log; no --agent needed.
        code, second, err = waaah_run(
            ws, env, "AGAIN-MARKER what did I say?", "--session", first["session_id"]
        )
        assert code == 0, err
        assert second["agent"] == cli and second["response"] == "second answer"
        assert second["session_id"] == first["session_id"] and second["log_path"] == first["log_path"]
        last = fake.main_requests()[-1]
        assert "AGAIN-MARKER" in last["prompt_text"] and "PURPLE-FROG" in json.dumps(last["body"])
        assert len(records(first["log_path"], "start")) == 2 and len(records(first["log_path"], "end")) == 2
        # An id nobody knows: a clear error, nothing run.
        before = len(fake.requests)
        code, out, err = waaah_run(ws, env, "AGAIN-MARKER x", "--session", "no-such-session")
        assert code == 7 and "unknown session id 'no-such-session'" in err
        assert check(out)["error_type"] == "invalid_session" and out["attempts"] == []
        assert len(fake.requests) == before


def test_parent_child_runs_form_a_tree(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, parent, err = waaah_run(ws, env, "ANSWER-MARKER plan the work", "--agent", "gemini")
        assert code == 0, err
        code, child, err = waaah_run(
            ws, env, "CHILD-MARKER do part one", "--agent", "claude", "--parent", parent["session_id"]
        )
        assert code == 0, err
        assert child["parent_id"] == parent["session_id"]
        tree = json.loads(
            subprocess.run(
                [WAAAH, "sessions", "--json"], cwd=ws, env=env, capture_output=True, text=True
            ).stdout
        )
        assert [n["id"] for n in tree] == [parent["session_id"]]
        kid = tree[0]["children"][0]
        assert (kid["id"], kid["agent"], kid["status"], kid["first_prompt"]) == (
            child["session_id"],
            "claude",
            "ok",
            "CHILD-MARKER do part one",
        )
        assert kid["tokens"]["input"] == 1200
        text = subprocess.run([WAAAH, "sessions"], cwd=ws, env=env, capture_output=True, text=True).stdout
        assert f"└─ {child['session_id']}  run  claude  ok" in text
        code, out, err = waaah_run(ws, env, "CHILD-MARKER x", "--agent", "claude", "--parent", "nobody")
        assert code == 7 and "unknown parent id 'nobody'" in err


def test_errors_are_retried_then_the_fallback_cli_answers_within_the_budget(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        started = time.monotonic()
        code, out, err = waaah_run(
            ws, env, "FLAKY-MARKER go", "--agent", "claude", "--fallback", "gemini", "--timeout", "90"
        )
        took = time.monotonic() - started
        assert code == 0, err
        assert out["response"] == "the fallback answered" and out["agent"] == "gemini"
        assert [(a["agent"], a["outcome"]) for a in out["attempts"]] == [
            ("claude", "provider_error"),
            ("claude", "provider_error"),
            ("claude", "provider_error"),
            ("gemini", "ok"),
        ]
        assert (
            out["attempts"][1]["waited_s"] > 0
            and out["attempts"][2]["waited_s"] > out["attempts"][1]["waited_s"]
        )
        assert out["fallback_chain"] == ["claude", "gemini"] and took < 90
        flaky = [r for r in fake.main_requests() if "FLAKY-MARKER" in r["prompt_text"]]
        assert [r["api"] for r in flaky] == ["anthropic"] * 3 + ["gemini"]
        decisions = [r["action"] for r in records(out["log_path"], "decision")]
        assert decisions == ["retry", "retry", "fallback"]
        # One run that gave up on claude counts once on its breaker, persisted for later runs.
        folder = tmp_path / "state" / "waaah-agent" / "breakers"
        state = {cli: json.loads((folder / f"{cli}.json").read_text()) for cli in ("claude", "gemini")}
        assert state["claude"]["failures"] == 1 and state["claude"]["opened_at"] is None
        assert state["gemini"]["failures"] == 0


def test_the_time_budget_ends_a_cli_that_keeps_retrying(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        started = time.monotonic()
        code, out, err = waaah_run(ws, env, "DOWN-MARKER go", "--agent", "gemini", "--timeout", "8")
        took = time.monotonic() - started
        assert code == 12 and out["error_type"] == "timeout" and out["recoverable"] is True, err
        assert out["exit_code"] == 12 and out["ok"] is False and out["response"] == ""
        # The budget, plus the CLI's start-up and the kill grace, on a loaded machine (left to
        # itself, gemini's retries of a 503 go on for minutes).
        assert took < 8 + 20, took
        assert len(fake.main_requests()) >= 1


def test_no_key_is_an_auth_error_and_never_retried(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url, api_key=None)
        code, out, err = waaah_run(ws, env, "ANSWER-MARKER hi", "--agent", cli)
        assert code == 6, err
        # auth is one of the older wrappers' provider_error (another CLI has its own login)
        assert (out["error_type"], out["error_kind"], out["recoverable"]) == ("provider_error", "auth", True)
        check(out)
        assert len(out["attempts"]) == 1 and fake.main_requests() == []
        assert "waaah: auth:" in err
        decisions = records(out["log_path"], "decision")
        assert decisions[-1]["action"] == "stop"


def test_a_cli_that_keeps_failing_is_skipped_by_later_runs(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        broken = both_env(tmp_path, ws, fake.url, api_key=None)
        states = []
        for _ in range(3):
            code, out, _ = waaah_run(ws, broken, "ANSWER-MARKER hi", "--agent", "claude")
            assert code == 6 and out["used_fallback"] is False
            states.append(out["circuit_state"])
        assert states == ["closed", "closed", "open"]  # the third run that gave up opened it
        doctor = subprocess.run(
            [WAAAH, "doctor", "--agent", "claude"], cwd=ws, env=broken, capture_output=True, text=True
        ).stdout
        assert "claude: OPEN after 3 failure(s) in a row" in doctor
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "ANSWER-MARKER hi", "--agent", "claude", "--fallback", "gemini")
        assert code == 0, err
        assert [(a["agent"], a["outcome"]) for a in out["attempts"]] == [
            ("claude", "skipped"),
            ("gemini", "ok"),
        ]
        assert [r["api"] for r in fake.main_requests()] == ["gemini"]
        assert out["used_fallback"] is True and out["circuit_state"] == "closed"  # gemini's
        assert out["max_attempts"] == 2 * 4  # two CLIs, each: 1 + a model retry + 2 retries


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def test_ctrl_c_stops_the_cli_keeps_the_log_and_exits_130(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        proc = subprocess.Popen(
            [WAAAH, "run", "SLOW-MARKER take your time", "--agent", cli],
            cwd=ws,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        fake.wait_for_request(lambda r: "SLOW-MARKER" in r.get("prompt_text", ""), timeout=60)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 130, err
        envelope = json.loads(out)
        assert (envelope["error_type"], envelope["error_kind"], envelope["exit_code"]) == (
            "unknown",
            "interrupted",
            130,
        )
        check(envelope)
        assert envelope["error"] == "Ctrl+C: the run and its CLI were stopped"
        log = records(envelope["log_path"])
        assert [r["record"] for r in log][0] == "start" and log[-1]["record"] == "end"
        assert any(r["record"] == "event" for r in log)  # what came before the stop is kept
        cli_pid = next(r["pid"] for r in log if r["record"] == "attempt_end")
        retry_until(lambda: not _alive(cli_pid), timeout=5)


def test_sigterm_stops_the_run_and_says_so(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        proc = subprocess.Popen([WAAAH, "run", "SLOW-MARKER take your time", "--agent", "claude"], cwd=ws,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        fake.wait_for_request(lambda r: "SLOW-MARKER" in r.get("prompt_text", ""), timeout=60)
        proc.terminate()
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 130, err
        envelope = check(json.loads(out))
        assert envelope["error_kind"] == "interrupted" and envelope["recoverable"] is False
        assert envelope["error"] == "SIGTERM: the run and its CLI were stopped", envelope["error"]
        assert "waaah: interrupted: SIGTERM: the run and its CLI were stopped (log: " in err
