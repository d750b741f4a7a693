"""A home of its own for each supervised run of a CLI that has no per-run settings file it trusts.

gemini reads MCP servers and settings from ``$GEMINI_CLI_HOME/.gemini/settings.json``. Its
per-run settings file (``GEMINI_CLI_SYSTEM_SETTINGS_PATH``) is skipped unless root owns it and
every folder above it, so a user cannot use it. Instead a run gets a home in the user's state
folder (``$XDG_STATE_HOME/waaah-agent/homes/<session>``, 0700): its ``.gemini`` links every
entry of the user's ``.gemini`` (sessions, credentials, trusted folders, history: all the
user's), and its ``settings.json`` is the user's settings with this run's keys over them (the
waaah MCP server, loop detection off). The user's ``settings.json`` is never written for it.

After each run of the CLI, :meth:`PerRunHome.settle` carries back what gemini itself changed:
files it created or renamed over our links (``projects.json``, an OAuth token) and settings it
changed (a login method chosen at its first start), so the user's folder ends as gemini alone
would have left it (core/home_overlay.py decides). A supervisor killed before that leaves the
home behind; the next start of the same session settles it first. At the end it is removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent import settings
from waaah_agent.core import home_overlay, mcpconf
from waaah_agent.core.home_overlay import SETTINGS, Action, Kind
from waaah_agent.runtime.mcp_setup import (
    PROXY_COMMAND,
    ConfigRefused,
    Finding,
    Given,
    Persistent,
    ServerChoice,
    read_config,
    read_json,
    rewrite_config,
)
from waaah_agent.runtime.safe_read import UnsafeFile, read_capped
from waaah_agent.runtime.store import atomic_write

MANIFEST = "waaah-home.json"
#: Files larger than this are not compared or merged, only moved (a state file is small).
STATE_FILE_CAP = 4 * 1024 * 1024


def homes_root(env: Mapping[str, str]) -> Path:
    """Where run homes live: the user's state folder, never inside a workspace."""
    return settings.user_folder(env, "state") / "waaah-agent" / "homes"


