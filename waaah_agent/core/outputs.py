"""The envelope fields of `waaah run` that callers of the older wrappers read (pure).

* ``tokens_used``: the token figures under the names those wrappers used (``tokens`` stays);
* ``metadata.tool_activity``: what the tools did, by class (``tool_activity`` stays);
* ``reasoning``: the model's thinking text, compacted and capped;
* a plain answer that is one markdown code fence loses the fence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from waaah_agent.core.streams import EDIT_TOOLS, SHELL_TOOLS, Tokens, ToolActivity, tool_names
from waaah_agent.core.tokens import json_records

#: ``reasoning`` is cut to this many characters.
REASONING_CAP = 600

#: Tool classes of ``metadata.tool_activity.result_classes``, by tool name (first match wins).
_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("write", tool_names((*EDIT_TOOLS, "create_file", "delete_file", "str_replace_based_edit_tool"))),
    ("shell", tool_names(SHELL_TOOLS)),
    ("browser", re.compile(r"(?i)(browser|playwright|puppeteer|chrome|navigate|screenshot)")),
    ("web", re.compile(r"(?i)^(web_?fetch|web_?search|google_web_search|fetch|http_request)$")),
    (
        "read",
        re.compile(
            r"(?i)^(read|read_file|read_many_files|glob|grep|search|search_file_content|list_directory|"
            r"ls|view|cat|find|codesearch|list)$"
        ),
    ),
)
_MCP_NAME = re.compile(r"^mcp__(.+?)__(.+)$")
# gemini names an MCP tool ``mcp_<server>_<tool>`` and reads a name back the same way: the
# server up to the first ``_`` (its own parseMcpToolName).
_GEMINI_MCP_NAME = re.compile(r"^mcp_([^_]+)_(.+)$")
_FENCE = re.compile(r"\A```[^\n`]*\n(.*?)\n?```\Z", re.DOTALL)


def tokens_used(tokens: Tokens) -> dict[str, Any]:
    """``tokens`` under the wrappers' names. ``input_tokens`` is ``tokens.input`` (what the CLI
    sent fresh: claude's excludes cache reads, the others' include them), ``total_tokens`` is
    ``tokens.total``; ``cost_usd`` and ``cache_creation_input_tokens`` are null where the CLI
    does not report them."""
    return {
        "input_tokens": tokens.input,
        "output_tokens": tokens.output,
        "total_tokens": tokens.total,
        "cost_usd": tokens.cost_usd,
        "cache_read_input_tokens": tokens.cached,
        "cache_creation_input_tokens": tokens.cache_write,
    }


def compact_tool_name(name: str) -> str:
    """``mcp__ns__tool`` (claude, codex) and ``mcp_ns_tool`` (gemini) -> ``ns.tool``; other
    names as they are."""
    found = _MCP_NAME.match(name) or _GEMINI_MCP_NAME.match(name)
    return f"{found.group(1)}.{found.group(2)}" if found else name


def tool_class(name: str) -> str:
    """``write``, ``shell``, ``browser``, ``web``, ``read`` or ``other`` (an MCP tool by its own
    name: ``mcp__fs__write_file`` is a write)."""
    bare = compact_tool_name(name).rsplit(".", 1)[-1]
    for kind, pattern in _CLASSES:
        if pattern.search(bare) or (kind == "browser" and pattern.search(name)):
            return kind
    return "other"


def tool_metadata(tools: ToolActivity, source: str = "stream") -> dict[str, Any] | None:
    """``metadata.tool_activity``, or None when no tool ran. ``result_classes`` counts the calls
    of each class; ``activity_class`` is ``tool_errors`` (a call failed), ``write_active`` (a
    call wrote), ``tool_active`` or ``none``."""
    if not tools.call_count:
        return None
    names = tools.calls or tools.tool_names
    classes: dict[str, int] = {}
    for name in names:
        kind = tool_class(name)
        classes[kind] = classes.get(kind, 0) + 1
    writes = classes.get("write", 0)
    activity = "tool_errors" if tools.error_count else "write_active" if writes else "tool_active"
    return {
        "call_count": tools.call_count,
        "write_count": writes,
        "error_count": tools.error_count,
        "tool_names": list(dict.fromkeys(compact_tool_name(n) for n in tools.tool_names if n)),
        "result_classes": classes,
        "activity_class": activity,
        "source": source,
    }


def compact_reasoning(text: str, cap: int = REASONING_CAP) -> str:
    """Whitespace collapsed to single spaces, cut to ``cap`` characters (ending in "...")."""
    flat = " ".join(text.split())
    if len(flat) <= cap:
        return flat
    return flat[: cap - 3].rstrip() + "..."


def strip_fence(answer: str) -> str:
    """The inside of an answer that is entirely one markdown code fence (```lang ... ```);
    any other answer as it is."""
    found = _FENCE.match(answer.strip())
    if found is None or "```" in found.group(1):
        return answer
    return found.group(1)


def add_fields(
    envelope: dict[str, Any], tokens: Tokens, tools: ToolActivity, reasoning: str, source: str
) -> None:
    """Adds ``tokens_used``, ``metadata.tool_activity`` (when a tool ran) and ``reasoning`` with
    ``reasoning_source`` (when there is any) to ``envelope``; strips a fenced answer."""
    envelope["tokens_used"] = tokens_used(tokens)
    activity = tool_metadata(tools)
    if activity is not None:
        envelope.setdefault("metadata", {})["tool_activity"] = activity
    if reasoning.strip():
        envelope["reasoning"] = compact_reasoning(reasoning)
        envelope["reasoning_source"] = source
    if isinstance(envelope.get("response"), str):
        envelope["response"] = strip_fence(envelope["response"])


#: The CLIs whose session files :func:`session_reasoning` reads.
SESSION_REASONING = ("gemini", "claude")


def session_reasoning(agent: str, lines: Iterable[str]) -> str:
    """The model's thinking in the last turn of a CLI's session file (the text after the last
    prompt typed), or "". gemini (``chats/session-*.jsonl``): the ``thoughts`` (subject and
    description) of its ``gemini`` messages, a message rewritten under the same id counting
    once; claude (``projects/<cwd>/<id>.jsonl``): the ``thinking`` blocks of its assistant
    records. Other CLIs: "" (their streams carry the reasoning)."""
    if agent == "gemini":
        return _gemini_thoughts(json_records(lines))
    if agent == "claude":
        return _claude_thinking(json_records(lines))
    return ""


def _gemini_thoughts(records: Iterable[dict[str, Any]]) -> str:
    messages: dict[str, dict[str, Any]] = {}  # by id, in first-seen order, latest version
    for record in records:
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


def _claude_thinking(records: Iterable[dict[str, Any]]) -> str:
    turn: list[str] = []
    for record in records:
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
