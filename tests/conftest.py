"""Shared fixtures: guards every test the way PTY suites need (no leaked children)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _default_signal_dispositions():
    """CI runners can start us with SIGHUP/SIGINT ignored; children would inherit that."""
    saved = {s: signal.signal(s, signal.SIG_DFL) for s in (signal.SIGHUP, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    """A fresh git repository to run the agent in."""
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


@pytest.fixture()
def ws(workspace: Path) -> Path:
    """The same fresh git repository, by the short name the `waaah run` tests use."""
    return workspace


@pytest.fixture()
def fake_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
