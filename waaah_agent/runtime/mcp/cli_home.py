"""A home of its own for each supervised run of a CLI that has no per-run settings file it trusts.

gemini reads MCP servers and settings from ``$GEMINI_CLI_HOME/.gemini/settings.json``. Its
per-run settings file (``GEMINI_CLI_SYSTEM_SETTINGS_PATH``) is skipped unless root owns it and
every folder above it, so a user cannot use it. Instead a run gets a home in the user's state
folder (``$XDG_STATE_HOME/waaah-agent/homes/<session>``, 0700): its ``.gemini`` links every
entry of the user's ``.gemini`` (sessions, credentials, trusted folders, history: all the
user's), and its ``settings.json`` is the user's settings with this run's keys over them (the
waaah MCP server, loop detection off). The user's ``settings.json`` is never written for it.
The WAAAH API key is not in that file: the entry names ``${WAAAH_API_KEY}``, which gemini fills
in from its own environment when it reads its settings, so no file at rest ever holds the key.

After each run of the CLI, :meth:`PerRunHome.settle` carries back what gemini itself wrote:
files it created or renamed over our links (``projects.json``, a conversation under ``tmp/``,
an OAuth token) and settings it changed (a login method chosen at its first start), so the
user's folder ends as gemini alone would have left it (core/home_overlay.py decides,
runtime/home_carry.py carries, each file checked by content). The home is removed only when
nothing of gemini's is left in it; otherwise it is kept and named (the log, `waaah status`,
`waaah doctor`). The supervisor holds a lock on its home while it lives (runtime/homes.py): a
home left by a killed supervisor is settled by the next start of any session.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent import settings
from waaah_agent.core import home_overlay
from waaah_agent.core.home_overlay import SETTINGS
from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.mcp.givers import HomePerRun
from waaah_agent.errors import ConfigRefused
from waaah_agent.runtime.mcp import home_carry, homes
from waaah_agent.runtime.mcp.givers import KEY_REFERENCE, Finding, Given
from waaah_agent.runtime.mcp.homes import MANIFEST, SETTLE_COMMAND, homes_root
from waaah_agent.runtime.mcp.setup import PROXY_COMMAND, ServerChoice
from waaah_agent.runtime.mcp.user_file import find_entry, read_config, read_json, rewrite_config
from waaah_agent.runtime.store import atomic_write

__all__ = ["MANIFEST", "KEY_REFERENCE", "PerRunHome", "homes_root"]


@dataclass(frozen=True)
class PerRunHome(HomePerRun):
    """How a CLI is given the waaah MCP server and its run settings through a home per run."""

    #: The clock that stamps backups (a test passes a fixed one).
    now: Callable[[], datetime] = datetime.now

    def user_folder(self, env: Mapping[str, str]) -> Path:
        return Path(env.get(self.home_var) or env.get("HOME") or "~").expanduser() / self.folder

    def run_home(self, env: Mapping[str, str], session_dir: Path) -> Path:
        return homes_root(env) / session_dir.name

    def existing(self, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
        return find_entry(read_json(self.user_folder(env) / SETTINGS, comments=self.comments))

    def give(
        self, env: Mapping[str, str], server: ServerChoice, session_dir: Path, per_run_env: Mapping[str, str]
    ) -> Given:
        home = self.run_home(env, session_dir)
        notes = self.settle_leftovers(env, skip=home)
        user = self.user_folder(env)
        current = read_config(user / SETTINGS, comments=self.comments)  # a damaged file: one line
        entry = self.entry(PROXY_COMMAND, settings.proxy_env(server.url, server.api_key))
        run_env = {self.home_var: str(home)}
        if server.api_key and isinstance(entry.get("env"), dict):
            entry["env"][settings.API_KEY] = KEY_REFERENCE  # the key itself: gemini's environment
            run_env[settings.API_KEY] = server.api_key
        keys: dict[tuple[str, ...], Any] = {("mcpServers", mcpconf.NAME): entry}
        keys.update(self.run_settings)
        written = home_overlay.overlay(current.data, keys)
        try:
            for private in (home.parent.parent, home.parent):
                _private(private)
            if home.exists() or home.is_symlink():
                notes += self._earlier(home)  # this session's own, left by an earlier start
            home.mkdir(mode=0o700)
            homes.hold(home)
            folder = home / self.folder
            manifest: dict[str, Any] = {
                "user_folder": str(user),
                "session": session_dir.name,
                "workspace": str(session_dir.parent.parent.parent),
                "owner": {"pid": os.getpid(), "started": self.now().isoformat(timespec="seconds")},
                "snapshot": {},
                "written": written,
            }
            atomic_write(home / MANIFEST, json.dumps(manifest) + "\n", 0o600)
            _private(folder)
            manifest["snapshot"] = home_carry.link_all(user, folder, SETTINGS)
            atomic_write(folder / SETTINGS, json.dumps(written, indent=2) + "\n", 0o600)
            atomic_write(home / MANIFEST, json.dumps(manifest) + "\n", 0o600)
        except OSError as err:
            raise ConfigRefused(
                f"cannot prepare this run's {self.folder} in {home} ({err.strerror})",
                "free space or fix the permissions of that folder, then start again (or start with --no-mcp)",
            ) from err
        notes.append(f"gave this run the waaah MCP server ({server.url}) in {folder / SETTINGS}")
        return Given(notes, [], run_env)

    def _earlier(self, home: Path) -> list[str]:
        """Settle the home an earlier start of this session left; set it aside if it still
        holds something (a fresh one is made for this start)."""
        if home.is_symlink() or not home.is_dir():
            home_carry.remove(home)
            return []
        homes.hold(home)  # waits while another start settles it
        try:
            if not home.exists():
                return []  # that start settled it
            notes, left = self._carry_all(home, None)
            if not left:
                home_carry.remove(home)
                return notes
            aside = home.with_name(f"{home.name}.kept-{self.now().strftime('%Y%m%d-%H%M%S')}")
            os.rename(home, aside)
            self._keep(aside, left, notes)
            return notes
        finally:
            homes.release(home)

    def settle(self, home: Path) -> list[str]:
        """Carry back to the user's folder what the CLI changed in the run's; notes for the user."""
        data = homes.manifest(home) or {}
        user, snapshot, written = data.get("user_folder"), data.get("snapshot") or {}, data.get("written")
        if not isinstance(user, str) or not isinstance(snapshot, dict) or not isinstance(written, dict):
            return []  # not a home we made, or its manifest is damaged: nothing is carried (it is kept)
        user = Path(user)
        folder = home / self.folder
        notes: list[str] = []
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            return []
        for name in entries:
            if name == SETTINGS:
                continue
            try:
                notes += home_carry.carry(
                    folder / name, user / name, name, {str(k): str(v) for k, v in snapshot.items()}
                )
            except OSError as err:
                notes.append(f"could not carry {name} back to {user} ({err.strerror or err})")
        now = home_carry.json_value(folder / SETTINGS)
        if isinstance(now, dict) and now != written:
            found = home_overlay.changes(written, now, [("mcpServers", mcpconf.NAME), *self.run_settings])
            if found:
                current = read_config(user / SETTINGS, comments=self.comments)
                new = home_overlay.apply(current.data, found)
                if new != current.data and current.commented:
                    # Rewritten, the user's comments would be gone: what gemini set is named instead.
                    said = ", ".join(".".join(c.path) for c in found)
                    notes.append(
                        f"gemini changed {said} in its settings; not carried back to {current.where}: "
                        "it holds comments, which rewriting it would lose (set them there yourself)"
                    )
                elif new != current.data:
                    notes += rewrite_config(current, new, current.mode or 0o600, self.now())
            data["written"] = now
            atomic_write(home / MANIFEST, json.dumps(data) + "\n", 0o600)
        _scrub_key(home, self.folder)
        return notes

    def after_run(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        home = self.run_home(env, session_dir)
        return self.settle(home) if home.exists() else []

    def finish(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        """The session is over: settle its home, then remove it; kept (and named) while anything
        gemini wrote there could not be carried back."""
        home = self.run_home(env, session_dir)
        try:
            if not home.exists():
                return []
            notes, left = self._carry_all(home, None)
            if not left:
                with contextlib.suppress(OSError):
                    home_carry.remove(home)
                return notes
            self._keep(home, left, notes)
            return notes
        finally:
            homes.release(home)

    def settle_leftovers(
        self, env: Mapping[str, str], skip: Path | None = None, everything: bool = False
    ) -> list[str]:
        """Settle the homes no live supervisor holds (``skip``: this start's own): carried back,
        then removed; kept and named while something stays. Homes of earlier releases (their
        manifests name no owner) only with ``everything`` (`waaah mcp settle`), which also puts
        what conflicts beside the user's file (``NAME.waaah-<home>``)."""
        notes: list[str] = []
        for left in homes.leftovers(env):
            if left.path == skip or not (left.owned or everything):
                continue
            if left.kept and not everything:
                continue  # tried at its end; named by status and doctor until settled by hand
            fd = homes.claim(left.path)
            if fd is None:
                continue
            try:
                found, rest = self._carry_all(left.path, self.user_folder(env) if everything else None)
                if rest:
                    self._keep(left.path, rest, found)
                else:
                    home_carry.remove(left.path)
                    found.append(
                        f"settled {left.path}, left by session {left.session}: carried back and removed"
                    )
                notes += found
            except OSError as err:
                notes.append(
                    f"could not settle {left.path} ({err.strerror or err}); {SETTLE_COMMAND} tries again"
                )
            finally:
                os.close(fd)
        return notes

    def _carry_all(self, home: Path, beside: Path | None) -> tuple[list[str], list[str]]:
        """Settle ``home``; the notes, and what is still only in it (``beside``: the user's
        folder, where a file that conflicts is put beside its namesake)."""
        unsettled = []
        try:
            notes = self.settle(home)
        except (OSError, ConfigRefused) as err:
            notes = [f"could not carry what gemini changed in {home} back ({err})"]
            unsettled = [f"{self.folder}/{SETTINGS}"]  # its changes to the settings, maybe
        left = _left(home, self.folder) + unsettled
        if beside is not None and left:
            notes += _put_beside(home / self.folder, beside, home.name, left)
            left = _left(home, self.folder) + unsettled
        return notes, left

    def _keep(self, home: Path, left: list[str], notes: list[str]) -> None:
        with contextlib.suppress(OSError):
            _scrub_key(home, self.folder)
            data = homes.manifest(home) or {}
            data["kept"] = (
                f"{len(left)} file(s) gemini wrote there could not be carried back ({', '.join(left[:3])})"
            )
            atomic_write(home / MANIFEST, json.dumps(data) + "\n", 0o600)
        notes.append(_kept_line(home, left))

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


def _kept_line(home: Path, left: list[str]) -> str:
    shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
    return (
        f"kept {home}: what gemini wrote there is not all carried back ({shown}); "
        f"{SETTLE_COMMAND} carries it back (a file that differs from yours goes beside it)"
    )


def _left(home: Path, folder: str) -> list[str]:
    """What only the home holds: every file of gemini's but the run's settings and our manifest."""
    ours = (MANIFEST, f"{folder}/{SETTINGS}")
    temporary = (f".{MANIFEST}.", f"{folder}/.{SETTINGS}.")  # an atomic write cut short
    return [rel for rel in home_carry.uncarried(home) if rel not in ours and not rel.startswith(temporary)]


def _put_beside(folder: Path, user: Path, tag: str, left: list[str]) -> list[str]:
    """Each file only the run's folder holds copied to the user's (checked), then dropped: in
    its place when the user has none there, else beside it."""
    notes = []
    prefix = f"{folder.name}/"
    for rel in left:
        if not rel.startswith(prefix) or rel == f"{prefix}{SETTINGS}":
            continue
        inner = rel[len(prefix) :]
        ours, target = folder / inner, user / inner
        conflict = os.path.lexists(target)
        if conflict:
            target = user / f"{inner}.waaah-{tag}"
        try:
            home_carry.private_folder(target.parent)
            home_carry.place(ours, target)
            ours.unlink()
            if conflict:
                notes.append(f"this run's {inner} differed from yours: put beside it as {target}")
        except OSError as err:
            notes.append(f"could not put this run's {inner} beside yours ({err.strerror or err})")
    return notes


def _scrub_key(home: Path, folder: str) -> None:
    """No key at rest in a home: an API key in the run's entry (one written by an earlier
    release, or filled in by gemini) is put back as the reference."""
    for path, inner in ((home / folder / SETTINGS, ()), (home / MANIFEST, ("written",))):
        data = home_carry.json_value(path)
        if not isinstance(data, dict):
            continue
        node: Any = data
        for name in (*inner, "mcpServers", mcpconf.NAME, "env"):
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(settings.API_KEY) not in (None, KEY_REFERENCE):
            node[settings.API_KEY] = KEY_REFERENCE
            atomic_write(path, json.dumps(data, indent=2) + "\n", 0o600)


def _private(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o700)
