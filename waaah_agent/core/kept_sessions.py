"""What to put back of a CLI's own session files after a native resume (pure).

Before every native resume the supervisor keeps a copy of the files in which the CLI holds the
session (``Adapter.session_files``); after the run it compares them with what is there now and
puts back what the CLI removed or emptied. gemini 0.61.0 needs it (upstream issue 29198): every
start, ``--resume`` too, first opens a file of its own named for the minute it starts, holding
no conversation; a resume in a later minute leaves that file beside the real one, and the next
start of gemini removes every file of a session with such a file (its retention clean-up matches
them by the id's first 8 characters). A resume within the same minute writes into the real
file, and an exit before the conversation is loaded again removes it. Either way the
conversation is gone. So a file of the session that holds no conversation, beside one that
does, is set aside (never deleted) before a resume and after every run.

Whether a file holds a conversation is read the way each CLI reads it: :func:`gemini_holds`,
:func:`claude_holds`, :func:`codex_holds` (None: cannot tell).
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

#: gemini's own rule (isIgnoredUserContent): user text that is no conversation of the user's.
_IGNORED_PREFIXES = ("/", "?", "<session_context>", "<hook_context>")


def _text(content: Any) -> str:
    """gemini's partListUnionToString, for what its session files hold: a string or parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return str(content.get("text") or "")
    if isinstance(content, list):
        return "".join(_text(part) for part in content)
    return ""


def _resumable(message: Any) -> bool:
    """gemini's isResumableMessageRecord: a user message of the user's, or any model answer."""
    if not isinstance(message, dict):
        return False
    text = _text(message.get("content")).strip()
    if message.get("type") == "user":
        return bool(text) and not text.startswith(_IGNORED_PREFIXES)
    if message.get("type") == "gemini":
        return bool(text or message.get("toolCalls") or message.get("thoughts"))
    return False


def gemini_holds(lines: Iterable[str]) -> bool | None:
    """Whether a gemini session file holds a conversation ``--resume`` can carry on.

    JSONL (0.51 and later): a header, then records replayed in order: a message (``id`` and
    ``type``) is added or replaces the one of the same id; ``{"$set": {"messages": [...]}}``
    replaces them all; ``{"$rewindTo": id}`` drops that message and those after it. A single
    JSON document (0.34) holds ``messages``. None when no line parses."""
    lines = list(lines)
    try:  # a single JSON document (0.34); a JSONL file fails at its second line
        document = json.loads("\n".join(lines))
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("messages"), list):
        return any(_resumable(m) for m in document["messages"])
    messages: dict[str, Any] = {}
    parsed = False
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        parsed = True
        if isinstance(record.get("messages"), list) and "$set" not in record:  # the whole document
            messages = _by_id(record["messages"])
        elif isinstance(record.get("$set"), dict):
            new = record["$set"].get("messages")
            if isinstance(new, list):
                messages = _by_id(new)
        elif "$rewindTo" in record:
            keys = list(messages)
            if record["$rewindTo"] in messages:
                for key in keys[keys.index(record["$rewindTo"]) :]:
                    del messages[key]
            else:
                messages = {}
        elif "id" in record and "type" in record:
            messages[str(record["id"])] = record
    if not parsed:
        return None
    return any(_resumable(m) for m in messages.values())


def _by_id(messages: list[Any]) -> dict[str, Any]:
    return {str(m.get("id", n)) if isinstance(m, dict) else str(n): m for n, m in enumerate(messages)}


def _records(lines: Iterable[str]) -> Iterable[dict[str, Any]]:
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def claude_holds(lines: Iterable[str]) -> bool | None:
    """A claude session file holds a conversation when it has a user or assistant message."""
    return any(r.get("type") in ("user", "assistant") and "message" in r for r in _records(lines))


def codex_holds(lines: Iterable[str]) -> bool | None:
    """A codex rollout holds a conversation when it has a message (a ``response_item``)."""
    return any(r.get("type") == "response_item" for r in _records(lines))
