"""What to put back of a CLI's own session files after a native resume (pure).

Before every native resume the supervisor keeps a copy of the files in which the CLI holds the
session (``Adapter.session_files``); after the run it compares them with what is there now and
puts back what the CLI removed or emptied. A CLI may open a new file for the session at every
start, resume too, and later remove every file of a session when one of them holds no
conversation (the adapter that needs this says which release and why). So a file of the session
that holds no conversation, beside one that does, is set aside (never deleted) before a resume
and after every run.

Whether a file holds a conversation is read the way each CLI reads it: ``Adapter.holds_conversation``
(None: cannot tell).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FileSeen:
    """One session file as seen: its size and whether it holds a conversation (None: unknown)."""

    size: int
    conversation: bool | None


@dataclass(frozen=True)
class Plan:
    """What to do: files to put back from the kept copy, files to set aside; each with why."""

    restore: list[tuple[str, str]] = field(default_factory=list)
    set_aside: list[tuple[str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.restore or self.set_aside)


def decide(kept: Mapping[str, FileSeen], now: Mapping[str, FileSeen]) -> Plan:
    """Compare the kept copies (by path; ``{}`` before anything was kept) with the files now.

    Put back a kept file that held a conversation (or may have) and is now missing, empty, or
    no longer holds one. Set aside a file that holds no conversation while another file of the
    session does (after the put-back), unless it is one being put back."""
    restore: list[tuple[str, str]] = []
    for name, before in sorted(kept.items()):
        if before.conversation is False or before.size == 0:
            continue  # nothing worth keeping was there
        after = now.get(name)
        if after is None:
            restore.append((name, "removed"))
        elif after.size == 0:
            restore.append((name, "emptied"))
        elif before.conversation and after.conversation is False:
            restore.append((name, "its conversation emptied"))
    restored = {name for name, _ in restore}
    holding = {name for name, seen in now.items() if seen.conversation} | restored
    set_aside = [
        (name, "holds no conversation beside the file that does")
        for name, seen in sorted(now.items())
        if seen.conversation is False and name not in restored and holding - {name}
    ]
    return Plan(restore, set_aside)


# -- whether a file holds a conversation, as each CLI reads it -------------------------------


def json_lines(lines: Iterable[str]) -> Iterable[dict[str, Any]]:
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record
