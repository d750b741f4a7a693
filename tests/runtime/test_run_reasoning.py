"""`waaah run --reasoning-fallback --session ID` on run logs written by RunLog from recorded real
streams (tests/fixtures/streams), and the CLIs' session files read for reasoning."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from tests.envelope_schema import check, refused
from tests.runtime.helpers import WAAAH
from tests.unit.test_run_streams import RECORDED, STREAMS
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.errors import SessionNotFound
from waaah_agent.runtime.oneshot import run_reasoning, runlog


def killed_run(ws: Path, cli: str, scenario: str, log_id: str) -> Path:
    """A run log with the recorded stream's events and no end record (as a killed run leaves it)."""
    path = runlog.new_log_path(ws, log_id, datetime.now())
    log = runlog.RunLog(path, Redactor())
    log.write("start", prompt="THINK-MARKER say hello", agent=cli, parent_id=None)
    log.write("attempt", n=1, agent=cli, session_id=log_id)
    for line in (STREAMS / RECORDED[cli] / f"{scenario}.stdout").read_text(encoding="utf-8").splitlines():
        log.event(1, cli, line)
    log.close()
    return path


def test_a_killed_run_s_reasoning_and_tokens_come_from_its_logged_stream(ws: Path) -> None:
    killed_run(ws, "claude", "thinking", "run-1")
    result = run_reasoning.fallback(ws, "run-1", {"HOME": str(ws.parent)})
    assert result["reasoning"] == "The user asks for a greeting. A short, friendly one will do."
    assert result["reasoning_source"] == "stream" and result["agent"] == "claude"
    assert result["metadata"]["reasoning_source"] == "raw_output" and result["response"] == ""
    assert result["tokens"]["input"] == 1200 and result["tokens"]["output"] == 34
    assert result["tokens_used"]["cost_usd"] == pytest.approx(0.00548)
    # No end record, and its writer (this test) still lives.
    assert result["tokens_source"] == "run_log" and result["status"] == "running"


def test_without_reasoning_in_the_log_the_session_file_is_read(ws: Path, tmp_path: Path) -> None:
    killed_run(ws, "gemini", "thinking", "run-2")
    home = tmp_path / "home"
    session = json.loads((STREAMS / RECORDED["gemini"] / "thinking.stdout").read_text().splitlines()[0])
    chats = home / ".gemini" / "tmp" / "ws" / "chats"
    chats.mkdir(parents=True)
    name = f"session-2026-11-25T10-00-{session['session_id'][:8]}.jsonl"
    shutil.copy(STREAMS / RECORDED["gemini"] / "thinking.session.jsonl", chats / name)
    result = run_reasoning.fallback(ws, "run-2", {"HOME": str(home)})
    assert result["reasoning_source"] == "session_file"
    assert result["reasoning"] == "The user asks for a greeting. A short, friendly one will do."
    assert result["session_id"] == session["session_id"]
    # A FIFO in the session file's place: no reasoning, no hang, no error.
    (chats / name).unlink()
    os.mkfifo(chats / name)
    result = run_reasoning.fallback(ws, "run-2", {"HOME": str(home)})
    assert result["reasoning"] == "" and "reasoning_source" not in result
    assert result["metadata"]["reasoning_absent_reason"] == "model_not_emitted"
    assert result["tokens"]["total"] == 1234 and result["tokens_used"]["total_tokens"] == 1234


def test_an_unknown_id_is_a_clear_error(ws: Path) -> None:
    with pytest.raises(SessionNotFound, match="unknown session id 'nope'"):
        run_reasoning.fallback(ws, "nope", {})


def test_the_command_reads_the_log_and_starts_no_cli(ws: Path) -> None:
    killed_run(ws, "claude", "thinking", "run-3")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent), "LANG": "C.UTF-8"}  # no CLI on PATH
    done = subprocess.run(
        [WAAAH, "run", "--reasoning-fallback", "--session", "run-3"],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["mode"] == "reasoning_fallback" and out["ok"] is True and out["log_id"] == "run-3"
    assert out["reasoning"].startswith("The user asks for a greeting.")
    check(out, ours=False)  # the older wrappers' success shape, with no answer
    for args, message in (
        (["--reasoning-fallback"], "give its id with --session ID"),
        (["--reasoning-fallback", "hi", "--session", "run-3"], "takes no prompt"),
        (["--reasoning-fallback", "--session", "nope"], "unknown session id 'nope'"),
    ):
        bad = subprocess.run(
            [WAAAH, "run", *args], cwd=ws, env=env, capture_output=True, text=True, timeout=60
        )
        kind = "invalid_input" if bad.returncode == 2 else "invalid_session"
        assert bad.returncode in (2, 7) and message in refused(bad.stdout, kind, bad.returncode)["error"]
        assert message in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and bad.stderr.startswith("waaah: ")


def test_a_killed_run_is_restored_with_what_its_cli_had_written(ws: Path) -> None:
    """--resume of a run killed mid-answer: the replay holds the answer as far as the CLI had
    streamed it (the recorded gemini stream cut before its last delta and its result)."""
    from waaah_agent.core.oneshot import restore
    from waaah_agent.runtime.oneshot import run_trees

    path = runlog.new_log_path(ws, "run-9", datetime.now())
    log = runlog.RunLog(path, Redactor())
    log.write("start", prompt="ANSWER-MARKER say hello", agent="gemini", parent_id=None)
    log.write("attempt", n=1, agent="gemini", session_id="run-9")
    lines = (STREAMS / RECORDED["gemini"] / "answer.stdout").read_text(encoding="utf-8").splitlines()
    for line in lines[:3]:  # init, the user's message, the first delta: then SIGKILL
        log.event(1, "gemini", line)
    log.close()
    (turn,) = run_trees.turns(path)
    assert (turn.prompt, turn.answer, turn.outcome) == (
        "ANSWER-MARKER say hello",
        "Hello from the fake mode",
        "no end",
    )
    text = restore.replay_text([restore.Entry("run-9", "gemini", 0, turns=(turn,))], "run-9", tree=False)
    assert "what its CLI had written:)\nHello from the fake mode" in text
