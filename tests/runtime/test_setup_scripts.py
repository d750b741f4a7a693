"""The set-up scripts `make` runs, on machines that lack what they need: one clear reason and a
non-zero exit, never a success line over nothing installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pexpect

REPO = Path(__file__).resolve().parents[2]
TOOLS = ("bash", "env", "id", "date", "head")


def bare_path(tmp_path: Path) -> str:
    """A PATH with the shell's few tools and no apt-get, chromium or sudo."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (folder / tool).symlink_to(found)
    return str(folder)


def test_install_browser_without_apt_get_fails_with_the_reason(tmp_path):
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "install_browser.sh")],
        env={"PATH": bare_path(tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.strip() == (
        "install_browser: chromium is missing and this system has no apt-get (not Debian or "
        "Ubuntu): install Chromium with your own package manager, so that 'chromium' is on PATH"
    )
    assert "installing" not in done.stdout and "command not found" not in done.stderr


def test_install_browser_with_chromium_present_does_nothing(tmp_path):
    path = bare_path(tmp_path)
    chromium = Path(path) / "chromium"
    chromium.write_text("#!/bin/sh\necho 'Chromium 1.0'\n")
    chromium.chmod(0o755)
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "install_browser.sh")],
        env={"PATH": path, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert os.access(chromium, os.X_OK)


def test_make_demo_says_on_its_screen_what_to_try(tmp_path):
    """`make demo` starts the simulated agent with SIM_DEMO=1; its screen then names what to try
    (read from the screen as drawn, through the real PTY and the supervisor's relay)."""
    from tests.runtime.helpers import sim_env, spawn_waaah
    from waaah_agent.core.supervise.screen import Screen

    dry = subprocess.run(["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert "SIM_DEMO=1" in dry.stdout and "/crash 1, /limit try again in 2 minutes" in dry.stdout, dry.stdout
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    child = spawn_waaah(ws, "--start=simulated", "--no-mcp", env=sim_env(tmp_path, SIM_DEMO="1"))
    child.expect("waaah's menu")
    screen = Screen(120, 40)
    screen.feed(child.before + child.after)
    shown = screen.view().text()
    for hint in ("/crash 1", "/limit try again in 2 minutes", "/quit", "Ctrl+C"):
        assert hint in shown, shown
    child.send("\x03")
    child.expect("save and exit")
    child.send("s")
    child.expect(pexpect.EOF, timeout=30)
