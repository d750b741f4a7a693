"""The core scenarios over older releases of the real CLIs (`make clis-old`), and a release too
old to drive. Releases and their dates: docs/supervisor.md "CLI releases"; what differs is recorded in
tests/fixtures/releases (scripts/record_releases.py)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.doubles.cli_homes import OLD_RELEASES, TOO_OLD, old_cli_bin_dir
from tests.doubles.fake_model import FakeModel, Text
from tests.e2e.conftest import workspace_for
from tests.e2e.test_agent_codex import killed_codex_resumes_natively, workflow_loop_and_continue_through_codex
from tests.e2e.test_waaah_agent import cli_env, killed_cli_resumes_natively, workflow_loop_exit_and_continue
from tests.runtime.helpers import WAAAH, events, state
from waaah_agent.runtime.clis import CHECKOUT

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

#: The project's own way to install the release waaah is tested with (runtime/clis.py).
INSTALL_GEMINI = (
    f"{CHECKOUT}/scripts/install_clis.sh gemini (the pinned 0.61.0, into {CHECKOUT}/.cache/clis; "
    "make run AGENT=gemini does it too)"
)

#: gemini and claude against the fake model API; codex (the OpenAI-style fake) below.
OLDER = [(cli, version) for cli, versions in OLD_RELEASES.items() if cli != "codex" for version in versions]


@pytest.fixture(params=OLDER, ids=[f"{cli}-{version}" for cli, version in OLDER])
def older(request: pytest.FixtureRequest) -> tuple[str, str, Path]:
    """An older release: its CLI, its version, its bin folder (missing: a failure, never a skip)."""
    cli, version = request.param
    return cli, version, old_cli_bin_dir(cli, version)


def recorded_release(tmp_path: Path) -> dict[str, object]:
    return dict(state(tmp_path / "ws")["cli_release"])


def test_workflow_delivered_and_a_loop_exit_gets_a_continue_prompt(older, tmp_path):
    cli, version, bin_dir = older
    workflow_loop_exit_and_continue(cli, tmp_path, bin_dir)
    release = recorded_release(tmp_path)
    assert release["version"] == version and release["standing"] == "older, supported", release
    starts = [e for e in events(tmp_path / "ws") if e["event"] == "start"]
    assert starts and all(e["release"] == version for e in starts)


def test_a_killed_cli_is_restarted_with_its_native_resume(older, tmp_path):
    cli, version, bin_dir = older
    killed_cli_resumes_natively(cli, tmp_path, bin_dir)
    assert recorded_release(tmp_path)["version"] == version


@pytest.mark.parametrize("version", OLD_RELEASES["codex"])
def test_older_codex_workflow_loop_and_continue_prompt(version, tmp_path):
    """codex's previous pin: the same scenario as the pinned one (tests/e2e/test_agent_codex.py)."""
    bin_dir = old_cli_bin_dir("codex", version)
    workflow_loop_and_continue_through_codex(tmp_path, bin_dir)
    assert state(tmp_path / "ws")["argv"][0] == str(bin_dir / "codex")


@pytest.mark.parametrize("version", OLD_RELEASES["codex"])
def test_older_codex_killed_is_restarted_with_its_own_resume(version, tmp_path):
    bin_dir = old_cli_bin_dir("codex", version)
    killed_codex_resumes_natively(tmp_path, bin_dir)
    assert state(tmp_path / "ws")["argv"][0] == str(bin_dir / "codex")


@pytest.mark.parametrize(("cli", "version"), sorted(TOO_OLD.items()))
def test_a_release_too_old_to_drive_stops_at_once_with_one_line(cli, version, tmp_path):
    ws = workspace_for(tmp_path)
    with FakeModel([], default=Text("OK")) as model:
        env = cli_env(cli, tmp_path / "home", ws, model.url, bin_dir=old_cli_bin_dir(cli, version))
        started = time.monotonic()
        done = subprocess.run(
            [WAAAH, "agent", f"--start={cli}", "--no-mcp"],
            cwd=ws,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"waaah: {cli} {version} is too old for waaah (it has no --resume): the oldest supported is "
        f"{OLD_RELEASES[cli][-1]}; update it: {INSTALL_GEMINI}"
    ]
    assert model.main_requests() == []  # the CLI never started: nothing asked, nothing restarted
    assert not (ws / ".waaah" / "sessions").exists()
    assert took < 60, took


@pytest.mark.parametrize(
    ("version", "status", "standing"),
    [
        ("0.51.0", "ok", "older, supported"),
        ("0.34.0", "ok", "older, supported"),
        ("0.13.0", "fail", "too old"),
    ],
)
def test_doctor_says_where_the_installed_release_stands(version, status, standing, tmp_path):
    ws = workspace_for(tmp_path)
    env = {
        "HOME": str(tmp_path / "home"),
        "PATH": f"{old_cli_bin_dir('gemini', version)}:/usr/local/bin:/usr/bin:/bin",
        "GEMINI_API_KEY": "k",
    }
    done = subprocess.run(
        [WAAAH, "doctor", "--json", "--agent", "gemini"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    check = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "gemini CLI")
    assert (check["status"], check["version"], check["standing"]) == (status, version, standing), check
    assert "the oldest supported is 0.34.0" in check["detail"]
    if status == "fail":
        assert check["fix"] == f"update it: {INSTALL_GEMINI}"
        assert done.returncode == 1
