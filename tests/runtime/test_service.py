"""`waaah service`: the unit file's content, and the command in it run for real, twice: a new
session the first time, the same session resumed after the "reboot". Where a user systemd
runs, the unit is enabled and started through it."""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
from dataclasses import astuple
from pathlib import Path

import pytest

from tests.runtime.helpers import WAAAH, events, retry_until, session_dirs, sim_env
from waaah_agent.core.service import Service, launchd_plist, service_name, systemd_unit


def test_the_unit_runs_the_resuming_supervisor_with_every_argument_quoted():
    s = Service(
        "waaah-x",
        "/opt/w a/waaah",
        "gemini",
        "waaah-orc",
        Path("/home/me/my repo"),
        "/usr/bin:/bin",
        ("--notify", "json://h/100%$x"),
    )
    unit = systemd_unit(Service(*astuple(s)[:5], "/usr/bin:/opt/$x%y", s.extra))
    (exec_line,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert exec_line == (
        'ExecStart="/opt/w a/waaah" "agent" "--start=gemini" "--as=waaah-orc" "--workspace" '
        '"/home/me/my repo" "--resume-or-start" "--notify" "json://h/100%%$$x"'
    )
    # WorkingDirectory= is taken as it stands (a quoted path is "not absolute"); "$" is special
    # in ExecStart= only.
    assert "\nWorkingDirectory=/home/me/my repo\n" in unit and "Restart=on-failure" in unit
    assert '\nEnvironment="PATH=/usr/bin:/opt/$x%%y"\n' in unit
    assert "WantedBy=default.target" in unit and unit.startswith("# Written by `waaah service install`")
    plist = launchd_plist(s, Path("/home/me/my repo/.waaah/logs"))
    assert "<string>--resume-or-start</string>" in plist and "<string>json://h/100%$x</string>" in plist
    assert service_name("gemini", "waaah-orc", Path("/home/me/my repo!")) == "waaah-gemini-waaah-orc-my-repo-"


def starts_in(workspace: Path) -> list[dict]:
    return [e for e in events(workspace) if e["event"] == "start"] if session_dirs(workspace) else []


def exec_argv(unit: Path) -> list[str]:
    line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    return [a.replace("%%", "%").replace("$$", "$") for a in shlex.split(line[len("ExecStart=") :])]


def test_install_writes_the_unit_and_its_command_starts_then_resumes_the_session(
    workspace, fake_home, tmp_path
):
    env = sim_env(fake_home, XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = subprocess.run(
        [WAAAH, "service", "install", "--start=simulated", "--as=waaah-orc", "--workspace", str(workspace)],
        cwd=workspace, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    name = service_name("simulated", "waaah-orc", workspace)
    unit = tmp_path / "config" / "systemd" / "user" / f"{name}.service"
    assert f"wrote {unit}" in done.stdout
    if shutil.which("systemd-analyze"):  # systemd's own reading of the unit: no fatal setting
        checked = subprocess.run(
            ["systemd-analyze", "verify", "--system", str(unit)], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stderr
    argv = exec_argv(unit)
    assert Path(argv[0]).name == "waaah" and argv[1:4] == ["agent", "--start=simulated", "--as=waaah-orc"]
    for boot in (1, 2):  # the first start, then the one after a "reboot"
        proc = subprocess.Popen(argv + ["--no-mcp"], cwd="/", env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            retry_until(lambda n=boot: len(starts_in(workspace)) >= n, timeout=30)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    starts = [e for e in events(workspace) if e["event"] == "start"]
    assert len(session_dirs(workspace)) == 1 and [s["resumed"] for s in starts] == [False, True]
    missing = subprocess.run([WAAAH, "service", "install", "--start=simulated", "--workspace", str(tmp_path / "nope")],
                             cwd=workspace, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert missing.returncode == 2 and "nope: no such folder" in missing.stderr, missing.stderr
    assert not list(unit.parent.glob("*nope*"))
    foreign = unit.with_name("waaah-foreign.service")
    foreign.write_text("[Unit]\n")
    refused = subprocess.run([WAAAH, "service", "install", "--start=simulated", "--name", "waaah-foreign"],
                             cwd=workspace, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 2 and "not a unit of waaah's" in refused.stderr
    assert foreign.read_text() == "[Unit]\n"
    removed = subprocess.run([WAAAH, "service", "remove", name], cwd=workspace, env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert removed.returncode == 0 and not unit.exists()


def test_where_a_user_systemd_runs_the_service_starts(workspace, fake_home):
    state = subprocess.run(["systemctl", "--user", "is-system-running"], capture_output=True, text=True)
    if state.stdout.strip() not in ("running", "degraded"):
        pytest.skip(
            f"no user systemd here ({state.stdout.strip() or state.stderr.strip()}): the unit's command is tested above"
        )
    done = subprocess.run([WAAAH, "service", "install", "--start=simulated", "--workspace", str(workspace)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    name = service_name("simulated", "waaah-orc", workspace)
    try:
        assert "started and enabled" in done.stdout, done.stdout + done.stderr
        retry_until(lambda: session_dirs(workspace), timeout=30)
    finally:
        subprocess.run([WAAAH, "service", "remove", name], capture_output=True, timeout=60)
