"""Driving the real `waaah` command through a real PTY, as a user would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect

WAAAH = str(Path(sys.executable).parent / "waaah")
ROWS, COLS = 40, 120


def sim_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAAAH_", "SIM_"))}
    env.update(HOME=str(home), SIM_BUSY_SECONDS="0.5", SIM_STARTUP_SECONDS="0.2", **extra)
    return env


def spawn_waaah(
    ws: Path, *args: str, env: dict[str, str], timeout: float = 20, **spawn: Any
) -> pexpect.spawn:
    child = pexpect.spawn(
        WAAAH, ["agent", *args], cwd=str(ws), env=env, dimensions=(ROWS, COLS), timeout=timeout, **spawn
    )
    child.delaybeforesend = None  # pexpect sleeps 50 ms before every send otherwise
    return child


def retry_until(check: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    return _until(check, timeout, lambda: time.sleep(interval))


def _until(check: Callable[[], Any], timeout: float, between: Callable[[], None]) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {check}")
        between()


def session_dirs(ws: Path) -> list[Path]:
    return sorted((ws / ".waaah" / "sessions").glob("*/"))


def state(ws: Path, index: int = -1) -> dict[str, Any]:
    """The session.json of a session (must parse: atomic writes mean never half a file)."""
    path = session_dirs(ws)[index] / "session.json"
    return json.loads(path.read_text())


def state_or_none(ws: Path) -> dict[str, Any] | None:
    """The newest session.json, or None while the first session is still being created."""
    dirs = session_dirs(ws)
    path = dirs[-1] / "session.json" if dirs else None
    return json.loads(path.read_text()) if path and path.exists() else None


def events(ws: Path, index: int = -1) -> list[dict[str, Any]]:
    """The session's events so far: a line still being appended (a reader can see the first part
    of a write that crosses a page) is not one yet."""
    path = session_dirs(ws)[index] / "events.jsonl"
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def sim_messages(ws: Path, native_id: str, role: str = "user") -> list[str]:
    path = ws / ".waaah" / "simulated" / f"{native_id}.jsonl"
    if not path.exists():
        return []
    return [m["text"] for m in map(json.loads, path.read_text().splitlines()) if m["role"] == role]


def delivered(ws: Path) -> bool:
    return any(e["event"] == "delivery" and e["phase"] == "confirmed" for e in events(ws))


def cast_size(ws: Path) -> int:
    """Bytes in the newest session's .cast on disk (0 before it exists)."""
    st = state_or_none(ws)
    path = Path(st["cast_path"]) if st and st.get("cast_path") else None
    return path.stat().st_size if path and path.exists() else 0


def unchanged_for(value: Callable[[], Any], seconds: float) -> Callable[[], bool]:
    """A check for :func:`retry_until`: true once ``value()`` has kept one value for ``seconds``.

    E.g. the .cast stops growing: the supervisor no longer takes the agent's output.
    """
    seen: list[Any] = [object(), 0.0]

    def check() -> bool:
        now, current = time.monotonic(), value()
        if current != seen[0]:
            seen[0], seen[1] = current, now
            return False
        return now - seen[1] >= seconds

    return check


def typed(child: pexpect.spawn, text: str, enter_delay: float = 0.3) -> None:
    """Type like a person: the keys, a pause, then Enter on its own."""
    child.send(text)
    time.sleep(enter_delay)
    child.send("\r")


def pump_until(child: pexpect.spawn, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Like retry_until, but keeps reading the terminal meanwhile, as a real terminal does.

    A terminal nobody reads fills up and, through the supervisor's back-pressure, pauses the
    agent; a test waiting on something else must go on reading.
    """

    def read_a_little() -> None:
        try:
            data = child.read_nonblocking(65536, timeout=0.1)
        except pexpect.TIMEOUT:
            return
        except pexpect.EOF as err:  # the command under test ended: say what it showed last
            raise pexpect.EOF(f"the terminal closed; its last lines: {last_lines(child)!r}") from err
        child.pumped_tail = (getattr(child, "pumped_tail", b"") + data)[-TAIL:]

    return _until(check, timeout, read_a_little)


TAIL = 4000
_SEQUENCE = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def last_lines(child: pexpect.spawn, lines: int = 12) -> list[str]:
    """The last lines a test read from ``child`` through :func:`pump_until`, escapes removed."""
    text = _SEQUENCE.sub(b"", getattr(child, "pumped_tail", b"")).decode("utf-8", "replace")
    return [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()][-lines:]


def pump_for(child: pexpect.spawn, seconds: float) -> None:
    """Let ``seconds`` pass while reading the terminal.

    Only for checks that nothing happens during a stretch of time (the stretch is what is
    tested); to let something happen, wait for it with :func:`pump_until` or :func:`retry_until`.
    """
    deadline = time.monotonic() + seconds
    pump_until(child, lambda: time.monotonic() >= deadline, seconds + 1)


# -- `waaah service`: what systemd would read -----------------------------------------------------
def instance_environment(env_file: Path) -> dict[str, str]:
    """The variables an environment file sets, read by a POSIX shell (systemd.exec(5)'s rule)."""
    out = subprocess.run(
        ["sh", "-c", 'set -a; . "$1"; exec env -0', "sh", str(env_file)],
        env={},
        capture_output=True,
        check=True,
    ).stdout.decode()
    return dict(item.split("=", 1) for item in out.split("\0") if item.startswith("WAAAH_"))


def verify(template: Path, instance: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """systemd's own reading of an instance of the template (the user manager's view); `make test`
    installs systemd-analyze (scripts/install_systemd_tools.sh)."""
    # A short folder: the user's socket units put their addresses under it, and a socket's path
    # may hold at most 107 bytes (a deep pytest folder does not fit).
    with tempfile.TemporaryDirectory(prefix="xr", dir="/tmp") as runtime:
        os.chmod(runtime, 0o700)
        return subprocess.run(
            ["systemd-analyze", "verify", "--user", str(template.parent / f"waaah@{instance}.service")],
            env={**os.environ, "XDG_RUNTIME_DIR": runtime},
            capture_output=True,
            text=True,
        )
