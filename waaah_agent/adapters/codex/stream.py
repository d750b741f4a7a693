"""codex's headless JSON stream, read into a :class:`StreamSummary`."""

from __future__ import annotations

import re
from typing import Any

from waaah_agent.core.oneshot.streams import StreamSummary, Tokens, as_int, reasoned

# --------------------------------------------------------------------------------------------
# codex exec --json [PROMPT]   /   codex exec resume --json ID [PROMPT]
# lines: thread.started, turn.started, item.started / item.completed (agent_message,
# command_execution, file_change, mcp_tool_call, web_search, error, ...), error, turn.completed,
# turn.failed
# --------------------------------------------------------------------------------------------

# "unexpected status 401 Unauthorized: ...", "exceeded retry limit, last status: 429 Too Many Requests"
_CODEX_STATUS = re.compile(r"(?i)\b(?:unexpected status|last status:?)\s+(\d{3})\b")
_CODEX_RETRY = re.compile(r"^Reconnecting\.\.\. \d+/\d+")


def _codex_tool(item: dict[str, Any]) -> str | None:
    """The tool name of a codex item that is a tool call (None for messages, reasoning, ...)."""
    kind = str(item.get("type") or "")
    if kind == "mcp_tool_call":
        return f"mcp__{item.get('server') or ''}__{item.get('tool') or ''}"
    if kind in ("command_execution", "file_change", "web_search"):
        return kind
    if kind == "collab_tool_call":
        return str(item.get("tool") or kind)
    return None


def _codex_failed(item: dict[str, Any]) -> bool:
    if item.get("status") in ("failed", "declined") or item.get("error"):
        return True
    code = item.get("exit_code")
    return item.get("type") == "command_execution" and isinstance(code, int) and code != 0


def apply_codex(event: dict[str, Any], s: StreamSummary) -> None:
    kind = event.get("type")
    if kind == "thread.started":
        s.session_id = str(event.get("thread_id") or s.session_id)
    elif kind in ("item.started", "item.completed"):
        item = event.get("item") or {}
        if not isinstance(item, dict):
            return
        item_id = str(item.get("id") or "")
        name = _codex_tool(item)
        if name is not None:
            # A call counts once, when first seen (some items only ever arrive completed).
            if item_id not in s.open_calls:
                s.tools.called(name)
                s.response = ""
            if kind == "item.started":
                s.open_calls.add(item_id)
            else:
                s.open_calls.discard(item_id)
                if _codex_failed(item):
                    s.tools.error_count += 1
        elif kind == "item.completed" and item.get("type") == "agent_message":
            s.response = str(item.get("text") or "")
        elif kind == "item.completed" and item.get("type") == "reasoning":
            reasoned(s, str(item.get("text") or ""))
        # An item of type "error" is a warning codex went on after (e.g. no metadata for a
        # model name); the run's own failure comes as the events below.
    elif kind == "error":
        message = str(event.get("message") or "")
        if _CODEX_RETRY.match(message):
            s.retries += 1
        elif message:
            _codex_error(s, message)
    elif kind == "turn.failed":
        s.finished = True
        error = event.get("error") or {}
        message = str(error.get("message") or "") if isinstance(error, dict) else str(error)
        _codex_error(s, message or s.error or "codex reported a failed turn")
    elif kind == "turn.completed":
        s.finished = True
        usage = event.get("usage") or {}
        # input_tokens includes the cached ones; output_tokens includes the reasoning ones.
        # Limitation: codex reports the *thread's* running total here, not this turn's. A fresh
        # thread's total is this run's usage; after `exec resume` it also holds every earlier
        # turn of the thread, and the stream carries nothing to tell them apart. The summary
        # keeps the total and sets tokens_cumulative; `waaah run --session` takes off the total
        # its log holds from the earlier run (runtime/run_attempts.py, session_total).
        fresh_input = as_int(usage.get("input_tokens"))
        output = as_int(usage.get("output_tokens"))
        s.tokens = Tokens(
            input=fresh_input,
            output=output,
            cached=as_int(usage.get("cached_input_tokens")),
            total=fresh_input + output,
            cache_write=as_int(usage.get("cache_write_input_tokens"))
            if "cache_write_input_tokens" in usage
            else None,
        )
        s.tokens_cumulative = True


def _codex_error(s: StreamSummary, message: str) -> None:
    s.error = message
    found = _CODEX_STATUS.search(message)
    if found:
        s.error_status = int(found.group(1))
