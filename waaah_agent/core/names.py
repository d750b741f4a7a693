"""A name a user gives (a workflow, a session or run id, an agent, a persona, a skill) is a name,
never a path: it becomes a file name under ``.waaah/`` or the user's folders, or an argument of a
CLI, so it holds no path separator, no ``..``, no NUL or other control character, does not start
with ``-`` (an option) or ``.`` (a hidden file), and is short.

Pure: the name in, why it cannot be one out (None when it can).
"""

from __future__ import annotations

import unicodedata

#: The longest name taken: a session id is 29 characters, a run's log id fewer.
MAX_NAME = 100


def problem(name: str) -> str | None:
    """Why ``name`` cannot be used as a name, or None."""
    if not name:
        return "is empty"
    if len(name) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        return "holds a control character"
    if "/" in name or "\\" in name:
        return "holds a path separator"
    if ".." in name:
        return "holds '..'"
    if name.startswith("-"):
        return "starts with '-'"
    if name.startswith("."):
        return "starts with '.'"
    if name != name.strip():
        return "starts or ends with a space"
    return None


def refusal(what: str, name: str) -> str | None:
    """One line refusing ``name`` as ``what`` (a flag, or what the name is of), or None."""
    why = problem(name)
    if why is None:
        return None
    shown = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in name[:60])
    more = "..." if len(name) > 60 else ""
    return f"{what} '{shown}{more}' {why}: give a name (letters, digits, '-', '_', '.'), not a path"
