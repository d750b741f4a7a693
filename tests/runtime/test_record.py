"""The record of the night, through the real `waaah` over the simulated agent: `waaah sessions`
tells what happened, and `--resume [ID]` carries on a named session with its own options."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.runtime.helpers import WAAAH, delivered, events, retry_until, session_dirs, sim_env


def headless(ws: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [WAAAH, "agent", "--start=simulated", *args],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def stop(proc: subprocess.Popen[bytes]) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    return out.decode()


def session_json(ws: Path, sid: str) -> dict:
    return json.loads((ws / ".waaah" / "sessions" / sid / "session.json").read_text())


def status_of(ws: Path, sid: str) -> str | None:
    """The session's status, None while its folder is there but its first save is not."""
    try:
        return session_json(ws, sid)["status"]
    except FileNotFoundError:
        return None


def waaah(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAAAH, *args], cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )


def test_waaah_sessions_tells_what_happened_overnight(workspace, fake_home):
    env = sim_env(fake_home, WAAAH_RESTART_BASE_SECONDS="0.05")
    proc = headless(workspace, env)
    try:
        retry_until(lambda: session_dirs(workspace) and delivered(workspace), 30)
        retry_until(lambda: any(e["event"] == "nudge" for e in events(workspace)), 30)
        first = [e for e in events(workspace) if e["event"] == "start"][0]
        os.kill(first["pid"], signal.SIGKILL)  # a crash in the night
        retry_until(lambda: [e["event"] for e in events(workspace)].count("start") == 2, 30)
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    listed = waaah(workspace, env, "sessions")
    assert listed.returncode == 0, listed.stderr
    text = listed.stdout
    assert '"waaah-orc: You are a WAAAH agent: stay in the loop"' in text, text
    assert "supervised: waaah-orc" not in text
    assert "ended: signal: received SIGTERM" in text and "restarts 1" in text, text
    nudges = sum(e["event"] == "nudge" for e in events(workspace))
    assert f"nudges {nudges}" in text and nudges >= 1, text
    row = json.loads(waaah(workspace, env, "sessions", "--json").stdout)[0]
    assert row["restarts"] == 1 and row["nudges"] == nudges
    assert row["started"] and row["ended"] and row["end_reason"].startswith("signal")
    assert isinstance(row["duration_s"], int) and 0 <= row["duration_s"] < 120
    status = waaah(workspace, env, "status")
    assert f"restarts     1; nudges {nudges}" in status.stdout, status.stdout


def test_resume_names_a_session_and_keeps_its_options(workspace, fake_home):
    env = sim_env(fake_home)
    opts = ["--heartbeat", "77", "--restart-budget", "3", "--stall-timeout", "400", "--", "--sim-extra"]
    proc = headless(workspace, env, *opts)
    try:
        retry_until(lambda: session_dirs(workspace) and delivered(workspace), 30)
    finally:
        stop(proc)
    named = session_dirs(workspace)[0].name
    kept = session_json(workspace, named)["options"]
    assert kept["heartbeat"] == 77 and kept["restart_budget"] == 3 and kept["extra_args"] == ["--sim-extra"]
    assert "api_key" not in kept

    proc = headless(workspace, env)  # a second session: now the newest
    try:
        retry_until(lambda: len(session_dirs(workspace)) == 2, 30)
        newest = next(d.name for d in session_dirs(workspace) if d.name != named)
        retry_until(lambda: status_of(workspace, newest) == "running", 30)
    finally:
        stop(proc)

    proc = headless(workspace, env, "--resume", named, "--heartbeat", "55")
    try:
        retry_until(lambda: status_of(workspace, named) == "running", 30)
        st = session_json(workspace, named)
    finally:
        out = stop(proc)
    assert len(session_dirs(workspace)) == 2, out  # no third session: the named one goes on
    assert "--sim-extra" in st["argv"], st["argv"]  # the CLI arguments it was started with
    assert st["options"]["heartbeat"] == 55  # given again: it wins
    assert st["options"]["restart_budget"] == 3 and st["options"]["stall_timeout"] == 400  # kept
    assert session_json(workspace, newest)["status"] == "stopped"


def test_resume_of_an_unknown_or_other_agents_session_is_one_line(workspace, fake_home):
    env = sim_env(fake_home)
    done = waaah(workspace, env, "agent", "--start=simulated", "--resume", "simulated-nope")
    assert done.returncode != 0 and "no session simulated-nope" in done.stderr, done.stderr
    folder = workspace / ".waaah" / "sessions" / "gemini-20261123-010203-abcdef"
    folder.mkdir(parents=True)
    (folder / "session.json").write_text("{}")
    done = waaah(workspace, env, "agent", "--start=simulated", "--resume", folder.name)
    assert done.returncode == 2 and "--start=gemini" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
