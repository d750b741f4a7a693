"""claude's headless JSON stream, read into a :class:`StreamSummary`."""

from __future__ import annotations

from typing import Any

from waaah_agent.core.oneshot.streams import StreamSummary, Tokens, as_cost, as_int, reasoned

# --------------------------------------------------------------------------------------------
# claude -p ... --output-format stream-json --verbose
# lines: system (init, api_retry, ...), assistant, user (tool results), result
# --------------------------------------------------------------------------------------------


def apply_claude(event: dict[str, Any], s: StreamSummary) -> None:
    handle = _HANDLERS.get(str(event.get("type")))
    if handle is not None:
        handle(event, s)


def _system(event: dict[str, Any], s: StreamSummary) -> None:
    if event.get("subtype") == "init":
        s.session_id = str(event.get("session_id") or s.session_id)
        s.model = str(event.get("model") or s.model)
    elif event.get("subtype") == "api_retry":
        s.retries += 1


def _assistant(event: dict[str, Any], s: StreamSummary) -> None:
    message = event.get("message") or {}
    if event.get("is_api_error_message") or event.get("error"):
        # claude's own error, shaped as a message from a "<synthetic>" model.
        s.error = _claude_text(message) or s.error
        s.error_kind = str(event.get("error") or "")
        s.error_status = as_int(event.get("api_error_status")) or s.error_status
        return
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
            reasoned(s, block["thinking"])
        if block.get("type") == "tool_use":
            s.tools.called(str(block.get("name") or ""))
            s.response = ""
    text = _claude_text(message)
    if text:
        s.response = text


def _user(event: dict[str, Any], s: StreamSummary) -> None:
    for block in (event.get("message") or {}).get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("is_error"):
            s.tools.error_count += 1


def _result(event: dict[str, Any], s: StreamSummary) -> None:
    s.finished = True
    s.session_id = str(event.get("session_id") or s.session_id)
    usage = event.get("usage") or {}
    fresh = as_int(usage.get("input_tokens")) + as_int(usage.get("cache_creation_input_tokens"))
    cached = as_int(usage.get("cache_read_input_tokens"))
    output = as_int(usage.get("output_tokens"))
    cost = event.get("total_cost_usd")
    s.tokens = Tokens(
        fresh,
        output,
        cached,
        fresh + cached + output,
        as_cost(cost),
        as_int(usage.get("cache_creation_input_tokens")),
    )
    models = [m for m in (event.get("modelUsage") or {}) if m != "<synthetic>"]
    if models and not s.model:
        s.model = models[0]
    if event.get("is_error"):
        s.error = (
            str(event.get("result") or "")
            or s.error
            or str(event.get("subtype") or "claude reported an error")
        )
        s.error_status = as_int(event.get("api_error_status")) or s.error_status
        s.error_kind = s.error_kind or str(event.get("api_error_type") or event.get("subtype") or "")
    elif isinstance(event.get("result"), str):
        s.response = event["result"]


_HANDLERS = {"system": _system, "assistant": _assistant, "user": _user, "result": _result}


def _claude_text(message: dict[str, Any]) -> str:
    return "".join(
        str(b.get("text") or "")
        for b in message.get("content") or []
        if isinstance(b, dict) and b.get("type") == "text"
    )
