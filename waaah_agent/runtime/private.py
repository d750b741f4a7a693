"""``.waaah/`` is private to the user and never committed: folders 0700, files 0600, its own .gitignore.

An agent's routine ``git add -A`` must not pick up logs, session state or run logs, and other
users on the machine must not read them: they hold the night's whole screen.

Nor may anyone else's file steer the agent: in a workspace shared with other users, a
``.waaah/`` someone else made (or one anyone can write) could hold a session planted to be
resumed with their arguments and their queued prompts. State is trusted only when this user
owns it and no one else can write it (:func:`untrusted`); otherwise one line names the fix and
nothing of it is used. Nor is ``.waaah/`` (or one of its folders) that is a symlink
(:func:`linked`): a repository can commit ``.waaah -> ../elsewhere``, and following it would
tighten and write into a folder the user never chose.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import IO

from waaah_agent.errors import UsageError

ROOT = ".waaah"
GITIGNORE = "# Written by waaah: nothing in this folder belongs in git.\n*\n"


class LinkedFolder(OSError):
    """``.waaah/`` or a folder in it is a symlink: never followed (written through, tightened)."""

    def __init__(self, path: Path, target: str) -> None:
        super().__init__(errno.ELOOP, f"is a symlink to {target}, which waaah does not follow", str(path))


def linked(path: Path) -> str | None:
    """One line when ``path`` (``.waaah/`` or one of its folders) is a symlink: its target and
    the fix; None when it is not one (or not there)."""
    target = _link_target(path)
    if target is None:
        return None
    return (
        f"{path} is a symlink to {target}, so nothing is read from it or written through it "
        f"(waaah keeps its state in a folder of its own); remove the link (rm {path})"
    )


def _link_target(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except (OSError, ValueError):  # not a symlink (EINVAL), not there
        return None


def private_dir(path: Path) -> Path:
    """Create ``path`` (under a ``.waaah`` folder) and its parents 0700; the root gets its .gitignore.
    :class:`LinkedFolder` when the root or a folder under it is a symlink (nothing is created)."""
    root = next((p for p in (path, *path.parents) if p.name == ROOT), None)
    if root is not None:
        for folder in (root, *reversed([p for p in (path, *path.parents) if root in p.parents])):
            if (target := _link_target(folder)) is not None:
                raise LinkedFolder(folder, target)
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


def private_folder(path: Path) -> Path:
    """A folder of ours outside a workspace (``~/.config/waaah-agent/services``): created 0700,
    its parents too, and made 0700 where it is not (an earlier waaah's, a plain ``mkdir -p``).
    A symlink in its place is left as it is: where the user keeps it, and its mode, are theirs."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(path)
    return path


#: The folders of ``.waaah/`` that hold state a command reads back.
STATE_FOLDERS = ("sessions", "locks", "logs", "runs")


def untrusted(path: Path, *, root_too: bool = False) -> str | None:
    """Why ``path`` must not be trusted (someone else owns it, or someone else can write it), as
    one line with the fix; None when it is this user's alone, or not there. A symlink is
    judged with what it points to. ``root_too``: a file root owns is trusted as well (one that is
    only read: a system's, or a dotfile manager's such as home-manager's /nix/store; root could
    change anything of this user's anyway)."""
    try:
        link = os.lstat(path)
        info = os.stat(path) if stat.S_ISLNK(link.st_mode) else link
    except (FileNotFoundError, NotADirectoryError):
        return None  # not there: what needs it says so
    except OSError as err:
        return f"{path} cannot be checked ({err.strerror}); fix it or move it aside"
    trusted = {os.geteuid(), 0} if root_too else {os.geteuid()}
    for owner in (link.st_uid, info.st_uid):
        if owner not in trusted:
            return (
                f"{path} belongs to another user (uid {owner}), so nothing in it is used; "
                f"move it aside (mv {path} {path}.untrusted) or ask its owner to remove it"
            )
    if info.st_mode & 0o022 and not _read_only(path):
        return (
            f"{path} can be written by others (mode {stat.S_IMODE(info.st_mode):o}), so nothing in it "
            f"is used; check what is in it, then: chmod go-w {path}"
        )
    return None


def _read_only(path: Path) -> bool:
    """On a file system mounted read-only, where nobody can write whatever its mode says."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_state(waaah_dir: Path) -> None:
    """Refuse (one line, exit 2) a ``.waaah/`` or one of its state folders that is a symlink or
    is not this user's alone."""
    for path in (waaah_dir, *(waaah_dir / name for name in STATE_FOLDERS)):
        if why := linked(path) or untrusted(path):
            raise UsageError(why)


def trusted_session(state_file: Path) -> bool:
    """A session's ``session.json``, its folder, ``sessions/`` and ``.waaah/``: all this user's alone."""
    folder = state_file.parent
    return not any(untrusted(p) for p in (folder.parent.parent, folder.parent, folder, state_file))


def open_append(path: Path) -> IO[str]:
    """``path`` opened for appending text, created 0600 (never readable by others)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8")


def _tighten(folder: Path) -> None:
    """``folder`` 0700 where others may use it; never through a symlink (opened with O_NOFOLLOW:
    a link is left as it is, and so is what it points to)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
