"""opencode's headless JSON stream, read into a :class:`StreamSummary`."""

from __future__ import annotations

from typing import Any

from waaah_agent.core.oneshot.streams import StreamSummary, Tokens, as_cost, as_int, reasoned

# --------------------------------------------------------------------------------------------
# opencode run --format json [PROMPT]   (--session ID to continue)
# lines (each with sessionID): step_start, text, reasoning, tool_use, step_finish, error
# --------------------------------------------------------------------------------------------


def apply_opencode(event: dict[str, Any], s: StreamSummary) -> None:
    if event.get("sessionID") and not s.session_id:
        s.session_id = str(event["sessionID"])
    part = event.get("part") or {}
    if not isinstance(part, dict):
        part = {}
    handle = _HANDLERS.get(str(event.get("type")))
    if handle is not None:
        handle(event, part, s)


def _text(event: dict[str, Any], part: dict[str, Any], s: StreamSummary) -> None:
    # Each text part arrives once, complete (no deltas); the last one is the answer.
    text = str(part.get("text") or "")
    if text:
        s.response = text


def _reasoning(event: dict[str, Any], part: dict[str, Any], s: StreamSummary) -> None:
    reasoned(s, str(part.get("text") or ""))


def _tool_use(event: dict[str, Any], part: dict[str, Any], s: StreamSummary) -> None:
    s.tools.called(str(part.get("tool") or ""))
    s.response = ""
    state = part.get("state") or {}
    exit_code = (state.get("metadata") or {}).get("exit") if isinstance(state, dict) else None
    if (isinstance(state, dict) and state.get("status") == "error") or (
        isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0
    ):
        s.tools.error_count += 1


def _step_finish(event: dict[str, Any], part: dict[str, Any], s: StreamSummary) -> None:
    # One per model call: input excludes the cache reads and writes, output excludes the
    # reasoning tokens; the summary counts them the way the other CLIs do.
    tokens = part.get("tokens") or {}
    cache = tokens.get("cache") or {}
    cached = as_int(cache.get("read"))
    fresh_input = as_int(tokens.get("input")) + cached + as_int(cache.get("write"))
    output = as_int(tokens.get("output")) + as_int(tokens.get("reasoning"))
    cost = part.get("cost")
    s.tokens = s.tokens + Tokens(
        fresh_input,
        output,
        cached,
        as_int(tokens.get("total")) or fresh_input + output,
        as_cost(cost),
        as_int(cache.get("write")),
    )
    if part.get("reason") != "tool-calls":
        s.finished = True


def _error(event: dict[str, Any], part: dict[str, Any], s: StreamSummary) -> None:
    s.finished = True
    error = event.get("error") or {}
    if not isinstance(error, dict):
        s.error = str(error) or "opencode reported an error"
        return
    data = error.get("data") or {}
    if not isinstance(data, dict):
        data = {}
    s.error = str(data.get("message") or error.get("name") or "opencode reported an error")
    s.error_kind = str(error.get("name") or "")
    s.error_status = as_int(data.get("statusCode")) or s.error_status


_HANDLERS = {
    "text": _text,
    "reasoning": _reasoning,
    "tool_use": _tool_use,
    "step_finish": _step_finish,
    "error": _error,
}
