"""A CLI's settings for one run, laid over the user's own, and what to carry back afterwards.

A CLI that reads MCP servers only from its user settings, in a folder under a home a variable
moves (its adapter's ``HomePerRun``: the variable, the folder), gets a home of its own per run:
its folder links every entry of the user's, except ``settings.json``, which is the user's
settings with this run's keys laid over them (:func:`overlay`). The CLI may write some files by
renaming a new one over the old name: that replaces our link with a file, and a file it
creates lands in the run's home only. After each run, :func:`settle` says what to carry back,
so the user's folder ends as the CLI alone would have left it, without our keys. A folder the
CLI made is carried entry by entry (:data:`Action.DESCEND`): two runs that each made ``tmp/`` both
have their conversations carried into the user's one. What cannot be carried (both sides changed
a file that is not JSON) stays in the run's home, which is then kept, never removed.

Pure: documents and descriptions in, documents and decisions out. runtime/cli_home.py does the
file work.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: The settings file laid over the user's.
SETTINGS = "settings.json"

#: The keys a run sets, as paths into the settings document; never carried back.
Path = tuple[str, ...]


@dataclass(frozen=True)
class Change:
    """One key the CLI set (``value``) or removed (``removed``) in the run's settings."""

    path: Path
    value: Any = None
    removed: bool = False


def overlay(user: dict[str, Any], run_keys: dict[Path, Any]) -> dict[str, Any]:
    """The user's settings with this run's keys set; every other key kept as it was.

    A key on the way that holds something other than an object (a user's ``"model": "x"``)
    is replaced by an object: the run's key must be where the CLI reads it."""
    merged = copy.deepcopy(user)
    for path, value in run_keys.items():
        node = merged
        for name in path[:-1]:
            if not isinstance(node.get(name), dict):
                node[name] = {}
            node = node[name]
        node[path[-1]] = copy.deepcopy(value)
    return merged


def changes(before: dict[str, Any], after: dict[str, Any], run_keys: Iterable[Path]) -> list[Change]:
    """What differs from ``before`` in ``after``, leaf by leaf, except under the run's keys."""
    skip = tuple(run_keys)
    found: list[Change] = []

    def walk(path: Path, old: Any, new: Any) -> None:
        if any(path[: len(k)] == k for k in skip):
            return
        if isinstance(old, dict) and isinstance(new, dict):
            for name in [*old, *(n for n in new if n not in old)]:
                if name not in new:
                    if not any((*path, name)[: len(k)] == k for k in skip):
                        found.append(Change((*path, name), removed=True))
                else:
                    walk((*path, name), old.get(name, _MISSING), new[name])
            return
        if old is _MISSING or old != new:
            found.append(Change(path, copy.deepcopy(new)))

    walk((), before, after)
    return found


def apply(document: dict[str, Any], found: Iterable[Change]) -> dict[str, Any]:
    """``document`` with the changes made (a removed key that is not there is no change)."""
    result = copy.deepcopy(document)
    for change in found:
        if not change.path:
            continue
        node = result
        for name in change.path[:-1]:
            if not isinstance(node.get(name), dict):
                if change.removed:
                    break
                node[name] = {}
            node = node[name]
        else:
            if change.removed:
                node.pop(change.path[-1], None)
            else:
                node[change.path[-1]] = copy.deepcopy(change.value)
    return result


def merge_state(theirs: Any, ours: Any) -> Any:
    """A state file the CLI rewrote during the run, merged into the user's current one: objects
    key by key (``projects.json`` keeps the projects another run added meanwhile), lists as
    the user's items then the run's that are not among them (``logs.json`` keeps the prompts of
    both), the run's value wherever both hold one."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        merged = copy.deepcopy(theirs)
        for name, value in ours.items():
            merged[name] = merge_state(theirs.get(name, _MISSING), value)
        return merged
    if isinstance(theirs, list) and isinstance(ours, list):
        return copy.deepcopy(theirs) + [copy.deepcopy(item) for item in ours if item not in theirs]
    return copy.deepcopy(ours)


def holds(whole: Any, part: Any) -> bool:
    """Everything of ``part`` is in ``whole``: what a merge must leave in the user's file before
    the run's copy may go (each key holding what it holds, each list item among the items)."""
    if isinstance(whole, dict) and isinstance(part, dict):
        return all(name in whole and holds(whole[name], value) for name, value in part.items())
    if isinstance(whole, list) and isinstance(part, list):
        return all(item in whole for item in part)
    return bool(whole == part)


class Kind(enum.Enum):
    MISSING = "missing"
    LINK = "link"  # a symlink (in the run's home: ours, to the user's entry)
    FILE = "file"
    DIR = "dir"
    OTHER = "other"  # a FIFO, a socket, a device


class Action(enum.Enum):
    KEEP = "keep"  # nothing to do
    MOVE = "move"  # the user has none: copy the run's file there (checked), link it back
    DESCEND = "descend"  # a folder the run made: carry each of its entries, then link it back
    MERGE = "merge"  # both are JSON files: merge_state(theirs, ours) into the user's, link back
    REPLACE = "replace"  # the user's file is as it was when the run began: the run's replaces it
    LEAVE = "leave"  # both changed and cannot be merged: the user's stays, the run's is dropped


def settle(name: str, in_run: Kind, in_user: Kind, user_unchanged: bool, both_json: bool) -> Action:
    """What to do with one entry of the run's CLI folder once the run is over (``name``: its path
    in that folder; only the top ``settings.json`` is the run's own).

    ``user_unchanged``: the user's entry is byte for byte what it was when the run's home was
    made (a rename of the CLI's replaced our link to it). ``both_json``: both are files holding
    a JSON object."""
    if name == SETTINGS or in_run in (Kind.MISSING, Kind.LINK, Kind.OTHER):
        return Action.KEEP
    if in_run == Kind.DIR and in_user in (Kind.MISSING, Kind.DIR):
        return Action.DESCEND
    if in_user == Kind.MISSING:
        return Action.MOVE
    if in_run == Kind.FILE and in_user == Kind.FILE:
        if both_json:
            return Action.MERGE
        return Action.REPLACE if user_unchanged else Action.LEAVE
    return Action.LEAVE


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()
