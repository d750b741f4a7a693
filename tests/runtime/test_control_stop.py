"""`waaah stop` from another shell: the command it prints to carry on runs as pasted, from another
folder and with waaah off PATH (its full path, the workspace named)."""

from __future__ import annotations

import shlex
import signal
import subprocess
from pathlib import Path

from tests.runtime.helpers import WAAAH, events, retry_until, session_dirs, sim_env


def test_the_command_stop_prints_carries_the_session_on_as_pasted(workspace, fake_home, tmp_path):
    env = sim_env(fake_home, PATH="/usr/bin:/bin")  # waaah itself is not on PATH
    agent = subprocess.Popen([WAAAH, "agent", "--start=simulated", "--no-mcp"], cwd=workspace, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    try:
        retry_until(
            lambda: session_dirs(workspace) and any(e["event"] == "start" for e in events(workspace)), 30
        )
        stopped = subprocess.run([WAAAH, "stop", "--workspace", str(workspace)], cwd=elsewhere, env=env,
                                 capture_output=True, text=True, timeout=90)  # fmt: skip
        assert stopped.returncode == 0, stopped.stderr
        assert agent.wait(timeout=30) == 0
    finally:
        if agent.poll() is None:
            agent.kill()
    command = stopped.stdout.split("carry on with: ", 1)[1].strip()
    argv = shlex.split(command)
    assert Path(argv[0]).resolve() == Path(WAAAH).resolve(), command  # runs without PATH
    assert argv[-2:] == ["--workspace", str(workspace)] and "--resume" in argv
    resumed = subprocess.Popen(argv + ["--no-mcp"], cwd=elsewhere, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        retry_until(
            lambda: [e.get("resumed") for e in events(workspace) if e["event"] == "start"] == [False, True],
            30,
        )
    finally:
        resumed.send_signal(signal.SIGTERM)
        assert resumed.wait(timeout=30) == 0
    assert len(session_dirs(workspace)) == 1
