"""What gemini's session file (``~/.gemini/tmp/<project>/chats/session-<date>-<id8>.jsonl``) holds:
token usage, compactions, whether it holds a conversation (pure: the caller reads the file).

Tokens: the file is a log of
records; a message record (``"type": "gemini"`` for the model) is written again, with the same
``id``, when it changes (e.g. once its tool calls are attached), and ``{"$set": {"messages":
[...]}}`` records carry whole lists. Each message counts once, from its latest record. Its
``tokens`` are the API's usage metadata: ``input`` = promptTokenCount (cached tokens included),
``cached`` = cachedContentTokenCount, ``thoughts``, ``tool`` = toolUsePromptTokenCount, ``output``
= candidatesTokenCount. So ``input = input + tool``, ``cached = cached``, ``output = output +
thoughts``. ``$rewindTo`` records drop messages from the conversation, but their tokens were
spent, so they stay counted. gemini 0.34.0 keeps the session as one JSON document
(``session-<date>-<id8>.json``: ``{"sessionId", ..., "messages": [...]}``), rewritten whole.

Compactions (0.61.0): its message list set again (``{"$set": {"messages": [...]}}``) with the
summary as a user message followed by its own fixed answer "Got it. Thanks for the additional
context!" (a model message with an id of its own per compaction).

Kept sessions (0.61.0, upstream issue 29198): every start, ``--resume`` too, first opens a file
of its own named for the minute it starts, holding no conversation; a resume in a later minute
leaves that file beside the real one, and the next start removes every file of a session with
such a file (its retention clean-up matches them by the id's first 8 characters). So the
supervisor sets such a file aside (core/kept_sessions.py), by :func:`gemini_holds`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from waaah_agent.core.supervise.compaction import records_with
from waaah_agent.core.tokens import Usage, UsageCounter, count, json_records, model_name


def _gemini_message(message: Any) -> tuple[str, Usage, str] | None:
    if not isinstance(message, dict) or message.get("type") != "gemini":
        return None
    tokens = message.get("tokens")
    key = message.get("id")
    if not isinstance(tokens, dict) or not isinstance(key, str) or not key:
        return None
    return (
        key,
        Usage(
            input=count(tokens.get("input")) + count(tokens.get("tool")),
            output=count(tokens.get("output")) + count(tokens.get("thoughts")),
            cached=count(tokens.get("cached")),
        ),
        model_name(message.get("model")),
    )


def gemini_entries(record: dict[str, Any]) -> Iterator[tuple[str, Usage, str]]:
    changes = record.get("$set")
    if isinstance(changes, dict):
        messages = changes.get("messages")
    elif "type" not in record and isinstance(record.get("messages"), list):
        messages = record["messages"]  # the whole session as one document (gemini 0.34.0)
    else:
        messages = [record]
    if not isinstance(messages, list):
        return
    for message in messages:
        entry = _gemini_message(message)
        if entry is not None:
            yield entry


def gemini_counter() -> UsageCounter:
    """A counter for a gemini session file."""
    return UsageCounter(gemini_entries)


def gemini_usage(lines: Iterable[str]) -> Usage:
    """Total token usage of a gemini session file (JSONL lines)."""
    return gemini_counter().feed(lines)


#: gemini's own answer to the summary that replaces a compressed history.
GEMINI_ACKNOWLEDGEMENT = "Got it. Thanks for the additional context!"


def gemini_compactions(lines: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for record in records_with(lines, GEMINI_ACKNOWLEDGEMENT):
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


def gemini_thoughts(lines: Iterable[str]) -> str:
    """The model's thinking in the last turn of the session file (the text after the last prompt
    typed), or "": the ``thoughts`` (subject and description) of its ``gemini`` messages, a
    message rewritten under the same id counting once."""
    messages: dict[str, dict[str, Any]] = {}  # by id, in first-seen order, latest version
    for record in json_records(lines):
        found = record.get("$set", {}).get("messages") if isinstance(record.get("$set"), dict) else None
        batch = found if isinstance(found, list) else record.get("messages")  # 0.34.0: one document
        for message in batch if isinstance(batch, list) else [record]:
            if isinstance(message, dict) and message.get("type") in ("user", "gemini"):
                messages[str(message.get("id") or len(messages))] = message
    turn: list[str] = []
    for message in messages.values():
        if message.get("type") == "user":
            turn = []
            continue
        for thought in message.get("thoughts") or []:
            if isinstance(thought, dict):
                subject, text = str(thought.get("subject") or ""), str(thought.get("description") or "")
                turn.append(f"{subject}: {text}" if subject and text else subject or text)
    return "\n".join(t for t in turn if t.strip())
