"""Give a CLI the waaah MCP server (and hooks) where it really reads them, and check the server.

Two ways, each an object an adapter picks and fills with its CLI's paths and flags:

* runtime/cli_home.py's ``PerRunHome``: the CLI reads MCP servers only from its user settings
  (gemini: ``~/.gemini/settings.json``; workspace settings are ignored in folders it does not
  trust, and writing into the workspace would put a key into the user's repository), so each
  run gets a home of its own whose settings are the user's with the waaah entry laid over them.
* :class:`PerRunConfig`: the CLI takes a config file per run (claude: ``--mcp-config <file>`` in
  the session folder, plus ``--allowedTools mcp__waaah`` so tool calls do not stop at a
  permission dialog); the user's files are never touched.

A user's own settings file is written only when they ask (`waaah mcp install` / `uninstall`,
:class:`Persistent`): a read-modify-write that keeps all other keys, with a timestamped backup
first and an atomic replace, mode 0600 when the entry holds a key. A symlink is followed (the
file it names is edited, the link stays); a file that is read-only, or is not a regular file
holding a JSON object, is refused with one line and left byte for byte as it was
(:func:`read_config`, :func:`check_writable`).

:class:`PerRunHooks` gives a CLI per-run hooks (claude: ``--settings <file>``) that report to the
session inbox.
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
from typing import Any, Protocol

from waaah_agent import settings
from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.nesting import loads_json
from waaah_agent.errors import UsageError
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
#: What to tell the user when a file of theirs is refused.
FIX_FILE = "fix or move it, then start again (or start with --no-mcp)"


class ConfigRefused(UsageError):
    """A user's config file we will not read or edit: what is wrong with it, and the fix."""

    def __init__(self, what: str, fix: str = FIX_FILE) -> None:
        super().__init__(f"{what}; {fix}")
        self.what = what
        self.fix = fix


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


@dataclass(frozen=True)
class Given:
    """What giving the server to one run did: notes for the user, arguments for the CLI."""

    notes: list[str]
    args: list[str]
    #: Variables for the CLI's environment (gemini: the home of its own for this run).
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Finding:
    """What `waaah doctor` says about a CLI's waaah MCP entry."""

    status: str  # "ok", "warn", "fail"
    detail: str
    fix: str = ""


class McpGiver(Protocol):
    """How one CLI is given the waaah MCP server (``Adapter.mcp``)."""

    def existing(self, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
        """The waaah entry the user already has (its URL is the server's default); raises
        UsageError when a file that is ours to edit cannot be read."""
        ...

    def give(
        self, env: Mapping[str, str], server: ServerChoice, session_dir: Path, per_run_env: Mapping[str, str]
    ) -> Given:
        """Point this run of the CLI at our proxy for ``server``."""
        ...

    def doctor(self, env: Mapping[str, str]) -> Finding:
        """Where the CLI's entry stands now, for `waaah doctor`."""
        ...

    def after_run(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        """One run of the CLI ended: carry back what it changed in what we gave it."""
        ...

    def finish(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        """The session ended: the same, then remove what was given for it."""
        ...

    @property
    def persistent(self) -> Persistent | None:
        """The entry a user may keep in their own settings (`waaah mcp install`), if any."""
        ...


@dataclass(frozen=True)
class Persistent:
    """Where a CLI keeps MCP servers for every run of it, and its waaah entry there."""

    #: The user's settings file, from the environment.
    path: Callable[[Mapping[str, str]], Path]
    #: The entry: (proxy command, server URL, API key) -> the dict under ``mcpServers.waaah``.
    entry: Callable[[list[str], str, str | None], dict[str, Any]]
    #: The largest file read (claude's ~/.claude.json keeps its history too).
    limit: int = 4 * 1024 * 1024


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


@dataclass(frozen=True)
class PerRunConfig:
    """A config file per run in the session folder, named to the CLI by a flag."""

    #: The flag that names the file, e.g. ``--mcp-config``.
    flag: str
    #: The file's document: (proxy command, the proxy's environment) -> JSON object.
    document: Callable[[list[str], dict[str, str]], dict[str, Any]]
    #: Arguments given with it, e.g. ``--allowedTools mcp__waaah``.
    extra_args: tuple[str, ...] = ()
    #: A file of the CLI's own that may hold a waaah entry; only its URL is used.
    user_file: Callable[[Mapping[str, str]], Path] | None = None
    #: The entry a user may ask to keep in their own settings (`waaah mcp install`).
    persistent: Persistent | None = None

    def existing(self, env: Mapping[str, str]) -> mcpconf.ExistingEntry | None:
        if self.user_file is None:
            return None
        try:  # claude's ~/.claude.json keeps its history too: it may be large
            return mcpconf.find_entry(read_json(self.user_file(env), limit=64 * MAX_SETTINGS_BYTES))
        except UsageError:
            return None  # the CLI's own file; not ours to judge

    def give(
        self, env: Mapping[str, str], server: ServerChoice, session_dir: Path, per_run_env: Mapping[str, str]
    ) -> Given:
        path = session_dir / "mcp.json"
        proxy_env = {**settings.proxy_env(server.url, server.api_key), **per_run_env}
        atomic_write(path, json.dumps(self.document(PROXY_COMMAND, proxy_env), indent=2) + "\n", 0o600)
        return Given([], [self.flag, str(path), *self.extra_args])

    def doctor(self, env: Mapping[str, str]) -> Finding:
        return Finding("ok", f"given per run with {self.flag} (your files are not touched)")

    def after_run(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        return []  # the CLI only reads the file

    def finish(self, env: Mapping[str, str], session_dir: Path) -> list[str]:
        return []  # the file stays with the session's other files


@dataclass(frozen=True)
class PerRunHooks:
    """Hooks given per run in a settings file, each running ``python -m waaah_agent.runtime.mcp.hook <cli>``,
    which appends the event to the session inbox (``Adapter.hooks``)."""

    cli: str
    #: The flag that names the settings file, e.g. ``--settings``.
    flag: str
    #: The hook events to report, e.g. ``Stop``.
    events: tuple[str, ...]

    def args(self, session_dir: Path) -> list[str]:
        command = " ".join([sys.executable, "-m", "waaah_agent.runtime.mcp.hook", self.cli])
        hooks = {name: [{"hooks": [{"type": "command", "command": command}]}] for name in self.events}
        path = session_dir / f"{self.cli}-settings.json"
        atomic_write(path, json.dumps({"hooks": hooks}, indent=2) + "\n", 0o600)
        return [self.flag, str(path)]


def server_warning(server: ServerChoice, health: Health) -> str | None:
    if health.ok:
        return None
    if health.detail == "bad key":
        return (
            f"WAAAH server at {server.url} rejected the API key (HTTP 401): "
            f"set the right one with --api-key or {settings.API_KEY}"
        )
    return f"Cannot connect to WAAAH server at {server.url}. Agent will run without MCP."
