"""The envelope callers of the older wrappers read, as a JSON schema: on success ``response``,
``session_id``, ``reasoning`` (a string), ``tokens_used`` (seven numbers), ``metadata`` (four
flags, ``tool_activity`` only when a tool ran), ``model_resolution``, ``skill`` on a skill run;
on an error the same with no answer, zero tokens and the fixed metadata, plus ``error``,
``error_type`` (one of eight), ``exit_code`` and ``recoverable`` (true for exactly six of the
eight). `waaah run`'s own fields are allowed beside them, and its resilience fields
(``used_fallback``, ``max_attempts``, ``circuit_state``, ``stderr``) are required on every path.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

ERROR_TYPES = [
    "timeout",
    "quota",
    "rate_limit",
    "invalid_model",
    "invalid_session",
    "invalid_input",
    "provider_error",
    "unknown",
]
RECOVERABLE = ["timeout", "quota", "rate_limit", "invalid_model", "invalid_session", "provider_error"]
TOKEN_FIELDS = [
    "input_tokens",
    "output_tokens",
    "estimated_output_tokens",
    "total_tokens",
    "cost_usd",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
]
_COUNT = {"type": "integer", "minimum": 0}

TOOL_ACTIVITY: dict[str, Any] = {
    "type": "object",
    "required": [
        "call_count",
        "write_count",
        "error_count",
        "tool_names",
        "result_classes",
        "activity_class",
        "source",
    ],
    "properties": {
        "call_count": {"type": "integer", "minimum": 1},
        "write_count": _COUNT,
        "error_count": _COUNT,
        "tool_names": {"type": "array", "items": {"type": "string"}},
        "result_classes": {
            "type": "array",
            "uniqueItems": True,
            "minItems": 1,
            "items": {"enum": ["write", "read", "browser", "web", "shell", "other"]},
        },
        "activity_class": {"enum": ["tool_errors", "write_active", "tool_active", "none"]},
        "source": {"type": "string", "pattern": "^wrapper:(gemini|claude|codex|opencode)$"},
    },
}

TOKENS_USED: dict[str, Any] = {
    "type": "object",
    "required": TOKEN_FIELDS,
    "additionalProperties": False,
    "properties": {
        **{name: _COUNT for name in TOKEN_FIELDS},
        "cost_usd": {"type": "number", "minimum": 0},
    },
}

SUCCESS: dict[str, Any] = {
    "type": "object",
    "required": ["response", "session_id", "reasoning", "tokens_used", "metadata", "model_resolution"],
    "not": {"anyOf": [{"required": ["error"]}, {"required": ["error_type"]}]},
    "properties": {
        "response": {"type": "string"},
        "session_id": {"type": "string", "minLength": 1},
        "reasoning": {"type": "string", "maxLength": 600},
        "tokens_used": TOKENS_USED,
        "metadata": {
            "type": "object",
            "required": [
                "token_usage_available",
                "reasoning_available",
                "reasoning_source",
                "reasoning_absent_reason",
            ],
            "additionalProperties": False,
            "properties": {
                "token_usage_available": {"type": "boolean"},
                "reasoning_available": {"type": "boolean"},
                "reasoning_source": {
                    "enum": ["raw_output", "session_assistant", "response_payload", "stream_log", "none"]
                },
                "reasoning_absent_reason": {"enum": ["available", "model_not_emitted"]},
                "tool_activity": TOOL_ACTIVITY,
            },
            # reasoning_available says whether `reasoning` has text, and where it came from.
            "if": {"properties": {"reasoning_available": {"const": True}}},
            "then": {
                "properties": {
                    "reasoning_absent_reason": {"const": "available"},
                    "reasoning_source": {"not": {"const": "none"}},
                }
            },
            "else": {
                "properties": {
                    "reasoning_absent_reason": {"const": "model_not_emitted"},
                    "reasoning_source": {"const": "none"},
                }
            },
        },
        "model_resolution": {"type": "string"},
        "skill": {"type": "string", "minLength": 1},
    },
}

ERROR: dict[str, Any] = {
    "type": "object",
    "required": [
        "response",
        "session_id",
        "reasoning",
        "tokens_used",
        "metadata",
        "error",
        "error_type",
        "exit_code",
        "recoverable",
    ],
    "properties": {
        "response": {"const": ""},
        "session_id": {"type": "string"},
        "reasoning": {"const": ""},
        "tokens_used": {**TOKENS_USED, "properties": {name: {"const": 0} for name in TOKEN_FIELDS}},
        "metadata": {
            "const": {
                "token_usage_available": False,
                "reasoning_available": False,
                "reasoning_source": "none",
                "reasoning_absent_reason": "error_path",
            }
        },
        "error": {"type": "string", "minLength": 1},
        "error_type": {"enum": ERROR_TYPES},
        "exit_code": {"type": "integer", "minimum": 1},
        "recoverable": {"type": "boolean"},
        "model_resolution": {"type": "string"},
        "skill": {"type": "string", "minLength": 1},
    },
    "if": {"properties": {"error_type": {"enum": RECOVERABLE}}},
    "then": {"properties": {"recoverable": {"const": True}}},
    "else": {"properties": {"recoverable": {"const": False}}},
}

#: What `waaah run` adds on every path (its resilience layer's fields among them).
OURS: dict[str, Any] = {
    "type": "object",
    "required": ["version", "ok", "agent", "tokens", "attempts", "fallback_chain", "exit_code"]
    + ["used_fallback", "max_attempts", "circuit_state", "stderr", "model_resolution"],
    "properties": {
        "used_fallback": {"type": "boolean"},
        "max_attempts": _COUNT,
        "circuit_state": {"enum": ["closed", "open", "half-open", "none"]},
        "stderr": {"type": "string"},
        "error_kind": {"type": "string"},
    },
}

ENVELOPE: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "allOf": [OURS],
    "if": {"required": ["error"]},
    "then": ERROR,
    "else": SUCCESS,
}


def check(envelope: dict[str, Any], ours: bool = True) -> dict[str, Any]:
    """``envelope``, after it was checked against :data:`ENVELOPE` (every problem listed);
    ``ours=False``: the older wrappers' fields only (--reasoning-fallback runs no CLI)."""
    schema = ENVELOPE if ours else {k: v for k, v in ENVELOPE.items() if k != "allOf"}
    validator = jsonschema.Draft202012Validator(schema)
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(envelope)]
    assert not problems, "\n".join(problems)
    return envelope


def refused(stdout: str, error_type: str, exit_code: int, kind: str | None = None) -> dict[str, Any]:
    """The one envelope a failed run printed on stdout: checked, of ``error_type`` (one of the
    eight; ``kind`` the precise one when given) and ``exit_code``, as the process exited."""
    envelope = check(json.loads(stdout))
    assert (envelope["ok"], envelope["error_type"], envelope["exit_code"]) == (False, error_type, exit_code)
    assert envelope["error_kind"] == (kind or error_type), envelope
    return envelope
