"""The `waaah run` envelope as callers of the older wrappers read it (pure).

Those callers read, on every path, ``response``, ``session_id``, ``reasoning`` (a string, ""
when there is none), ``tokens_used`` (seven numbers, never null), ``metadata`` (four flags, and
``tool_activity`` when a tool ran), ``model_resolution``, ``skill`` on a skill run; on an error
also ``error``, ``error_type`` (one of the eight of core/failures.py), ``exit_code`` and
``recoverable``. The project's own fields (``tokens``, ``tool_activity``, ``attempts``, ...)
stay beside them. A plain answer that is one markdown code fence loses the fence.
"""

from __future__ import annotations

import re
from typing import Any

from waaah_agent.core import failures as F
from waaah_agent.core.oneshot.streams import EDIT_TOOLS, SHELL_TOOLS, Tokens, ToolActivity, tool_names

#: ``reasoning`` is cut to this many characters.
REASONING_CAP = 600
#: Characters per token of ``tokens_used.estimated_output_tokens`` (the older wrappers' rule).
CHARS_PER_TOKEN = 4
#: ``stderr``: the CLI's last lines, at most this many, each cut to STDERR_LINE_CAP characters.
STDERR_LINES = 20
STDERR_LINE_CAP = 500
#: ``metadata.reasoning_source`` for each source of ours: the CLI's JSON stream is its raw output,
#: its session file holds the assistant's messages.
REASONING_SOURCES = {"stream": "raw_output", "session_file": "session_assistant"}
#: ``metadata`` of every error envelope, as the older wrappers wrote it.
ERROR_METADATA: dict[str, Any] = {
    "token_usage_available": False,
    "reasoning_available": False,
    "reasoning_source": "none",
    "reasoning_absent_reason": "error_path",
}

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
_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def estimated_output_tokens(response: str) -> int:
    """The answer's length in characters / 4, rounded down, at least 1 for any answer: an
    estimate from the text alone, also when the CLI reports the real count (``output_tokens``),
    which adds what the model spent thinking and calling tools."""
    return max(1, len(response) // CHARS_PER_TOKEN) if response else 0


def tokens_used(tokens: Tokens, response: str = "") -> dict[str, Any]:
    """``tokens`` under the older wrappers' names, every one a number. ``input_tokens`` is
    ``tokens.input`` (what the CLI sent fresh: claude's excludes cache reads, the others'
    include them), ``total_tokens`` is ``tokens.total``; ``cost_usd`` and
    ``cache_creation_input_tokens`` are 0 where the CLI does not report them (``tokens`` omits
    its cost then)."""
    return {
        "input_tokens": tokens.input,
        "output_tokens": tokens.output,
        "estimated_output_tokens": estimated_output_tokens(response),
        "total_tokens": tokens.total,
        "cost_usd": float(tokens.cost_usd or 0.0),
        "cache_read_input_tokens": tokens.cached,
        "cache_creation_input_tokens": tokens.cache_write or 0,
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


def tool_metadata(tools: ToolActivity, agent: str = "") -> dict[str, Any] | None:
    """``metadata.tool_activity``, or None when no tool ran. ``result_classes`` lists the
    classes seen (each once, in the order first seen), ``class_counts`` counts the calls of
    each; ``activity_class`` is ``tool_errors`` (a call failed), ``write_active`` (a call
    wrote), ``tool_active`` or ``none``; ``source`` is ``wrapper:<cli>``."""
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
        "result_classes": list(classes),
        "activity_class": activity,
        "source": f"wrapper:{agent}" if agent else "wrapper",
        "class_counts": classes,
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


def metadata(tokens: Tokens, reasoning: str, source: str, activity: dict[str, Any] | None) -> dict[str, Any]:
    """``metadata`` of an answer: whether the CLI reported tokens and the model's reasoning,
    where the reasoning came from (``raw_output``: the CLI's stream, ``session_assistant``: its
    session file, ``none``) or why there is none (``model_not_emitted``), the tools' activity."""
    meta: dict[str, Any] = {
        "token_usage_available": bool(tokens.total or tokens.input or tokens.output),
        "reasoning_available": bool(reasoning),
        "reasoning_source": REASONING_SOURCES.get(source, "raw_output") if reasoning else "none",
        "reasoning_absent_reason": "available" if reasoning else "model_not_emitted",
    }
    if activity is not None:
        meta["tool_activity"] = activity
    return meta


def add_fields(
    envelope: dict[str, Any],
    tokens: Tokens,
    tools: ToolActivity,
    reasoning: str,
    source: str,
    agent: str = "",
) -> None:
    """The fields of an answer: ``response`` unfenced, ``reasoning`` (compacted, "" when none),
    ``tokens_used``, ``metadata``; ``reasoning_source`` (ours: ``stream`` or ``session_file``)
    when there is reasoning."""
    response = envelope.get("response")
    response = strip_fence(response) if isinstance(response, str) else ""
    thought = compact_reasoning(reasoning) if reasoning.strip() else ""
    envelope["response"] = response
    envelope["reasoning"] = thought
    envelope["tokens_used"] = tokens_used(tokens, response)
    envelope["metadata"] = metadata(tokens, thought, source, tool_metadata(tools, agent))
    if thought:
        envelope["reasoning_source"] = source


def add_error(envelope: dict[str, Any], kind: F.ErrorType, error: str, exit_code: int) -> None:
    """The fields of an error: no answer, no reasoning, every token figure of ``tokens_used`` 0
    (``tokens`` keeps what the attempts spent), the fixed error ``metadata``; ``error_type`` is
    one of the eight older types and ``error_kind`` the precise one."""
    envelope.update(
        ok=False,
        response="",
        reasoning="",
        tokens_used=tokens_used(Tokens()),
        metadata=dict(ERROR_METADATA),
        error=error,
        error_type=F.legacy_type(kind),
        error_kind=str(kind),
        exit_code=exit_code,
        recoverable=F.is_recoverable(kind),
    )
    envelope.pop("reasoning_source", None)


def failure_envelope(
    kind: F.ErrorType,
    error: str,
    exit_code: int,
    *,
    version: int,
    agent: str = "",
    model: str | None = None,
    skill: str | None = None,
) -> dict[str, Any]:
    """The whole envelope of a run that failed before any CLI started (bad input, an unknown
    session, a log folder that cannot be made, Ctrl+C while it was set up)."""
    envelope: dict[str, Any] = {
        "version": version,
        "ok": False,
        "response": "",
        "session_id": "",
        "reasoning": "",
        "tokens_used": {},
        "metadata": {},
        "model_resolution": "",
        **({"skill": skill} if skill else {}),
        "agent": agent,
        "model": model or "",
        "parent_id": None,
        "log_id": None,
        "log_path": None,
        "duration_ms": 0,
        "tokens": Tokens().to_json(),
        "tool_activity": ToolActivity().to_json(),
        "attempts": [],
        "fallback_chain": [],
        "used_fallback": False,
        "max_attempts": 0,
        "circuit_state": "none",
        "stderr": "",
    }
    add_error(envelope, kind, error, exit_code)
    return envelope


def stderr_tail(text: str, lines: int = STDERR_LINES) -> str:
    """The last ``lines`` non-blank lines of a CLI's stderr, escape sequences and other control
    characters taken out, each line cut to STDERR_LINE_CAP characters."""
    kept: list[str] = []
    for line in reversed(text.splitlines()):
        line = _CONTROL.sub("", _CSI.sub("", line)).rstrip()
        if line.strip():
            kept.append(line if len(line) <= STDERR_LINE_CAP else line[: STDERR_LINE_CAP - 3] + "...")
            if len(kept) == lines:
                break
    return "\n".join(reversed(kept))
