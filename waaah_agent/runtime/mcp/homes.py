"""The per-run homes of this user (runtime/cli_home.py): which a supervisor holds, which were left.

A supervisor holds a lock on its run's home (``flock`` on the folder) for as long as it lives;
the kernel drops it when that process ends, however it ends (SIGKILL included). So a home whose
lock can be taken was left behind: by a supervisor killed before it could carry back what the
CLI wrote there, or kept at the end because something could not be carried. Any later start
settles the first kind (cli_home.PerRunHome.settle_leftovers); `waaah status` and `waaah doctor`
name what is still there, with the command that settles it (`waaah mcp settle`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from waaah_agent import settings
from waaah_agent.core.nesting import loads_json
from waaah_agent.safe_read import read_capped

MANIFEST = "waaah-home.json"
#: What settles a home left behind (cli_mcp.py).
SETTLE_COMMAND = "waaah mcp settle"
_MANIFEST_CAP = 4 * 1024 * 1024

#: The homes this process holds: path -> the descriptor its lock is on.
_HELD: dict[str, int] = {}


def homes_root(env: Mapping[str, str]) -> Path:
    """Where run homes live: the user's state folder, never inside a workspace."""
    return settings.user_folder(env, "state") / "waaah-agent" / "homes"


def _open(home: Path) -> int:
    return os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))


def hold(home: Path) -> None:
    """Hold ``home`` for this process's lifetime (or until :func:`release`). Waits while another
    start settles it; the CLI never inherits the descriptor."""
    release(home)
    fd = _open(home)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        raise
    _HELD[str(home)] = fd


def release(home: Path) -> None:
    fd = _HELD.pop(str(home), None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def claim(home: Path) -> int | None:
    """A descriptor holding ``home`` when nobody else does (the caller closes it), else None."""
    try:
        fd = _open(home)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def in_use(home: Path) -> bool:
    """A live supervisor (or a start settling it) holds ``home``."""
    if str(home) in _HELD:
        return True
    try:
        fd = _open(home)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


@dataclass(frozen=True)
class Leftover:
    """A home nobody holds."""

    path: Path
    session: str  # the session it was made for
    workspace: str
    owned: bool  # its manifest names the supervisor that made it (made by this release or later)
    kept: str  # why it was kept at the end, if it was


def manifest(home: Path) -> dict[str, object] | None:
    try:
        data = loads_json(read_capped(home / MANIFEST, _MANIFEST_CAP))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def leftovers(env: Mapping[str, str]) -> list[Leftover]:
    """Every home of this user that no live supervisor holds, oldest first."""
    root = homes_root(env)
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    found = []
    for name in names:
        path = root / name
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode) or in_use(path):
                continue
        except OSError:
            continue
        data = manifest(path) or {}
        found.append(
            Leftover(
                path,
                str(data.get("session") or name.split(".", 1)[0]),
                str(data.get("workspace") or ""),
                isinstance(data.get("owner"), dict),
                str(data.get("kept") or ""),
            )
        )
    return found


def describe(left: Leftover) -> str:
    why = left.kept or "its supervisor ended before carrying back what the CLI wrote there"
    return f"{left.path} (session {left.session}): {why}"
