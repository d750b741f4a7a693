"""What claude's transcript (``~/.claude/projects/<cwd, non-alphanumerics as ->/<session uuid>.jsonl``)
holds: token usage, compactions, whether it holds a conversation (pure: the caller reads the file).

Tokens: each
``"type": "assistant"`` record has the API's ``message.usage``. One API message can be split
over several records (one per content block, all with the same ``message.id``), so each message
counts once, from its latest record. ``input = input_tokens + cache_read_input_tokens +
cache_creation_input_tokens`` (the API's ``input_tokens`` leaves out the cached parts),
``cached = cache_read_input_tokens``, ``output = output_tokens``.
Compactions (2.1.332): a record ``{"type": "system", "subtype": "compact_boundary", "uuid": ...}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from waaah_agent.core.kept_sessions import json_lines
from waaah_agent.core.supervise.compaction import records_with
from waaah_agent.core.tokens import Usage, UsageCounter, count, json_records, model_name


def claude_entries(record: dict[str, Any]) -> Iterator[tuple[str, Usage, str]]:
    if record.get("type") != "assistant":
        return
    message = record.get("message")
    if not isinstance(message, dict):
        return
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return
    key = message.get("id") or record.get("requestId") or record.get("uuid")
    if not isinstance(key, str) or not key:
        return
    read = count(usage.get("cache_read_input_tokens"))
    created = count(usage.get("cache_creation_input_tokens"))
    yield (
        key,
        Usage(
            input=count(usage.get("input_tokens")) + read + created,
            output=count(usage.get("output_tokens")),
            cached=read,
        ),
        model_name(message.get("model")),
    )


def claude_counter() -> UsageCounter:
    """A counter for a claude transcript."""
    return UsageCounter(claude_entries)


def claude_usage(lines: Iterable[str]) -> Usage:
    """Total token usage of a claude transcript (JSONL lines)."""
    return claude_counter().feed(lines)


def claude_compactions(lines: Iterable[str]) -> set[str]:
    return {
        str(r.get("uuid") or r.get("timestamp"))
        for r in records_with(lines, '"compact_boundary"')
        if r.get("type") == "system" and r.get("subtype") == "compact_boundary"
    }


def claude_holds(lines: Iterable[str]) -> bool | None:
    """A claude session file holds a conversation when it has a user or assistant message."""
    return any(r.get("type") in ("user", "assistant") and "message" in r for r in json_lines(lines))


def claude_thinking(lines: Iterable[str]) -> str:
    """The model's thinking in the last turn of the transcript (the text after the last prompt
    typed), or "": the ``thinking`` blocks of its assistant records."""
    turn: list[str] = []
    for record in json_records(lines):
        message = record.get("message")
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if record.get("type") == "user" and (
            isinstance(content, str)
            or any(isinstance(b, dict) and b.get("type") == "text" for b in content or [])
        ):
            turn = []  # a prompt typed (not a tool result): a new turn
        elif record.get("type") == "assistant" and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "thinking":
                    turn.append(str(block.get("thinking") or ""))
    return "\n".join(t for t in turn if t.strip())
