"""``.waaah/`` is private to the user and never committed: folders 0700, files 0600, its own .gitignore.

An agent's routine ``git add -A`` must not pick up logs, session state or run logs, and other
users on the machine must not read them: they hold the night's whole screen.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

ROOT = ".waaah"
GITIGNORE = "# Written by waaah: nothing in this folder belongs in git.\n*\n"


def private_dir(path: Path) -> Path:
    """Create ``path`` (under a ``.waaah`` folder) and its parents 0700; the root gets its .gitignore."""
    root = next((p for p in (path, *path.parents) if p.name == ROOT), None)
    if root is not None:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        _tighten(root)
        ignore = root / ".gitignore"
        if not ignore.exists():  # best effort: a full or read-only disk is reported by the real write
            with contextlib.suppress(OSError):
                fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(GITIGNORE)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if root is not None:
        for folder in (path, *path.parents):
            if folder == root:
                break
            _tighten(folder)
    return path


def open_append(path: Path) -> IO[str]:
    """``path`` opened for appending text, created 0600 (never readable by others)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8")


def _tighten(folder: Path) -> None:
    with contextlib.suppress(OSError):
        if folder.stat().st_mode & 0o077:
            folder.chmod(0o700)
