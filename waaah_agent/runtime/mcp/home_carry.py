"""Carrying what a CLI wrote in its run's home back to the user's folder, checked by content.

core/home_overlay.py decides what each entry of the run's folder needs; this module does it. A
file goes over as a copy beside its place, compared by SHA-256 with the run's before it takes
that place (a short write or a full disk is caught there, never later); a merged JSON file is
read back and must hold all of the run's. Only then is the run's entry replaced by a link to
the user's. A folder the run made is carried entry by entry. :func:`uncarried` lists what is
still the run's own: a home holding any of it is kept, never removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from waaah_agent.core import home_overlay
from waaah_agent.core.home_overlay import Action, Kind
from waaah_agent.core.nesting import loads_json
from waaah_agent.runtime.store import atomic_write
from waaah_agent.safe_read import UnsafeFile, open_regular, read_capped

#: Files larger than this are not compared or merged as JSON, only carried whole.
STATE_FILE_CAP = 4 * 1024 * 1024
CHUNK = 1024 * 1024


class NotCarried(OSError):
    """A copy or a merge that did not leave the run's content in the user's file."""


def carry(ours: Path, theirs: Path, rel: str, snapshot: Mapping[str, str]) -> list[str]:
    """Carry the run's entry ``ours`` (``rel`` in its folder) to the user's ``theirs``; notes
    for what stays in the run's home. ``snapshot``: digests of the user's files at the start."""
    in_run, in_user = kind(ours, follow=False), kind(theirs, follow=True)
    both = None
    if in_run == Kind.FILE and in_user == Kind.FILE:
        mine, other = json_value(ours), json_value(theirs)
        both = (other, mine) if mine is not None and other is not None else None
    snap = snapshot.get(rel)
    unchanged = snap is not None and in_user == Kind.FILE and digest(theirs, follow=True) == snap
    action = home_overlay.settle(rel, in_run, in_user, unchanged, both is not None)
    target = Path(os.path.realpath(theirs))
    if action == Action.DESCEND:
        return _descend(ours, theirs, target, rel, snapshot, in_user)
    if action == Action.MOVE:
        private_folder(target.parent)
        place(ours, target)
    elif action == Action.MERGE and both is not None:
        merged = home_overlay.merge_state(*both)
        atomic_write(target, json.dumps(merged, indent=2) + "\n", mode_of(target))
        if not home_overlay.holds(json_value(target), both[1]):
            raise NotCarried(f"{target} does not hold this run's {rel} after the merge")
    elif action == Action.REPLACE:
        place(ours, target, exclusive=False)
    elif action == Action.LEAVE:
        return [f"kept your {theirs}: this run's own {rel} differed and is left in {ours.parent}"]
    else:
        return []
    ours.unlink()
    os.symlink(theirs, ours)
    return []


def _descend(
    ours: Path, theirs: Path, target: Path, rel: str, snapshot: Mapping[str, str], in_user: Kind
) -> list[str]:
    if in_user == Kind.MISSING:
        private_folder(target.parent)
        target.mkdir(mode=stat.S_IMODE(os.lstat(ours).st_mode) | 0o700)
    notes: list[str] = []
    for name in sorted(os.listdir(ours)):
        try:
            notes += carry(ours / name, target / name, f"{rel}/{name}", snapshot)
        except OSError as err:
            notes.append(f"could not carry {rel}/{name} back to {target} ({err.strerror or err})")
    if not uncarried(ours):
        remove(ours)
        os.symlink(theirs, ours)
    return notes


def place(source: Path, target: Path, exclusive: bool = True) -> None:
    """``target`` becomes a copy of ``source``, whole or not at all: written beside it, compared
    by content, then renamed (``exclusive``: never over a file that appeared meanwhile)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.waaah-tmp")
    try:
        shutil.copyfile(source, tmp, follow_symlinks=False)
        os.chmod(tmp, stat.S_IMODE(os.lstat(source).st_mode) if exclusive else mode_of(target))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        if digest(tmp) != digest(source) or not digest(source):
            raise NotCarried(f"the copy of {source} in {target.parent} differs from it")
        if exclusive:
            os.link(tmp, target)  # FileExistsError when another run placed one meanwhile
            tmp.unlink()
        else:
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def uncarried(folder: Path) -> list[str]:
    """The run's own files under ``folder`` (links are ours: to the user's entries), as paths
    relative to it; a FIFO or a socket holds nothing to carry."""
    found: list[str] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return found
    for name in names:
        path = folder / name
        kind_of = kind(path, follow=False)
        if kind_of == Kind.FILE:
            found.append(name)
        elif kind_of == Kind.DIR:
            found += [f"{name}/{rel}" for rel in uncarried(path)]
    return found


def link_all(user: Path, folder: Path, skip: str) -> dict[str, str]:
    """Link every entry of the user's folder but ``skip``; the digests of its small files."""
    snapshot: dict[str, str] = {}
    try:
        names = sorted(os.listdir(user))
    except FileNotFoundError:
        return snapshot
    for name in names:
        if name == skip:
            continue
        os.symlink(user / name, folder / name)
        if kind(user / name, follow=True) == Kind.FILE and (
            found := digest(user / name, STATE_FILE_CAP, True)
        ):
            snapshot[name] = found
    return snapshot


def kind(path: Path, follow: bool) -> Kind:
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return Kind.MISSING
    if stat.S_ISLNK(info.st_mode):
        return Kind.LINK
    if stat.S_ISREG(info.st_mode):
        return Kind.FILE
    return Kind.DIR if stat.S_ISDIR(info.st_mode) else Kind.OTHER


def digest(path: Path, cap: int | None = None, follow: bool = False) -> str:
    """SHA-256 of the regular file ``path`` read to its end ("" for anything else, or past ``cap``)."""
    try:
        fd = open_regular(path, follow=follow)
    except OSError:
        return ""
    sha, size = hashlib.sha256(), 0
    try:
        while chunk := os.read(fd, CHUNK):
            size += len(chunk)
            if cap is not None and size > cap:
                return ""
            sha.update(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return sha.hexdigest()


def json_value(path: Path) -> Any:
    """The JSON object or list in a small regular file, else None."""
    try:
        data = loads_json(read_capped(path, STATE_FILE_CAP))
    except (OSError, UnsafeFile, ValueError, RecursionError):
        return None
    return data if isinstance(data, (dict, list)) else None


def mode_of(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o600


def private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def remove(path: Path) -> None:
    """Remove a run's home or one of its folders: links are unlinked, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
