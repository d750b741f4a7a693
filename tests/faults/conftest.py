"""The fault suite: what the world does to a night-long supervisor, through the real `waaah` command.

Each test drives `waaah` as a user would (a simulated agent or a scripted fake CLI, a throwaway
HOME and workspace) and feeds it one kind of trouble: a secret in the output, a kill at the worst
moment, a file of the wrong shape, a full disk, a process that will not die. It asserts what a
trustworthy tool must do: nothing lost, nothing leaked, one clear line, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

WAAAH = str(Path(sys.executable).parent / "waaah")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The user's environment minus ours: a throwaway HOME, no WAAAH_* or SIM_* leftovers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAAAH_", "SIM_"))}
    env.update(HOME=str(home), SIM_BUSY_SECONDS="0.5", SIM_STARTUP_SECONDS="0.2", **extra)
    return env


def run_waaah(*args: str, cwd: Path, env: dict[str, str], timeout: float = 60, stdin: str | None = None):
    """`waaah ARGS` headless (no terminal), as from a script or nohup."""
    return subprocess.run(
        [WAAAH, *args],
        cwd=cwd,
        env=env,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and "Exception ignored" not in text, text[-2000:]


@contextlib.contextmanager
def small_disk(where: Path, size: str = "1m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (a full disk on demand); skipped where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size={size},mode=0755",
            f"waaah-fault-{uuid.uuid4().hex[:6]}",
            str(where),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or done.returncode}): needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path
