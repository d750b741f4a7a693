"""A session's own files (events.jsonl, its lock, session.json) replaced by a FIFO, a symlink or
garbage: nothing waits on them, nothing is written through a link, and every command says so
in one line instead of hanging or forgetting the session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.faults.conftest import assert_no_traceback, clean_env, run_waaah
from tests.faults.test_bad_input import start_agent, started, stop
from tests.runtime.helpers import events, retry_until, session_dirs

pytestmark = pytest.mark.timeout(180)


def a_stopped_session(ws: Path, home: Path) -> Path:
    """A session run and stopped: its folder, left for the next command."""
    proc = start_agent(ws, clean_env(home))
    try:
        retry_until(lambda: started(ws), timeout=30)
    finally:
        out, err = stop(proc)
    assert_no_traceback(out, err)
    return session_dirs(ws)[-1]


def log_lines(folder: Path, words: str) -> list[str]:
    state = json.loads((folder / "session.json").read_text())
    text = Path(state["log_path"]).read_text(errors="replace")
    return [line for line in text.splitlines() if words in line]


# ---------------------------------------------------------------------------------------------
# events.jsonl: a FIFO never holds the supervisor, a symlink is never followed
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_an_events_file_that_is_a_fifo_or_a_symlink_is_one_line_and_the_session_goes_on(
    workspace, home, tmp_path, kind
):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    proc = start_agent(workspace, clean_env(home))
    try:
        retry_until(lambda: started(workspace), timeout=30)
        folder = session_dirs(workspace)[-1]
        path = folder / "events.jsonl"
        path.rename(folder / "events.jsonl.bak")
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to(outside)
        paused = run_waaah("pause", cwd=workspace, env=clean_env(home), timeout=30)
        assert paused.returncode == 0, paused.stderr
        # The pause is handled (saved in session.json) although its event cannot be written.
        retry_until(lambda: json.loads((folder / "session.json").read_text())["paused"], timeout=20)
        stopped = run_waaah("stop", cwd=workspace, env=clean_env(home), timeout=60)
        assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stdout + stopped.stderr
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
    assert_no_traceback(out, err)
    assert outside.read_text() == "precious\n", "an event was written through the link"
    said = log_lines(folder, f"could not append to {path}")
    assert len(said) == 1, said
    assert ("FIFO" if kind == "fifo" else "symlink") in said[0]


@pytest.mark.parametrize("ts", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+14:00"])
def test_an_event_time_out_of_the_clocks_range_is_an_odd_line_the_report_skips(workspace, home, ts):
    folder = a_stopped_session(workspace, home)
    events_file = folder / "events.jsonl"
    odd = json.dumps({"ts": ts, "event": "x"}) + "\n"
    events_file.write_text(odd + events_file.read_text() + odd)  # the first line and the last
    for args in (["report"], ["report", "--since", "1d"]):
        done = run_waaah(*args, cwd=workspace, env=clean_env(home), timeout=60)
        assert_no_traceback(done.stdout, done.stderr)
        assert done.returncode == 0 and folder.name in done.stdout, done.stdout + done.stderr


def a_cast(folder: Path) -> Path:
    return Path(json.loads((folder / "session.json").read_text())["cast_path"])


@pytest.mark.parametrize("timestamp", ["1e20", "NaN", "-1e300", '"noon"'])
def test_replay_of_a_record_whose_header_is_no_time_is_one_line(workspace, home, timestamp):
    cast = a_cast(a_stopped_session(workspace, home))
    events = cast.read_text().split("\n", 1)[1]
    cast.write_text(f'{{"version": 2, "width": 80, "height": 24, "timestamp": {timestamp}}}\n' + events)
    for args in (["replay", "--out", "-"], ["replay", "--at", "+1m", "--out", str(workspace / "r.cast")]):
        done = run_waaah(*args, cwd=workspace, env=clean_env(home), timeout=60)
        assert_no_traceback(done.stdout, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert done.returncode == 2 and "the record is damaged" in line and str(cast) in line, done.stderr


def strict_json(line: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"{name} is no JSON")

    return json.loads(line, parse_constant=refuse)


def test_replay_leaves_out_an_event_at_no_time_and_writes_json_only(workspace, home):
    cast = a_cast(a_stopped_session(workspace, home))
    with cast.open("a") as fh:
        fh.write('[Infinity, "o", "hi"]\n[NaN, "o", "hi"]\n["-inf", "o", "hi"]\n[1e400, "o", "hi"]\n')
        fh.write('[1.5, "o", "fine"]\n')
    done = run_waaah("replay", "--out", "-", cwd=workspace, env=clean_env(home), timeout=60)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    written = [strict_json(line) for line in done.stdout.splitlines()]
    shown = [e[2] for e in written if isinstance(e, list)]
    assert shown[-1] == "fine" and "hi" not in shown, shown
    left_out = [line for line in done.stderr.splitlines() if "not an event, left out" in line]
    assert len(left_out) == 4, done.stderr


# ---------------------------------------------------------------------------------------------
# The session's lock: a symlink or a FIFO is refused at the start, never followed nor waited on
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_lock_that_is_a_fifo_or_a_symlink_refuses_the_resume_in_one_line(workspace, home, tmp_path, kind):
    folder = a_stopped_session(workspace, home)
    target = tmp_path / "precious.txt"
    target.write_text("precious\n")
    lock = folder / "lock"
    lock.unlink()
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(target)
    done = run_waaah(
        "agent", "--start=simulated", "--no-nudge", "--resume", cwd=workspace, env=clean_env(home)
    )
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 8, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert str(lock) in line and "mv" in line, line
    assert target.read_text() == "precious\n", "the lock's target was written"
    assert len(session_dirs(workspace)) == 1


@pytest.mark.parametrize("command", [["status"], ["sessions"], ["send", "hello"], ["tail"]])
def test_a_lock_that_is_a_fifo_never_holds_up_a_command(workspace, home, command):
    folder = a_stopped_session(workspace, home)
    (folder / "lock").unlink()
    os.mkfifo(folder / "lock")
    try:
        done = run_waaah(*command, cwd=workspace, env=clean_env(home), timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"waaah {command[0]} waits on the FIFO") from None
    assert_no_traceback(done.stdout, done.stderr)
    said = [line for line in done.stderr.splitlines() if str(folder / "lock") in line]
    assert len(said) == 1 and "FIFO" in said[0], done.stderr
    if command[0] == "send":
        assert done.returncode != 0 and "queued" not in done.stdout
    if command[0] == "status":
        assert "(not running)" in done.stdout, done.stdout


# ---------------------------------------------------------------------------------------------
# session.json of the wrong shape: one warning naming it, moved aside, whatever reads it
# ---------------------------------------------------------------------------------------------

WRONG = '{"id": 5, "agent": [1]}'


@pytest.mark.parametrize("command", [["status"], ["sessions"], ["report"], ["replay", "--out", "-"]])
def test_a_session_file_of_the_wrong_shape_is_named_and_moved_aside_by_the_readers(workspace, home, command):
    folder = a_stopped_session(workspace, home)
    bad = folder / "session.json"
    bad.write_text(WRONG)
    done = run_waaah(*command, cwd=workspace, env=clean_env(home), timeout=60)
    assert_no_traceback(done.stdout, done.stderr)
    warned = [line for line in done.stderr.splitlines() if str(bad) in line]
    assert len(warned) == 1 and "unreadable" in warned[0], done.stderr
    [aside] = folder.glob("session.json.corrupt-*")
    assert aside.read_text() == WRONG and not bad.exists()


def test_a_session_file_of_the_wrong_shape_is_moved_aside_by_resume(workspace, home):
    folder = a_stopped_session(workspace, home)
    bad = folder / "session.json"
    bad.write_text(WRONG)
    proc = start_agent(workspace, clean_env(home), "--resume")
    try:
        retry_until(lambda: len(session_dirs(workspace)) == 2 and started(workspace), timeout=30)
    finally:
        out, err = stop(proc)
    assert_no_traceback(out, err)
    warned = [line for line in (out + err).splitlines() if "is unreadable" in line]
    assert len(warned) == 1 and str(bad) in warned[0] and "starting a fresh session" in warned[0], out + err
    assert [p.read_text() for p in folder.glob("session.json.corrupt-*")] == [WRONG]
    assert [e for e in events(workspace) if e["event"] == "start"]
