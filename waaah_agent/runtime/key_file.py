"""The WAAAH server address and API key a user typed once, kept for later starts.

``$XDG_CONFIG_HOME/waaah-agent/`` (default ``~/.config/waaah-agent/``, folder 0700) holds
``server`` (the address) and ``api-key`` (file 0600: the key and a newline). A flag or
``WAAAH_SERVER_URL`` / ``WAAAH_API_KEY`` always wins; these files are read only when neither is
given, so what was typed at the prompt is not lost on the next unattended start (or a
``--resume``). A key file others may read is refused, as ssh refuses such a key: the fix is one
``chmod``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from waaah_agent import settings
from waaah_agent.errors import UsageError
from waaah_agent.runtime.store import atomic_write
from waaah_agent.safe_read import UnsafeFile, read_capped

#: A key is short; anything longer in that file is not one.
MAX_KEY_BYTES = 4096


def folder(env: Mapping[str, str]) -> Path:
    return settings.user_folder(env, "config") / "waaah-agent"


def path(env: Mapping[str, str]) -> Path:
    """``WAAAH_API_KEY_FILE`` (the config's ``api_key_file``), else ours in the config folder."""
    given = env.get("WAAAH_API_KEY_FILE")
    return Path(given).expanduser() if given else folder(env) / "api-key"


def read_server(env: Mapping[str, str]) -> str | None:
    """The kept server address; None when there is none or it cannot be read as one."""
    try:
        text = read_capped(folder(env) / "server", MAX_KEY_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return text if text.startswith(("http://", "https://")) and "\n" not in text else None


def keep_server(env: Mapping[str, str], url: str) -> Path:
    where = folder(env) / "server"
    _private(where.parent)
    atomic_write(where, url.strip() + "\n", 0o600)
    return where


def _private(where: Path) -> None:
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(where, 0o700)


def read(env: Mapping[str, str]) -> str | None:
    """The kept key; None when there is none. A file that is not a private key file is refused."""
    where = path(env)
    try:
        info = os.stat(where)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise UsageError(f"cannot read the kept WAAAH API key {where} ({err.strerror})") from None
    if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise UsageError(
            f"the kept WAAAH API key {where} may be read by others (mode {mode:o}): "
            f"chmod 600 {where}, or remove it and give the key with --api-key"
        )
    try:
        raw = read_capped(where, MAX_KEY_BYTES)
    except UnsafeFile as err:
        raise UsageError(f"the kept WAAAH API key {where} {err.reason}: remove it") from None
    except OSError as err:
        raise UsageError(f"cannot read the kept WAAAH API key {where} ({err.strerror})") from None
    key = raw.decode("utf-8", "replace").strip()
    return key or None


def keep(env: Mapping[str, str], key: str) -> Path:
    """Write the key (folder 0700, file 0600, replaced atomically); where it went."""
    where = path(env)
    _private(where.parent)
    atomic_write(where, key.strip() + "\n", 0o600)
    return where
