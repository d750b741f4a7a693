"""The waaah MCP server's set-up: which server a run uses, the user's settings files read
safely, and the waaah entry written into them when they ask.

How each CLI is given the server per run is its adapter's ``mcp`` (core/mcp/givers.py), carried
out by runtime/mcp/givers.py. A user's own settings file is written only when they ask (`waaah
mcp install` / `uninstall`, ``Persistent``): a read-modify-write that keeps all other keys, with
a timestamped backup first and an atomic replace, mode 0600 when the entry holds a key. A
symlink is followed (the file it names is edited, the link stays); a file that is read-only, or
is not a regular file holding a JSON object, is refused with one line and left byte for byte as
it was (:func:`read_config`, :func:`check_writable`).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent import settings
from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.nesting import loads_json
from waaah_agent.errors import ConfigRefused, UsageError
from waaah_agent.runtime.mcp.waaah import Health
from waaah_agent.runtime.store import atomic_write

PROXY_COMMAND = [sys.executable, "-m", "waaah_agent.commands.app"]


@dataclass(frozen=True)
class ServerChoice:
    url: str
    api_key: str | None = field(repr=False)
    source: str
    key_typed: bool = False  # typed at the prompt now: to be kept for later starts


@dataclass
class McpPlan:
    """What the run needs: extra CLI args and a report of what was done."""

    server: ServerChoice | None
    extra_args: list[str]
    health: str | None  # the first check's detail ("ok", "unreachable: ...", "bad key")
    healthy: bool = True  # what that check said
    settled: bool = False  # what the CLI changed in what it was given is back, and that removed


#: The largest settings file read: a settings file is a few kB; megabytes are something else.
MAX_SETTINGS_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ConfigFile:
    """A user's JSON config file as read: the name the user knows, the file itself, its content."""

    path: Path  # the name the user knows (maybe a symlink)
    target: Path  # the file itself, every symlink followed
    raw: bytes | None  # None: there is no file yet
    data: dict[str, Any]
    mode: int | None  # its permission bits; None: there is no file yet

    @property
    def where(self) -> str:
        return _name(self.path, self.target)


def _name(path: Path, target: Path) -> str:
    return f"{path} (a link to {target})" if path != target else str(path)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a device")


def read_config(path: Path, limit: int = MAX_SETTINGS_BYTES) -> ConfigFile:
    """Read the JSON object in a user's config file without ever blocking.

    Symlinks are followed. A missing file reads as ``{}``. Anything else that is not a regular
    file of at most ``limit`` bytes of UTF-8 JSON holding an object (with ``mcpServers``, if
    there, an object) raises :class:`ConfigRefused` naming the file: a directory, a FIFO (opened
    non-blocking and checked before any read), a device, a huge file, a dangling symlink (where
    the user keeps the file is not known: creating the missing target could write into a mount
    point not mounted yet, replacing the link would cut it from the user's dotfiles).
    """
    linked = os.path.islink(path)
    target = Path(os.path.realpath(path)) if linked else path
    where = _name(path, target)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        if linked:
            raise ConfigRefused(
                f"{path} is a link to {target}, which does not exist",
                "create that file (holding {}) or remove the link, then start again (or start with --no-mcp)",
            ) from None
        return ConfigFile(path, target, None, {}, None)
    except OSError as err:
        raise ConfigRefused(f"cannot read {where} ({err.strerror})") from err
    if not stat.S_ISREG(info.st_mode):
        raise ConfigRefused(
            f"{where} is {_kind(info.st_mode)}, not a settings file",
            "move it away, then start again (or start with --no-mcp)",
        )
    raw = _read_capped(target, where, limit)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigRefused(f"{where} is not UTF-8 text (byte {err.start})") from err
    try:
        data = loads_json(text.strip() or "{}")
    except ValueError as err:
        raise ConfigRefused(f"cannot parse {where} ({err})") from err
    if not isinstance(data, dict):
        raise ConfigRefused(f"{where} does not hold a JSON object")
    if not isinstance(data.get("mcpServers", {}), dict):
        raise ConfigRefused(f'"mcpServers" in {where} is not a JSON object')
    return ConfigFile(path, target, raw, data, stat.S_IMODE(info.st_mode))


