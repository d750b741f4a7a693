"""The fields of a supervised session's session.json and what each must hold: a file damaged,
hand-edited or written by another release is refused field by field (runtime/store.py reads it).
Pure."""

from __future__ import annotations

import math
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


def mark_of(value: Any) -> tuple[float, int] | None:
    """``inbox_mark`` as (ts, n): the n-th send of that ts in the inbox is the newest one handled."""
    if not (isinstance(value, list) and len(value) == 2):
        return None
    ts, n = value
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        return None
    return (float(ts), n) if _is_int(n) and n >= 0 else None


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


def drop_damaged(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` less the fields a hand-edited or older file may get wrong without the session
    being refused: each is rebuilt or falls back to its default."""
    values = dict(values)
    for name in ("processes", "leftovers"):
        value = values.get(name)
        if name in values and not (isinstance(value, list) and all(isinstance(r, dict) for r in value)):
            del values[name]
    if "options" in values and not isinstance(values["options"], dict):
        del values["options"]  # resume falls back to the defaults and the flags given
    if "token_models" in values and not (
        isinstance(values["token_models"], dict)
        and all(
            isinstance(f, dict) and all(field_problem("tokens", c) == "" for c in f.values())
            for f in values["token_models"].values()
        )
    ):
        del values["token_models"]  # read again from the transcripts
    if "cli_release" in values and not isinstance(values["cli_release"], dict):
        del values["cli_release"]  # asked again at every start
    if values.get("inbox_mark") is not None and mark_of(values["inbox_mark"]) is None:
        del values["inbox_mark"]  # not known: the inbox's sends so far are history
    return values
