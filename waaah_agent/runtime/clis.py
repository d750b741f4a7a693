"""Where an agent CLI is: the user's PATH, else the copy `make` installed beside this checkout.

`make run` and `make test` install the pinned CLIs into ``<checkout>/.cache/clis`` (never
globally), so a newcomer's `gemini` is not on their PATH. The supervisor, `waaah doctor` and
`waaah run` find it there too, and every command they print names it so that it runs when pasted.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

from waaah_agent import settings
from waaah_agent.adapters.base import CHECKOUT, Adapter

LOCAL_BIN = CHECKOUT / ".cache" / "clis" / "node_modules" / ".bin"


def local_bin(env: Mapping[str, str]) -> Path:
    """Where `make` installed the CLIs (``WAAAH_CLI_DIR`` names another place)."""
    return Path(env[settings.CLI_DIR]) if env.get(settings.CLI_DIR) else LOCAL_BIN


def find(adapter: Adapter, env: Mapping[str, str]) -> str | None:
    """The CLI's executable: on PATH, else the project-local install; None when neither has it."""
    found = shutil.which(adapter.binary, path=env.get("PATH"))
    if found is not None:
        return found
    local = local_bin(env) / adapter.binary
    return str(local) if local.is_file() and os.access(local, os.X_OK) else None


def on_path(binary: str, found: str, env: Mapping[str, str]) -> bool:
    """Whether typing ``binary`` in the user's shell runs ``found``."""
    return shutil.which(binary, path=env.get("PATH")) == found


def runnable(adapter: Adapter, text: str, env: Mapping[str, str]) -> str:
    """``text`` (a command starting with the CLI's name) as the user can paste it."""
    found = find(adapter, env)
    if found is None or on_path(adapter.binary, found, env) or not text.startswith(adapter.binary):
        return text
    return shlex.quote(found) + text[len(adapter.binary) :]


def login_hint(adapter: Adapter, env: Mapping[str, str]) -> str:
    """What to run to log in, runnable from the user's shell."""
    return runnable(adapter, adapter.login_hint or adapter.binary, env)
