"""A user's JSON settings file (a CLI's own: ~/.gemini/settings.json, ~/.claude.json), read
safely and, when the user asks, rewritten safely.

Read without ever blocking (:func:`read_config`): symlinks followed, a missing file ``{}``, a
file that is not a regular file holding a JSON object refused with one line naming it; comments
read where the CLI reads them (gemini). Rewritten (:func:`rewrite_config`) with a backup first
(0600, a name of its own), an atomic replace of the file a link names, its owner kept; a file
that is read-only, holds comments a rewrite would lose, holds a number JSON cannot write back,
or changed while it was edited, is refused with one line and left byte for byte as it was.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent import settings
from waaah_agent.core.mcp import mcpconf
from waaah_agent.core.nesting import loads_json, strip_json_comments
from waaah_agent.errors import ConfigRefused
from waaah_agent.runtime.store import atomic_write, give_owner

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
    owner: tuple[int, int] | None = None  # its uid and gid; None: there is no file yet
    changed: float = 0.0  # when it was last written (st_mtime)
    commented: bool = False  # it holds comments (read as the CLI reads them; a rewrite loses them)

    @property
    def where(self) -> str:
        return _name(self.path, self.target)


def _name(path: Path, target: Path) -> str:
    return f"{path} (a link to {target})" if path != target else str(path)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a device")


def read_config(path: Path, limit: int = MAX_SETTINGS_BYTES, comments: bool = False) -> ConfigFile:
    """Read the JSON object in a user's config file without ever blocking (``comments``: the
    CLI reads ``//`` and ``/* */`` comments in it, as gemini does).

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
    plain = strip_json_comments(text) if comments else text
    try:
        data = loads_json(plain.strip() or "{}")
    except ValueError as err:
        raise ConfigRefused(f"cannot parse {where} ({err})") from err
    if not isinstance(data, dict):
        raise ConfigRefused(f"{where} does not hold a JSON object")
    if not isinstance(data.get("mcpServers", {}), dict):
        raise ConfigRefused(f'"mcpServers" in {where} is not a JSON object')
    owner = (info.st_uid, info.st_gid)
    return ConfigFile(
        path, target, raw, data, stat.S_IMODE(info.st_mode), owner, info.st_mtime, plain != text
    )


#: A file emptied this recently may be being written (truncated, its bytes still to come).
BEING_WRITTEN = 1.0


def read_settled(path: Path, limit: int = MAX_SETTINGS_BYTES, comments: bool = False) -> ConfigFile:
    """:func:`read_config`, waiting (up to 2 s) while the file is empty and was written within
    :data:`BEING_WRITTEN`: a program that rewrites it in place empties it first; read then, its
    settings would be taken for none and a rewrite would drop them."""
    current = read_config(path, limit, comments)
    for _ in range(20):
        if current.raw != b"" or time.time() - current.changed > BEING_WRITTEN:
            break
        time.sleep(0.1)
        current = read_config(path, limit, comments)
    return current


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


def read_json(path: Path, limit: int = MAX_SETTINGS_BYTES, comments: bool = False) -> dict[str, Any]:
    """The JSON object in a user's config file (``{}`` when there is none); see :func:`read_config`."""
    return read_config(path, limit, comments).data


def rewrite_config(
    current: ConfigFile, data: dict[str, Any], mode: int, now: datetime, entry: dict[str, Any] | None = None
) -> list[str]:
    """Replace a user's settings file with ``data``: a backup of it first (0600, a name no earlier
    backup has), then an atomic replace of the file it names, its owner kept. Notes for the
    user; a file that holds comments, holds a number JSON cannot spell, or changed since it was
    read, and a failed write, raise ConfigRefused and leave the file as it was (``entry``: what
    to tell them to add by hand instead)."""
    if current.commented:
        raise _unwritable(current, entry or {}, "holds comments, which rewriting it would lose")
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:  # 1e400 read as infinity: written back, no JSON parser would read it
        raise _unwritable(current, entry or {}, "holds a number too large to write back as JSON") from None
    notes = []
    backup = None
    path = current.path
    try:
        current.target.parent.mkdir(parents=True, exist_ok=True)
        if current.raw is not None:
            # Beside the name the user knows; the content of the file it names.
            backup = _write_backup(path, now, current.raw, current.owner)
            notes.append(f"backed up {current.where} to {backup}")
        if _bytes_now(current.target) != current.raw:
            raise ConfigRefused(
                f"{current.where} changed while waaah was editing it: nothing was written",
                "try again once the program writing it is done",
            )
        atomic_write(current.target, text, mode, owner=current.owner)
    except (OSError, ConfigRefused) as err:
        if backup is not None:
            with contextlib.suppress(OSError):
                backup.unlink()
        if isinstance(err, ConfigRefused):
            raise
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


def _bytes_now(target: Path) -> bytes | None:
    """The file's bytes as they are now (None: there is none), to tell whether it changed."""
    try:
        return _read_capped(target, str(target), MAX_SETTINGS_BYTES * 4)
    except ConfigRefused as err:
        if isinstance(err.__cause__, FileNotFoundError):
            return None
        raise


def _write_backup(path: Path, now: datetime, raw: bytes, owner: tuple[int, int] | None) -> Path:
    """A copy of the file's bytes beside ``path``, 0600 (an entry being removed may hold a key),
    under a name no file has yet (two edits in one second keep both backups); never through a
    symlink planted at that name; owned by the file's owner."""
    stem = f"{path.name}.waaah-backup-{now.strftime('%Y%m%d-%H%M%S')}"
    for n in range(1000):
        backup = path.with_name(stem if n == 0 else f"{stem}.{n}")
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as fh:
            give_owner(fh.fileno(), owner)
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        return backup
    raise FileExistsError(errno.EEXIST, "a thousand backups of it this second", str(path))


def find_entry(data: dict[str, Any]) -> mcpconf.ExistingEntry | None:
    """The waaah entry under ``mcpServers`` in a settings document."""
    return mcpconf.find_entry(data, settings.SERVER_URL, settings.API_KEY)
