"""No process left behind: what the agent (or a `waaah run` CLI) starts ends with it, even a
`setsid` daemon or a `nohup` child; what a SIGKILLed supervisor could not end is reported, with
the command that stops it, and only while the pid is still that very process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.conftest import pid_alive
from tests.faults.conftest import WAAAH, assert_no_traceback, clean_env, run_waaah
from tests.runtime.helpers import (
    delivered,
    retry_until,
    session_dirs,
    sim_env,
    sim_messages,
    spawn_waaah,
    state,
    typed,
)

KILL = re.compile(r"kill -TERM ((?:\d+ ?)+)")


def spawned(pid_file: Path, count: int) -> dict[str, int]:
    """``kind pid`` lines the simulated agent (SIM_SPAWN) or the fake CLI wrote, once all are there."""
    lines = pid_file.read_text().split("\n") if pid_file.exists() else []
    found = dict(line.split() for line in lines if line.strip())
    return {kind: int(pid) for kind, pid in found.items()} if len(found) >= count else {}


@pytest.fixture()
def strays() -> Iterator[list[int]]:
    """Pids a test made; whatever is left of them when it ends (a failure) is killed."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def kill_pids(text: str) -> set[int]:
    found = KILL.search(text)
    return {int(p) for p in found.group(1).split()} if found else set()


def stop_with_menu(child: pexpect.spawn) -> None:
    child.send("\x03")
    child.expect("save and exit")
    child.send("s")
    child.expect(pexpect.EOF, timeout=20)


@pytest.mark.parametrize("how", ["save-and-exit", "SIGTERM", "SIGHUP"])
def test_a_stop_ends_the_daemon_and_the_nohup_child_the_agent_started(
    workspace, fake_home, tmp_path, strays, how
):
    pid_file = tmp_path / "pids"
    env = sim_env(fake_home, SIM_SPAWN="setsid,nohup", SIM_SPAWN_PIDS=str(pid_file))
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=env)
    left = retry_until(lambda: spawned(pid_file, 2))
    strays.extend(left.values())
    assert all(pid_alive(pid) for pid in left.values())
    child.expect("Type your message")
    if how == "save-and-exit":
        stop_with_menu(child)
    else:
        os.kill(child.pid, getattr(signal, how))
        child.expect(pexpect.EOF, timeout=20)
    retry_until(lambda: not any(pid_alive(pid) for pid in left.values()), timeout=5)
    final = state(workspace)
    assert final["processes"] == [] and final["status"] != "running"
    assert_no_traceback(child.before.decode("utf-8", "replace"))


def all_spawned(pid_file: Path) -> list[int]:
    return [int(line.split()[1]) for line in pid_file.read_text().splitlines() if line.strip()]


def test_an_agent_that_exits_and_is_restarted_takes_what_it_started_with_it(
    workspace, fake_home, tmp_path, strays
):
    pid_file = tmp_path / "pids"
    env = sim_env(fake_home, SIM_SPAWN="setsid,nohup", SIM_SPAWN_PIDS=str(pid_file))
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=env)
    retry_until(lambda: session_dirs(workspace) and delivered(workspace))
    retry_until(lambda: sim_messages(workspace, state(workspace)["native_session_id"], role="model"))
    first = retry_until(lambda: spawned(pid_file, 2))
    strays.extend(first.values())
    typed(child, "/crash 3")
    child.expect("restarting in")
    retry_until(lambda: not any(pid_alive(pid) for pid in first.values()), timeout=5)
    child.expect("Resumed session")
    retry_until(lambda: len(all_spawned(pid_file)) == 4)
    second = all_spawned(pid_file)[2:]
    strays.extend(second)
    assert all(pid_alive(pid) for pid in second)
    child.expect("Type your message")
    stop_with_menu(child)
    retry_until(lambda: not any(pid_alive(pid) for pid in second), timeout=5)


