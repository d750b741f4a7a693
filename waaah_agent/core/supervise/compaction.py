"""Where a CLI compacted its conversation, as its own transcript marks it (pure).

Each function takes lines of a transcript and returns the keys of the compactions in them, so
the caller can tell a new one from one already seen (a transcript is read a piece at a time,
and gemini writes its whole message list again after each change). Verified with the real CLIs
against the fake model API (`/compact`, `/compress`; an automatic compaction takes the same
path in each):

* claude 2.1.332: a record ``{"type": "system", "subtype": "compact_boundary", "uuid": ...,
  "compactMetadata": {"trigger": "manual" | "auto", ...}}``;
* codex 0.171.0: a record ``{"type": "compacted", "payload": {"message": ...}}``;
* gemini 0.61.0: its message list set again (``{"$set": {"messages": [...]}}``) with the summary
  as a user message followed by its own fixed answer "Got it. Thanks for the additional
  context!" (a model message with an id of its own per compaction).

opencode keeps its conversation in its database, not in a file read here: not checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

#: gemini's own answer to the summary that replaces a compressed history.
GEMINI_ACKNOWLEDGEMENT = "Got it. Thanks for the additional context!"


def _records(lines: Iterable[str], needle: str) -> Iterable[dict[str, Any]]:
    for line in lines:
        if needle not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def claude_compactions(lines: Iterable[str]) -> set[str]:
    return {
        str(r.get("uuid") or r.get("timestamp"))
        for r in _records(lines, '"compact_boundary"')
        if r.get("type") == "system" and r.get("subtype") == "compact_boundary"
    }


def codex_compactions(lines: Iterable[str]) -> set[str]:
    return {
        f"{r.get('timestamp')}/{r.get('ordinal')}"
        for r in _records(lines, '"compacted"')
        if r.get("type") == "compacted"
    }


def gemini_compactions(lines: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for record in _records(lines, GEMINI_ACKNOWLEDGEMENT):
        changed = record.get("$set")
        messages = changed.get("messages") if isinstance(changed, dict) else None
        for message in messages if isinstance(messages, list) else [record]:
            if isinstance(message, dict) and message.get("type") == "gemini" and _says(message):
                found.add(str(message.get("id")))
    return found


def _says(message: dict[str, Any]) -> bool:
    content = message.get("content")
    parts = content if isinstance(content, list) else [content]
    texts = [p.get("text") if isinstance(p, dict) else p for p in parts]
    return any(isinstance(t, str) and t.strip() == GEMINI_ACKNOWLEDGEMENT for t in texts)