@dataclass(frozen=True)
class PerRunHome:
    """How a CLI is given the waaah MCP server and its run settings through a home per run."""

    #: The variable that moves the CLI's home (gemini: ``GEMINI_CLI_HOME``).
    home_var: str
    #: The CLI's folder in a home (gemini: ``.gemini``).
    folder: str
    #: The entry: (proxy command, server URL, API key) -> the dict under ``mcpServers.waaah``.
    entry: Callable[[list[str], str, str | None], dict[str, Any]]
    #: Settings of every supervised run besides the entry, as paths into the settings document.
    run_settings: Mapping[tuple[str, ...], Any] = field(default_factory=dict)
    #: The entry a user may ask to keep in their own settings (`waaah mcp install`).
    persistent: Persistent | None = None
    #: The clock that stamps backups (a test passes a fixed one).
    now: Callable[[], datetime] = datetime.now

    def user_folder(self, env: Mapping[str, str]) -> Path:
        return Path(env.get(self.home_var) or env.get("HOME") or "~").expanduser() / self.folder

    def run_home(self, env: Mapping[str, str], session_dir: Path) -> Path:
        return homes_root(env) / session_dir.name

    def existing(self, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
        return mcpconf.find_entry(read_json(self.user_folder(env) / SETTINGS))

    def give(
        self, env: Mapping[str, str], server: ServerChoice, session_dir: Path, per_run_env: Mapping[str, str]
    ) -> Given:
        home = self.run_home(env, session_dir)
        notes = self.settle(home) if home.exists() else []
        user = self.user_folder(env)
        current = read_config(user / SETTINGS)  # refuses a damaged file with one line
        keys: dict[tuple[str, ...], Any] = {
            ("mcpServers", mcpconf.NAME): self.entry(PROXY_COMMAND, server.url, server.api_key)
        }
        keys.update(self.run_settings)
        written = home_overlay.overlay(current.data, keys)
        try:
            _remove(home)
            folder = home / self.folder
            for private in (home.parent.parent, home.parent, home, folder):
                _private(private)
            snapshot = _link_all(user, folder)
            atomic_write(folder / SETTINGS, json.dumps(written, indent=2) + "\n", 0o600)
            manifest = {"user_folder": str(user), "snapshot": snapshot, "written": written}
            atomic_write(home / MANIFEST, json.dumps(manifest) + "\n", 0o600)
        except OSError as err:
            raise ConfigRefused(
                f"cannot prepare this run's {self.folder} in {home} ({err.strerror})",
                "free space or fix the permissions of that folder, then start again (or start with --no-mcp)",
            ) from err
        notes.append(f"gave this run the waaah MCP server ({server.url}) in {folder / SETTINGS}")
        return Given(notes, [], {self.home_var: str(home)})

    def settle(self, home: Path) -> list[str]:
        """Carry back to the user's folder what the CLI changed in the run's; notes for the user."""
        try:
            manifest = json.loads(read_capped(home / MANIFEST, STATE_FILE_CAP))
            user = Path(manifest["user_folder"])
            snapshot: dict[str, str] = dict(manifest.get("snapshot") or {})
            written: dict[str, Any] = manifest["written"]
        except (OSError, ValueError, KeyError, TypeError):
            return []  # not a home we made, or made before its manifest: nothing to carry
        folder = home / self.folder
        notes: list[str] = []
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            return []
        for name in entries:
            if name == SETTINGS:
                continue
            with contextlib.suppress(OSError):
                note = self._settle_one(folder / name, user / name, snapshot.get(name))
                if note:
                    notes.append(note)
        now = _json_object(folder / SETTINGS)
        if now is not None and now != written:
            found = home_overlay.changes(written, now, [("mcpServers", mcpconf.NAME), *self.run_settings])
            if found:
                current = read_config(user / SETTINGS)
                new = home_overlay.apply(current.data, found)
                if new != current.data:
                    notes += rewrite_config(current, new, current.mode or 0o600, self.now())
            manifest["written"] = now
            atomic_write(home / MANIFEST, json.dumps(manifest) + "\n", 0o600)
        return notes

    def _settle_one(self, ours: Path, theirs: Path, snap: str | None) -> str:
        in_run, in_user = _kind(ours, follow=False), _kind(theirs, follow=True)
        both = None
        if in_run == Kind.FILE and in_user == Kind.FILE:
            mine, other = _json_object(ours), _json_object(theirs)
            both = (other, mine) if mine is not None and other is not None else None
        unchanged = snap is not None and in_user == Kind.FILE and _digest(theirs) == snap
        action = home_overlay.settle(ours.name, in_run, in_user, unchanged, both is not None)
        target = Path(os.path.realpath(theirs))
        if action == Action.MOVE:
            _private(theirs.parent)
            shutil.move(str(ours), str(theirs))
        elif action == Action.MERGE and both is not None:
            merged = home_overlay.merge_state(*both)
            atomic_write(target, json.dumps(merged, indent=2) + "\n", _mode(target))
            ours.unlink()
        elif action == Action.REPLACE:
            _copy_over(ours, target)
            ours.unlink()
        elif action == Action.LEAVE:
            return f"kept your {theirs}: this run's own {ours.name} differed and is left in {ours.parent}"
        else:
            return ""
        os.symlink(theirs, ours)
        return ""

    def after_run(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        home = self.run_home(env, session_dir)
        return self.settle(home) if home.exists() else []

    def finish(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        """The session is over: settle its home, then remove it (kept when settling failed)."""
        home = self.run_home(env, session_dir)
        if not home.exists():
            return []
        try:
            notes = self.settle(home)
        except (OSError, ConfigRefused) as err:
            return [f"kept {home}: what gemini changed in it could not be carried back ({err})"]
        with contextlib.suppress(OSError):
            _remove(home)
        return notes

    def doctor(self, env: Mapping[str, str]) -> Finding:
        where = self.user_folder(env) / SETTINGS
        try:
            entry = self.existing(env)
        except ConfigRefused as err:
            return Finding("fail", err.what, err.fix)
        given = f"given per run in a home of its own ({self.home_var}); {where} is not touched"
        if entry is None:
            return Finding("ok", given)
        return Finding(
            "ok",
            f"{given}; it holds a waaah entry of yours ({entry.kind} -> {entry.url}) for plain runs",
            "waaah mcp uninstall removes it (with a backup)",
        )


def _private(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o700)


def _remove(home: Path) -> None:
    """Remove a run's home: its links are unlinked, never followed."""
    if home.is_symlink() or home.is_file():
        home.unlink()
    elif home.exists():
        shutil.rmtree(home)


def _link_all(user: Path, folder: Path) -> dict[str, str]:
    """Link every entry of the user's folder but the settings; the digests of its small files."""
    snapshot: dict[str, str] = {}
    try:
        names = sorted(os.listdir(user))
    except FileNotFoundError:
        return snapshot
    for name in names:
        if name == SETTINGS:
            continue
        os.symlink(user / name, folder / name)
        digest = _digest(user / name)
        if digest:
            snapshot[name] = digest
    return snapshot


def _kind(path: Path, follow: bool) -> Kind:
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return Kind.MISSING
    if stat.S_ISLNK(info.st_mode):
        return Kind.LINK
    if stat.S_ISREG(info.st_mode):
        return Kind.FILE
    return Kind.DIR if stat.S_ISDIR(info.st_mode) else Kind.OTHER


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(read_capped(path, STATE_FILE_CAP)).hexdigest()
    except (OSError, UnsafeFile):
        return ""


def _json_object(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(read_capped(path, STATE_FILE_CAP))
    except (OSError, UnsafeFile, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _mode(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o600


def _copy_over(source: Path, target: Path) -> None:
    """Replace ``target`` with a copy of ``source`` at once (a file beside it, renamed over it)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(source, tmp, follow_symlinks=False)
        os.chmod(tmp, _mode(target))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