def test_a_sigkilled_supervisor_s_leftovers_are_reported_with_the_command_that_stops_them(
    workspace, fake_home, tmp_path, strays
):
    pid_file = tmp_path / "pids"
    env = sim_env(fake_home, SIM_SPAWN="setsid,nohup", SIM_SPAWN_PIDS=str(pid_file))
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=env)
    left = retry_until(lambda: spawned(pid_file, 2))
    strays.extend(left.values())
    # The slow timer records them (1 s after the spawn, then doubling).
    retry_until(lambda: set(left.values()) <= {p["pid"] for p in state(workspace)["processes"]}, timeout=10)
    agent = state(workspace)["agent_pid"]
    os.kill(child.pid, signal.SIGKILL)
    child.close(force=True)
    retry_until(lambda: not pid_alive(agent), timeout=5)  # the parent-death signal
    assert pid_alive(left["setsid"])  # a daemon of its own session: nothing reached it
    survivors = {pid for pid in left.values() if pid_alive(pid)}

    plain = clean_env(fake_home)
    status = run_waaah("status", cwd=workspace, env=plain)
    assert status.returncode == 0, status.stderr
    assert "leftovers" in status.stdout and kill_pids(status.stdout) == survivors, status.stdout
    doctor = run_waaah("doctor", "--agent", "simulated", cwd=workspace, env=plain)
    line = next(ln for ln in doctor.stdout.splitlines() if "leftover processes" in ln)
    assert line.startswith("warn") and kill_pids(line) == survivors, doctor.stdout
    assert_no_traceback(status.stdout, status.stderr, doctor.stdout, doctor.stderr)

    again = spawn_waaah(workspace, "--start=simulated", "--resume", "--no-nudge", env=sim_env(fake_home))
    again.expect(KILL)
    said = again.after.decode()
    again.expect("Type your message")
    stop_with_menu(again)
    assert kill_pids(said) == survivors
    assert pid_alive(left["setsid"])  # reported, not killed: the new supervisor did not start it
    assert kill_pids(run_waaah("status", cwd=workspace, env=plain).stdout) == survivors

    # The pid now names another process (start time differs): never reported, never signalled.
    path = session_dirs(workspace)[-1] / "session.json"
    saved = json.loads(path.read_text())
    real = json.loads(path.read_text())
    for rec in [*saved["processes"], *saved["leftovers"]]:
        rec["start"] += 1
    path.write_text(json.dumps(saved))
    assert "kill -TERM" not in run_waaah("status", cwd=workspace, env=plain).stdout
    doctor = run_waaah("doctor", "--agent", "simulated", cwd=workspace, env=plain)
    assert "leftover processes: none" in doctor.stdout, doctor.stdout

    path.write_text(json.dumps(real))
    command = KILL.search(run_waaah("status", cwd=workspace, env=plain).stdout)
    assert command is not None
    subprocess.run(command.group(0), shell=True, check=True)
    retry_until(lambda: not any(pid_alive(pid) for pid in survivors), timeout=5)
    assert "kill -TERM" not in run_waaah("status", cwd=workspace, env=plain).stdout


FAKE_GEMINI = """#!/bin/sh
if [ "$1" = "--version" ]; then echo 0.0.0; exit 0; fi
if [ "$1" = "--help" ]; then echo "Usage: gemini [options]"; exit 0; fi
setsid sleep 300 </dev/null >/dev/null 2>&1 &
echo "daemon $!" >> "$FAKE_PIDS"
echo "cli $$" >> "$FAKE_PIDS"
if [ -n "$FAKE_EXIT" ]; then
  echo '{"type":"result","status":"success","stats":{}}'
  exit 0
fi
exec sleep 300
"""


def fake_cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "gemini"
    fake.write_text(FAKE_GEMINI)
    fake.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "LANG": "C.UTF-8",
        "FAKE_PIDS": str(tmp_path / "pids"),
        "WAAAH_PASS_ENV": "FAKE_",  # the fake CLI's own settings (a CLI gets only what it needs)
        **extra,
    }