def _read_capped(target: Path, where: str, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file; opened non-blocking, checked again once open."""
    too_big = ConfigRefused(
        f"{where} is larger than {limit // (1024 * 1024)} MB, too large for a settings file"
    )
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as err:
        raise ConfigRefused(f"cannot read {where} ({err.strerror})") from err
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped between the stat and the open
            raise ConfigRefused(f"{where} is {_kind(info.st_mode)}, not a settings file")
        if info.st_size > limit:
            raise too_big
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as err:
        raise ConfigRefused(f"cannot read {where} ({err.strerror})") from err
    finally:
        os.close(fd)
    if size > limit:
        raise too_big
    return b"".join(chunks)


def read_json(path: Path, limit: int = MAX_SETTINGS_BYTES) -> dict[str, Any]:
    """The JSON object in a user's config file (``{}`` when there is none); see :func:`read_config`."""
    return read_config(path, limit).data


def choose_server(
    flag_url: str | None,
    flag_key: str | None,
    env: Mapping[str, str],
    existing: mcpconf.ExistingEntry | None,
    interactive: bool,
    ask: object,
    ask_secret: Callable[[str], str] | None = None,
    kept_key: str | None = None,
    kept_url: str | None = None,
) -> ServerChoice:
    """The server and key. The address: the flag, else the variable, else the one typed at an
    earlier start (``kept_url``), else the CLI's existing entry's, else asked on a terminal
    (``ask``). The key: the flag, else the variable, else the one kept with that same address
    (``kept_key``) or held by that same entry (a key goes to no other server), else, when the
    address was asked, asked through ``ask_secret`` (default :func:`getpass.getpass`, which
    does not echo it)."""
    key = settings.api_key(flag_key, env)
    stored = {kept_url: kept_key} if kept_url else {}
    if existing is not None and existing.url and existing.key:
        stored.setdefault(existing.url, existing.key)
    given = settings.server_url(flag_url, env)
    if given is not None:
        return ServerChoice(given[0], key or stored.get(given[0]), given[1])
    if kept_url:
        return ServerChoice(kept_url, key or kept_key, "the address typed at an earlier start")
    if existing is not None and existing.url:
        return ServerChoice(
            existing.url, key or existing.key, f"the existing {existing.kind} waaah MCP entry"
        )
    if not interactive:
        raise UsageError(
            "no WAAAH server configured: pass --server URL (and --api-key KEY), "
            f"set {settings.SERVER_URL} / {settings.API_KEY}, or run without MCP with --no-mcp"
        )
    default = settings.DEFAULT_SERVER_URL
    url = str(ask(f"WAAAH server address [{default}]: ")).strip() or default  # type: ignore[operator]
    if key:
        return ServerChoice(url, key, "asked")
    hidden = ask_secret or getpass.getpass
    typed = hidden("WAAAH API key (optional, not shown, Enter for none): ").strip() or None
    return ServerChoice(url, typed, "asked", key_typed=typed is not None)


def install_entry(
    path: Path, entry: dict[str, Any], server: ServerChoice, now: datetime, limit: int = MAX_SETTINGS_BYTES
) -> list[str]:
    """Put ``entry`` into the settings file at ``path``; return notes for the user (empty if unchanged).

    A symlink stays a link: the file it points to is edited, replaced atomically by a file
    written beside it. A file we must not write is refused before anything is written
    (:func:`check_writable`); every refused file is left byte for byte as it was.
    """
    current = read_config(path, limit)
    servers = current.data.get("mcpServers")
    if isinstance(servers, dict) and servers.get(mcpconf.NAME) == entry:
        return []
    check_writable(current, entry)
    mode = 0o600 if server.api_key else (current.mode if current.mode is not None else 0o644)
    notes = rewrite_config(current, mcpconf.with_entry(current.data, entry), mode, now, entry)
    notes.append(f"configured the waaah MCP server ({server.url}) in {current.where}")
    if server.api_key:
        notes.append(f"warning: the WAAAH API key is stored in plain text in {current.target} (mode 0600)")
    return notes


def remove_entry(path: Path, now: datetime, limit: int = MAX_SETTINGS_BYTES) -> list[str]:
    """Take ``mcpServers.waaah`` out of the settings file at ``path`` (a backup first)."""
    current = read_config(path, limit)
    servers = current.data.get("mcpServers")
    if not isinstance(servers, dict) or mcpconf.NAME not in servers:
        return []
    check_writable(current, {})
    data = {**current.data, "mcpServers": {k: v for k, v in servers.items() if k != mcpconf.NAME}}
    notes = rewrite_config(current, data, current.mode if current.mode is not None else 0o600, now)
    notes.append(f"removed the waaah MCP server from {current.where}")
    return notes


def rewrite_config(
    current: ConfigFile, data: dict[str, Any], mode: int, now: datetime, entry: dict[str, Any] | None = None
) -> list[str]:
    """Replace a user's settings file with ``data``: a timestamped backup of it first, then an
    atomic replace of the file it names. Notes for the user; a failed write raises ConfigRefused
    and leaves the file as it was (``entry``: what to tell them to add by hand instead)."""
    text = json.dumps(data, indent=2) + "\n"
    notes = []
    backup = None
    path = current.path
    try:
        current.target.parent.mkdir(parents=True, exist_ok=True)
        if current.raw is not None:
            # Beside the name the user knows; the content of the file it names.
            backup = path.with_name(f"{path.name}.waaah-backup-{now.strftime('%Y%m%d-%H%M%S')}")
            _write_backup(backup, current.raw, current.mode or 0o600)
            notes.append(f"backed up {current.where} to {backup}")
        atomic_write(current.target, text, mode)
    except OSError as err:
        if backup is not None:
            with contextlib.suppress(OSError):
                backup.unlink()
        raise _unwritable(current, entry or {}, f"cannot be written ({err.strerror})") from err
    with contextlib.suppress(OSError):  # the file is in place; its mode was set on creation
        os.chmod(current.target, mode)
    return notes


def check_writable(current: ConfigFile, entry: dict[str, Any]) -> None:
    """Refuse a settings file that is read-only: no write bit for anyone (the user's intent,
    which holds for root too, whom permission bits do not stop), no write access for us, on a
    read-only file system, or in a folder where the replacement cannot be created."""
    target = current.target
    if current.mode is not None:
        if current.mode & 0o222 == 0:
            raise _unwritable(current, entry, "is read-only", chmod=True)
        if not os.access(target, os.W_OK):
            raise _unwritable(current, entry, _why_not(target), chmod=True)
    folder = target.parent
    if folder.is_dir() and not os.access(folder, os.W_OK):
        raise _unwritable(current, entry, f"cannot be replaced: its folder {folder} {_why_not(folder)}")


def _why_not(path: Path) -> str:
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "is on a read-only file system"
    except OSError:
        pass
    return "is not writable for us"


def _unwritable(current: ConfigFile, entry: dict[str, Any], why: str, chmod: bool = False) -> ConfigRefused:
    """The refusal of a file we cannot write: make it writable, or add the entry by hand."""
    shown = dict(entry)
    if isinstance(shown.get("env"), dict) and settings.API_KEY in shown["env"]:
        shown["env"] = {**shown["env"], settings.API_KEY: "<your WAAAH API key>"}
    make = f"make it writable (chmod u+w {current.target})" if chmod else "make it writable"
    if not entry:
        return ConfigRefused(f"{current.where} {why}", f"{make}, then try again")
    by_hand = json.dumps({mcpconf.NAME: shown})[1:-1]
    return ConfigRefused(
        f"{current.where} {why}, so the waaah MCP server cannot be added to it",
        f'{make}, or add {by_hand} under "mcpServers" in it yourself',
    )


def _write_backup(backup: Path, raw: bytes, mode: int) -> None:
    """A copy of the file's bytes; never through a symlink planted at the backup's name."""
    fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
        fh.flush()
        os.fsync(fh.fileno())


def server_warning(server: ServerChoice, health: Health) -> str | None:
    if health.ok:
        return None
    if health.detail == "bad key":
        return (
            f"WAAAH server at {server.url} rejected the API key (HTTP 401): "
            f"set the right one with --api-key or {settings.API_KEY}"
        )
    return f"Cannot connect to WAAAH server at {server.url}. Agent will run without MCP."
