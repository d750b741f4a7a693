"""`waaah service`: a crew of agents as instances of one systemd template unit.

The files are read by systemd's own tools where they run here (`systemd-analyze verify`,
`systemd-escape`); each instance's environment file is read by its documented rule (a POSIX
shell's double quotes, systemd.exec(5)) and the template's command is run with it for real, twice:
a new session the first time, the same session resumed after the "reboot". Where a user systemd
runs, an instance is enabled and started through it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import stat
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.doubles.fake_systemctl import fake_systemctl
from tests.runtime.helpers import (
    WAAAH,
    events,
    instance_environment,
    retry_until,
    session_dirs,
    sim_env,
    verify,
)
from waaah_agent.core.night.service import escape_name, instance_name

pytestmark = pytest.mark.timeout(180)


@pytest.fixture()
def systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake systemctl first on PATH (the machine's user systemd is asked in one test only)."""
    return fake_systemctl(tmp_path / "fakebin", monkeypatch)


def waaah(*args: str, env: dict[str, str], cwd: Path | str = "/") -> subprocess.CompletedProcess[str]:
    return subprocess.run([WAAAH, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def unit_folder(config: Path) -> Path:
    return config / "systemd" / "user"


def env_files(config: Path) -> Path:
    return config / "waaah-agent" / "services"


def exec_argv(template: Path) -> list[str]:
    line = next(x for x in template.read_text().splitlines() if x.startswith("ExecStart="))
    return [a.replace("%%", "%").replace("$$", "$") for a in shlex.split(line[len("ExecStart=") :])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def starts_in(workspace: Path) -> list[dict]:
    return [e for e in events(workspace) if e["event"] == "start"] if session_dirs(workspace) else []


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def test_a_crew_of_instances_each_with_its_port_listed_run_and_removed_one_by_one(
    workspace, fake_home, tmp_path, systemctl
):
    config = tmp_path / "config"
    env = sim_env(fake_home, XDG_CONFIG_HOME=str(config))
    other = new_repo(tmp_path / "other repo")
    (workspace / ".agent" / "workflows").mkdir(parents=True)
    (workspace / ".agent" / "workflows" / "waaah-worker.md").write_text("Take the next task.\n")
    port = free_port()
    installs = [
        ("--start=simulated", "--as=waaah-orc", "--workspace", str(workspace), "--metrics-port", str(port)),
        ("--start=simulated", "--as=waaah-worker", "--workspace", str(workspace)),
        ("--start=gemini", "--as=waaah-orc", "--workspace", str(other)),
    ]
    for args in installs:
        done = waaah("service", "install", *args, env=env)
        assert done.returncode == 0, done.stderr
    template = unit_folder(config) / "waaah@.service"
    names = [
        instance_name("simulated", "waaah-orc", workspace),
        instance_name("simulated", "waaah-worker", workspace),
        instance_name("gemini", "waaah-orc", other),
    ]
    assert names[2] == "gemini-waaah-orc-other\\x20repo"
    assert sorted(p.name for p in unit_folder(config).iterdir()) == ["waaah@.service"]
    settings = [instance_environment(env_files(config) / f"{n}.env") for n in names]
    assert [s["WAAAH_METRICS_PORT"] for s in settings] == [str(port), "9470", "9471"]
    assert settings[2] == {
        "WAAAH_START": "gemini",
        "WAAAH_WORKFLOW": "waaah-orc",
        "WAAAH_WORKSPACE": str(other),
        "WAAAH_METRICS_PORT": "9471",
    }
    for name in names:
        checked = verify(template, name, tmp_path)
        assert checked.returncode == 0 and not checked.stderr, checked.stderr
    # Installing a name again for another workspace is refused; for the same one it is kept.
    again = waaah("service", "install", "--start=simulated", "--workspace", str(other),
                  "--name", names[0], env=env)  # fmt: skip
    assert again.returncode == 2 and "give another --name" in again.stderr
    same = waaah("service", "install", *installs[1], env=env)
    assert same.returncode == 0 and instance_environment(env_files(config) / f"{names[1]}.env") == settings[1]

    # The instance's command, run as systemd runs it: its environment file, the template's argv,
    # from the home folder. The first start begins a session; the one after a "reboot" resumes it.
    argv = exec_argv(template)
    assert Path(argv[0]).name == "waaah" and argv[1:] == ["agent", "--resume-or-start"]
    for boot in (1, 2):
        proc = subprocess.Popen(argv + ["--no-mcp"], cwd=fake_home, env={**env, **settings[0]},
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            retry_until(lambda n=boot: len(starts_in(workspace)) >= n, timeout=30)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
                assert answer.status == 200
            listed = json.loads(waaah("service", "status", "--json", env=env).stdout)
            assert [r["name"] for r in listed] == sorted(names)
            mine = next(r for r in listed if r["name"] == names[0])
            assert mine["ready"].startswith("not ready: starting"), mine
            assert next(r for r in listed if r["name"] == names[2])["ready"].startswith("no answer on :9471")
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    starts = starts_in(workspace)
    assert len(session_dirs(workspace)) == 1 and [s["resumed"] for s in starts] == [False, True]
    assert starts[0]["argv"][0].endswith("python3") or "simulated" in " ".join(starts[0]["argv"])

    # Removing one leaves the others as they were; the template goes with the last one.
    before = {p: p.read_bytes() for p in [template, *env_files(config).iterdir()]}
    removed = waaah("service", "remove", names[1], env=env)
    assert removed.returncode == 0, removed.stderr
    after = {p: p.read_bytes() for p in [template, *env_files(config).iterdir()]}
    assert after == {p: b for p, b in before.items() if names[1] not in p.name}
    assert waaah("service", "remove", names[1], env=env).returncode == 2
    for name in (names[0], names[2]):
        assert waaah("service", "remove", name, env=env).returncode == 0
    assert not template.exists() and not list(env_files(config).iterdir())
    text = waaah("service", "status", env=env).stdout
    assert "no agents installed" in text


def test_a_template_that_is_not_waaah_s_is_never_replaced(workspace, fake_home, tmp_path, systemctl):
    config = tmp_path / "config"
    env = sim_env(fake_home, XDG_CONFIG_HOME=str(config))
    unit_folder(config).mkdir(parents=True)
    foreign = unit_folder(config) / "waaah@.service"
    foreign.write_text("[Unit]\n")
    refused = waaah("service", "install", "--start=simulated", "--workspace", str(workspace), env=env)
    assert refused.returncode == 2 and "is not waaah's" in refused.stderr
    assert foreign.read_text() == "[Unit]\n" and not env_files(config).exists()
    missing = waaah("service", "install", "--start=simulated", "--workspace", str(tmp_path / "nope"), env=env)
    assert missing.returncode == 2 and "nope: no such folder" in missing.stderr, missing.stderr


def test_instance_names_are_escaped_as_systemd_escape_does():
    for text in ["my repo", "répo", ".hidden", "a/b", "tab\there", "new\nline", "x:y_z.w", "100%$`\"'"]:
        ours = escape_name(text)
        theirs = subprocess.run(["systemd-escape", "--", text], capture_output=True, text=True).stdout.strip()
        assert ours == theirs.replace("\\x2d", "-"), (text, ours, theirs)
        assert all(c.isalnum() or c in ":_.-\\" for c in ours) and ours.isascii()


def test_where_a_user_systemd_runs_the_instance_starts(workspace, fake_home):
    state = subprocess.run(["systemctl", "--user", "is-system-running"], capture_output=True, text=True)
    if state.stdout.strip() not in ("running", "degraded"):
        pytest.skip(
            f"no user systemd here ({state.stdout.strip() or state.stderr.strip()}): the instance's command is tested above"
        )
    env = dict(os.environ)
    done = waaah("service", "install", "--start=simulated", "--workspace", str(workspace), env=env)
    name = instance_name("simulated", "waaah-orc", workspace)
    try:
        assert "started and enabled" in done.stdout, done.stdout + done.stderr
        retry_until(lambda: session_dirs(workspace), timeout=30)
    finally:
        waaah("service", "remove", name, env=env)


def test_the_settings_file_is_private(workspace, fake_home, tmp_path, systemctl):
    config = tmp_path / "config"
    env = sim_env(fake_home, XDG_CONFIG_HOME=str(config))
    assert (
        waaah("service", "install", "--start=simulated", "--workspace", str(workspace), env=env).returncode
        == 0
    )
    folder = env_files(config)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert [stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()] == [0o600]


def test_a_unit_of_an_earlier_waaah_is_listed_and_removed(fake_home, tmp_path, systemctl):
    config = tmp_path / "config"
    env = sim_env(fake_home, XDG_CONFIG_HOME=str(config))
    unit_folder(config).mkdir(parents=True)
    old = unit_folder(config) / "waaah-gemini-waaah-orc-app.service"
    old.write_text(  # what an earlier `waaah service install` wrote: the alert URL in the unit
        "# Written by `waaah service install`; remove with: waaah service remove waaah-gemini-waaah-orc-app\n"
        '[Service]\nExecStart="/usr/bin/waaah" "agent" "--notify" "json://u:pw@h/x"\n'
    )
    listed = json.loads(waaah("service", "status", "--json", env=env).stdout)
    assert [(r["name"], r["systemd"]) for r in listed] == [("waaah-gemini-waaah-orc-app", "legacy")]
    kept = waaah("service", "remove", "waaah-gemini-waaah-orc-app", env={**env, "FAKE_SYSTEMCTL_FAIL": "1"})
    assert kept.returncode == 2 and "nothing was removed" in kept.stderr and old.exists(), kept.stderr
    done = waaah("service", "remove", "waaah-gemini-waaah-orc-app", env=env)
    assert done.returncode == 0 and not old.exists(), done.stderr
