"""gemini's headless JSON stream, read into a :class:`StreamSummary`."""

from __future__ import annotations

import re
from typing import Any

from waaah_agent.core.oneshot.streams import StreamSummary, Tokens, as_int

# --------------------------------------------------------------------------------------------
# gemini -p ... --output-format stream-json
# lines: init, message (user | assistant with delta), tool_use, tool_result, error, result
# --------------------------------------------------------------------------------------------

_STATUS_IN_TEXT = re.compile(r'(?:"code"\s*:\s*|API Error: |\((?=\d{3}\)))(\d{3})\b')


def apply_gemini(event: dict[str, Any], s: StreamSummary) -> None:
    kind = event.get("type")
    if kind == "init":
        s.session_id = str(event.get("session_id") or s.session_id)
        s.model = str(event.get("model") or s.model)
    elif kind == "message" and event.get("role") == "assistant":
        text = str(event.get("content") or "")
        if event.get("delta"):
            s.answer.append(text)
        else:
            s.response = text
    elif kind == "tool_use":
        s.tools.called(str(event.get("tool_name") or ""))
        s.response = ""
    elif kind == "tool_result":
        if event.get("status") not in (None, "success"):
            s.tools.error_count += 1
    elif kind == "error" and event.get("severity") not in ("warning", "info"):
        s.error = str(event.get("message") or s.error)
    elif kind == "result":
        s.finished = True
        stats = event.get("stats") or {}
        s.tokens = Tokens(
            input=as_int(stats.get("input_tokens")),
            output=as_int(stats.get("output_tokens")),
            cached=as_int(stats.get("cached")),
            total=as_int(stats.get("total_tokens")),
        )
        if event.get("status") != "success":
            error = event.get("error") or {}
            s.error = (
                str(error.get("message") or "gemini reported an error")
                if isinstance(error, dict)
                else str(error)
            )
            s.error_kind = str(error.get("type") or "") if isinstance(error, dict) else ""
            found = _STATUS_IN_TEXT.search(s.error)
            s.error_status = int(found.group(1)) if found else None
