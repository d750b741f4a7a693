"""The locks: a session's (``.waaah/sessions/<id>/lock``, held by its supervisor) and an agent's
(``.waaah/locks/<agent id>.lock``, one supervisor per agent, workflow and workspace).

Each is an exclusive ``flock`` the kernel drops when its holder dies, even by SIGKILL. A lock
file is opened only as a regular file, never through a symlink and never waiting on a FIFO
(safe_read.open_writable, open_regular): whatever else stands there is one clear line.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

from waaah_agent.runtime.private import private_dir
from waaah_agent.safe_read import UnsafeFile, open_regular, open_writable, read_capped

log = logging.getLogger(__name__)

_SAID: set[str] = set()  # the locks already said to be no lock: once per command


def is_live(folder: Path) -> bool:
    """True while a supervisor holds the lock (the kernel drops it when that process dies). A
    FIFO, a folder or a symlink in its place is never waited on nor followed: one line says so,
    and the session is not live (no supervisor takes such a lock)."""
    path = folder / "lock"
    try:
        fd = open_regular(path, follow=False)
    except UnsafeFile as err:
        if str(path) not in _SAID:
            _SAID.add(str(path))
            log.warning(
                "%s %s: no supervisor holds it; move it aside (mv %s %s.bak)", path, err.reason, path, path
            )
        return False
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class Claim:
    """One supervisor per agent id (agent, workflow, workspace): an exclusive ``flock`` on
    ``.waaah/locks/<agent id>.lock``, held while the supervisor lives, holding its pid and session."""

    def __init__(self, folder: Path, agent_id: str) -> None:
        self.path = folder / f"{agent_id}.lock"
        self._fd: int | None = None

    def take(self) -> str | None:
        """Take it; None when done, else what the holder wrote (its pid and session)."""
        private_dir(self.path.parent)
        fd = open_writable(self.path, os.O_RDWR | os.O_CREAT)  # never a FIFO's wait, nor a link
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            try:
                return read_capped(self.path, 256, follow=False).decode("utf-8", "replace").strip() or "?"
            except OSError:
                return "?"
        self._fd = fd
        self.note("")
        return None

    def note(self, session_id: str) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, f"pid {os.getpid()} session {session_id}\n".encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