def test_a_waaah_run_ends_what_its_cli_started(workspace, tmp_path, strays):
    env = fake_cli_env(tmp_path, FAKE_EXIT="1")
    done = subprocess.run(
        [WAAAH, "run", "hi", "--agent", "gemini", "--timeout", "30"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=40,
    )
    left = spawned(tmp_path / "pids", 2)
    strays.extend(left.values())
    assert left, done.stderr
    assert not pid_alive(left["daemon"]), "the CLI's daemon outlived the run"
    assert_no_traceback(done.stdout, done.stderr)


def test_a_sigkilled_waaah_run_shows_as_killed_and_its_leftovers_are_reported(workspace, tmp_path, strays):
    env = fake_cli_env(tmp_path)
    run = subprocess.Popen(
        [WAAAH, "run", "hi", "--agent", "gemini", "--timeout", "60"],
        cwd=workspace,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        left = retry_until(lambda: spawned(tmp_path / "pids", 2))
        strays.extend(left.values())
        sessions = run_waaah("sessions", cwd=workspace, env=env)
        assert " running " in sessions.stdout, sessions.stdout
        logs = list((workspace / ".waaah" / "runs").glob("*/*.jsonl"))
        retry_until(lambda: f'"pid": {left["daemon"]}' in logs[0].read_text())  # recorded
        run.kill()
    finally:
        run.kill()
        run.wait()
    retry_until(lambda: not pid_alive(left["cli"]), timeout=5)  # the parent-death signal
    sessions = run_waaah("sessions", cwd=workspace, env=env)
    assert " killed " in sessions.stdout and " running " not in sessions.stdout, sessions.stdout
    assert pid_alive(left["daemon"])
    doctor = run_waaah("doctor", "--agent", "gemini", cwd=workspace, env=env)
    line = next(ln for ln in doctor.stdout.splitlines() if "leftover processes" in ln)
    assert kill_pids(line) == {left["daemon"]}, doctor.stdout
    assert_no_traceback(sessions.stdout, sessions.stderr, doctor.stdout, doctor.stderr)


# -- the pieces, in-process -------------------------------------------------------------------


def test_a_recorded_process_is_only_the_same_process_with_the_same_start_time(strays):
    from waaah_agent.runtime import reaper

    sleeper = subprocess.Popen(["sleep", "30"])
    strays.append(sleeper.pid)
    proc = reaper.read_stat(sleeper.pid)
    assert proc is not None
    rec = reaper.record(proc)
    assert reaper.still_running([rec, dict(rec)]) == [rec]  # once, however often recorded
    assert reaper.still_running([{**rec, "start": rec["start"] + 1}]) == []  # a reused pid
    assert reaper.still_running([{**rec, "boot": "another-boot"}]) == []
    assert reaper.still_running([{"pid": "x"}, {"start": 1}, {"pid": os.getpid(), "start": 0}]) == []
    assert not reaper.send(reaper.Proc(sleeper.pid, 0, proc.start + 1, "S"), signal.SIGKILL)
    assert sleeper.poll() is None  # the wrong start time: not signalled
    assert reaper.send(proc, signal.SIGKILL)
    sleeper.wait(5)
    assert reaper.still_running([rec]) == []


def test_session_json_with_odd_process_fields_still_loads():
    from waaah_agent.runtime.store import SessionState

    base = {"id": "s", "agent": "a", "workflow": "w", "workspace": "/", "native_session_id": "n", "schema": 1}
    assert SessionState.from_json(base).processes == []
    odd = SessionState.from_json({**base, "processes": "nonsense", "leftovers": [1, 2]})
    assert odd.processes == [] and odd.leftovers == []
    kept = SessionState.from_json({**base, "processes": [{"pid": 5, "start": 7}]})
    assert kept.processes == [{"pid": 5, "start": 7}]


def test_a_run_log_without_an_end_is_killed_only_when_its_process_is_gone(tmp_path):
    from waaah_agent.runtime import reaper
    from waaah_agent.runtime.oneshot import runlog

    def log(name: str, **start: object) -> Path:
        path = tmp_path / "2025-01-01" / f"{name}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({"record": "start", "ts": 1.0, "agent": "gemini", **start}) + "\n")
        return path

    gone = subprocess.Popen(["true"])
    gone.wait()
    me = {"pid": os.getpid(), "pid_start": reaper.start_time(os.getpid()), "boot": reaper.boot_id()}
    assert (
        runlog.summarize(log("dead", pid=gone.pid, pid_start=12345, boot=reaper.boot_id())).status == "killed"
    )
    assert runlog.summarize(log("alive", **me)).status == "running"
    assert runlog.summarize(log("reused", **{**me, "pid_start": me["pid_start"] - 1})).status == "killed"
    assert runlog.summarize(log("older", prompt="hi")).status == "running"  # no pid recorded: unknown
    summary = runlog.summarize(log("alive2", prompt="first line", parent_id="p1", **me))
    assert (summary.first_prompt, summary.parent_id, summary.agent) == ("first line", "p1", "gemini")
