"""`waaah service install` with hostile names and secrets: nothing a folder's name holds reaches a
unit file, no secret is written into one, and a name systemd cannot take is refused in one line.
A fake systemctl answers (or fails, with FAKE_SYSTEMCTL_FAIL): the machine's own is never asked."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from tests.doubles.fake_systemctl import fake_systemctl
from tests.faults.conftest import clean_env, run_waaah
from tests.runtime.helpers import instance_environment, verify

SECRET = "hunter2-notify-9b7e3f"
NOTIFY = f"json://alerts:{SECRET}@127.0.0.1:9/hook"


@pytest.fixture(autouse=True)
def systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The log of the fake systemctl every test here runs with."""
    return fake_systemctl(tmp_path / "fakebin", monkeypatch)


def unit_texts(config: Path) -> dict[str, str]:
    """Every file systemd reads as a unit (and drop-in) under the user's unit folder."""
    root = config / "systemd" / "user"
    return {str(p): p.read_text() for p in root.rglob("*") if p.is_file()} if root.exists() else {}


@pytest.mark.parametrize(
    "folder",
    [
        "app\nExecStartPre=touch waaah-pwned",
        "app\n[Service]\nUser=root",
        'a "quoted" $HOME %h `x` \\n folder',
    ],
)
def test_a_folder_name_cannot_add_a_directive_and_arrives_intact(folder, fake_home, tmp_path):
    config = tmp_path / "config"
    ws = tmp_path / folder
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    env = clean_env(fake_home, XDG_CONFIG_HOME=str(config))
    done = run_waaah("service", "install", "--start=gemini", "--workspace", str(ws), "--notify", NOTIFY,
                     cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    units = unit_texts(config)
    assert list(units) == [str(config / "systemd" / "user" / "waaah@.service")]
    for path, text in units.items():
        for line in text.splitlines():  # every line is one of ours: the template names no folder
            assert (
                not line.startswith(("ExecStartPre", "User=")) and line != "[Service]" or line == "[Service]"
            )
        assert folder.splitlines()[0] not in text.replace("waaah agent", ""), path
        assert SECRET not in text, path
    assert text.count("[Service]") == 1 and text.count("ExecStart") == 1
    (settings,) = (config / "waaah-agent" / "services").iterdir()
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    values = instance_environment(settings)
    assert values["WAAAH_WORKSPACE"] == str(ws) and values["WAAAH_NOTIFY"] == NOTIFY
    instance = settings.name[: -len(".env")]
    assert "\n" not in instance and "/" not in instance and instance.isascii()
    checked = verify(config / "systemd" / "user" / "waaah@.service", instance, tmp_path)
    assert checked.returncode == 0 and not checked.stderr, checked.stderr
    assert not list(tmp_path.rglob("waaah-pwned"))


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("my agent", "not a name systemd takes"),
        ("a/b", "not a name systemd takes"),
        ("x\nExecStartPre=/bin/true", "not a name systemd takes"),
        (".hidden", "not a name systemd takes"),
        ("n" * 250, "over systemd's 255"),
    ],
)
def test_a_name_systemd_cannot_take_is_refused_in_one_line(name, says, workspace, fake_home, tmp_path):
    config = tmp_path / "config"
    env = clean_env(fake_home, XDG_CONFIG_HOME=str(config))
    done = run_waaah("service", "install", "--start=gemini", "--workspace", str(workspace), "--name", name,
                     cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not unit_texts(config) and not (config / "waaah-agent").exists()


def test_a_long_folder_name_asks_for_a_name_instead_of_a_unit_systemd_refuses(fake_home, tmp_path):
    ws = tmp_path / ("é" * 120)  # 240 bytes of UTF-8: 960 characters escaped
    ws.mkdir()
    env = clean_env(fake_home, XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = run_waaah("service", "install", "--start=gemini", "--workspace", str(ws), cwd=tmp_path, env=env)
    assert done.returncode == 2 and "give --name" in done.stderr and len(done.stderr.splitlines()) == 1


def test_the_alert_urls_a_service_sets_never_reach_the_agent(workspace, fake_home, tmp_path):
    import signal

    from tests.runtime.helpers import WAAAH, retry_until, state_or_none

    env = clean_env(fake_home, WAAAH_NOTIFY=NOTIFY)  # as the instance's environment file sets it
    agent = subprocess.Popen([WAAAH, "agent", "--start=simulated", "--no-mcp", "--no-nudge"], cwd=workspace,
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        pid = retry_until(lambda: (state_or_none(workspace) or {}).get("agent_pid"), 30)
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    finally:
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=60) == 0
    assert b"WAAAH_NOTIFY" not in environ and SECRET.encode() not in environ


def test_a_service_systemctl_could_not_stop_is_kept_with_how_to_retry(
    workspace, fake_home, tmp_path, systemctl
):
    config = tmp_path / "config"
    env = clean_env(fake_home, XDG_CONFIG_HOME=str(config))
    done = run_waaah("service", "install", "--start=gemini", "--workspace", str(workspace), "--name", "x",
                     cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0 and "started and enabled" in done.stdout, done.stderr
    files = [config / "waaah-agent" / "services" / "x.env", config / "systemd" / "user" / "waaah@.service"]
    before = {p: p.read_bytes() for p in files}
    refused = run_waaah("service", "remove", "x", cwd=tmp_path, env={**env, "FAKE_SYSTEMCTL_FAIL": "1"})
    assert refused.returncode == 2 and not refused.stdout, refused.stdout
    (line,) = refused.stderr.strip().splitlines()
    assert "waaah@x.service" in line and "Failed to connect to bus" in line, line
    assert "nothing was removed" in line and "waaah service remove x" in line, line
    assert {p: p.read_bytes() for p in files} == before  # still installed: nothing orphaned
    listed = run_waaah("service", "status", cwd=tmp_path, env=env)
    assert "waaah@x.service" in listed.stdout, listed.stdout
    removed = run_waaah("service", "remove", "x", cwd=tmp_path, env=env)  # the retry, systemd answering
    assert removed.returncode == 0 and not any(p.exists() for p in files), removed.stderr
    assert "disable --now waaah@x.service" in systemctl.read_text()


@pytest.mark.parametrize(
    ("workflow", "says", "code"),
    [
        ("nonexistent-flow", "workflow 'nonexistent-flow' not found", 4),
        ("", "give a name", 2),
        ("../../../../etc/passwd", "not a path", 2),
    ],
)
def test_a_workflow_waaah_agent_would_refuse_is_refused_before_anything_is_written(
    workflow, says, code, workspace, fake_home, tmp_path, systemctl
):
    config = tmp_path / "config"
    env = clean_env(fake_home, XDG_CONFIG_HOME=str(config))
    agent = run_waaah("agent", "--start=simulated", "--no-mcp", "--as", workflow, cwd=workspace, env=env)
    assert agent.returncode == code and says in agent.stderr, agent.stderr  # what the service would run
    done = run_waaah("service", "install", "--start=gemini", "--as", workflow, "--name", "x",
                     "--workspace", str(workspace), cwd=tmp_path, env=env)  # fmt: skip
    assert (done.returncode, done.stdout) == (code, ""), done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line == agent.stderr.strip().splitlines()[-1], (line, agent.stderr)
    assert not unit_texts(config) and not (config / "waaah-agent").exists()
    assert not systemctl.read_text()


def test_a_workflow_of_the_workspace_is_installed_by_its_name(workspace, fake_home, tmp_path, systemctl):
    (workspace / ".agent" / "workflows").mkdir(parents=True)
    (workspace / ".agent" / "workflows" / "night-shift.md").write_text("Keep going.\n")
    config = tmp_path / "config"
    env = clean_env(fake_home, XDG_CONFIG_HOME=str(config))
    done = run_waaah("service", "install", "--start=gemini", "--as", "/night-shift.md", "--name", "x",
                     "--workspace", str(workspace), cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    values = instance_environment(config / "waaah-agent" / "services" / "x.env")
    assert values["WAAAH_WORKFLOW"] == "night-shift"


def test_a_settings_folder_others_can_read_is_made_private_but_never_through_a_link(
    workspace, fake_home, tmp_path, systemctl
):
    config = tmp_path / "config"
    folder = config / "waaah-agent" / "services"
    folder.mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)  # as an earlier waaah, or a plain mkdir -p, left it
    env = clean_env(fake_home, XDG_CONFIG_HOME=str(config))
    install = ("service", "install", "--start=gemini", "--workspace", str(workspace), "--name", "x")
    assert run_waaah(*install, cwd=tmp_path, env=env).returncode == 0
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "x.env").stat().st_mode) == 0o600
    # A link in its place (the user's own choice of where it lives): what it points to is not changed.
    elsewhere = tmp_path / "shared"
    elsewhere.mkdir(mode=0o755)
    elsewhere.chmod(0o755)
    other = tmp_path / "config2"
    (other / "waaah-agent").mkdir(parents=True)
    (other / "waaah-agent" / "services").symlink_to(elsewhere)
    done = run_waaah(*install, cwd=tmp_path, env={**env, "XDG_CONFIG_HOME": str(other)})
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755
    assert stat.S_IMODE((elsewhere / "x.env").stat().st_mode) == 0o600
