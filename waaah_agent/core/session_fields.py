"""The fields of a supervised session's session.json and what each must hold: a file damaged,
hand-edited or written by another release is refused field by field (runtime/store.py reads it).
Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

REQUIRED = ("id", "agent", "workflow", "workspace", "native_session_id")
_STRINGS = {
    "id", "agent", "workflow", "workspace", "native_session_id", "agent_id", "server_url",
    "status", "created", "updated", "log_path", "cast_path", "first_prompt", "first_task",
    "ended", "end_reason",
}  # fmt: skip
_INTS = {"restarts", "nudges", "supervisor_pid", "agent_pid", "schema"}
_BOOLS = {"workflow_delivered", "workflow_pending", "paused"}
_STRING_LISTS = {"argv", "output_tail", "queued"}
_TIMES = {"limit_until", "next_heartbeat", "server_down_since"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def field_problem(name: str, value: Any) -> str:
    """Why ``value`` cannot be the session field ``name`` ("" when it can)."""
    if name in _STRINGS and not isinstance(value, str):
        return "must be a string"
    if name in _INTS and not (_is_int(value) and value >= 0):
        return "must be a whole number >= 0"
    if name == "exit_code" and not (value is None or _is_int(value)):
        return "must be a whole number or null"
    if name in _BOOLS and not isinstance(value, bool):
        return "must be true or false"
    if name in _STRING_LISTS and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return "must be a list of strings"
    if name == "tokens" and not (
        isinstance(value, dict) and all(isinstance(k, str) and _is_int(v) for k, v in value.items())
    ):
        return "must map names to whole numbers"
    if name == "token_files" and not (
        isinstance(value, dict)
        and all(isinstance(k, str) and field_problem("tokens", v) == "" for k, v in value.items())
    ):
        return "must map transcript paths to token counts"
    if name in _TIMES:
        if not isinstance(value, str):
            return "must be an ISO time or empty"
        if value:
            try:
                when = datetime.fromisoformat(value)
            except ValueError:
                return "must be an ISO time or empty"
            if when.tzinfo is None:
                return "must be an ISO time with its UTC offset"
    return ""
