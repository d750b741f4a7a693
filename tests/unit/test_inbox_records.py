"""The inbox's typed records: what the hook and the proxy write is what the loop reads back,
and a line of any other shape is refused (None), never an exception."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waaah_agent.core.mcp.inbox_records import (
    MAX_TEXT,
    HookRecord,
    TapEvent,
    TapOutcome,
    TapRecord,
    parse,
)
from waaah_agent.runtime.mcp.hook import record_from
from waaah_agent.runtime.mcp.proxy import end_record, start_record

pytestmark = pytest.mark.timeout(60)

START = {
    "ts": 12.5,
    "source": "mcp",
    "event": "tool_start",
    "tool": "wait_for_prompt",
    "call_id": 3,
    "pid": 77,
}
END = START | {"event": "tool_end", "duration_ms": 1234, "outcome": "evict", "evict_action": "SHUTDOWN"}
HOOK = {"ts": 1.0, "source": "hook", "cli": "claude", "hook_event_name": "Stop", "stop_hook_active": False}


def roundtrip(obj: dict[str, Any]) -> Any:
    return parse(json.loads(json.dumps(obj)))


def test_tap_records_parse_into_typed_fields() -> None:
    start = roundtrip(START)
    assert start == TapRecord(12.5, TapEvent.START, "wait_for_prompt", 3, 77)
    end = roundtrip(END)
    assert isinstance(end, TapRecord)
    assert end.event is TapEvent.END and end.outcome is TapOutcome.EVICT and end.evict_action == "SHUTDOWN"
    assert end.duration_ms == 1234 and end.error is None
    assert end.to_json() == END
    assert end.event_fields() == {
        "tool": "wait_for_prompt",
        "call_id": 3,
        "pid": 77,
        "duration_ms": 1234,
        "outcome": "evict",
        "evict_action": "SHUTDOWN",
    }


def test_hook_records_parse_into_typed_fields() -> None:
    hook = roundtrip(HOOK | {"session_id": "s1", "prompt": "do it"})
    assert isinstance(hook, HookRecord)
    assert hook.hook_event_name == "Stop" and hook.stop_hook_active is False and hook.prompt == "do it"
    assert hook.event_fields() == {"session_id": "s1"}
    assert hook.to_json() == HOOK | {"session_id": "s1", "prompt": "do it"}


def test_what_the_writers_write_reads_back_the_same() -> None:
    start = start_record("ack_task", 1, 5.0, 9)
    end = end_record("ack_task", 1, 6.0, 9, 1.0, {"outcome": "ok", "task_id": "t1", "agent_id": "a-2"})
    hook = record_from(
        {"hook_event_name": "UserPromptSubmit", "prompt": "x" * 5000, "extra": 1}, "claude", 3.0
    )
    for record in (start, end, hook):
        assert roundtrip(record.to_json()) == record
    assert hook.prompt == "x" * MAX_TEXT  # cut to a glimpse


def test_the_hook_leaves_out_fields_of_an_unexpected_type() -> None:
    hook = record_from({"hook_event_name": 5, "message": ["a"], "stop_hook_active": "yes"}, "claude", 1.0)
    assert hook == HookRecord(1.0, "claude")
    assert record_from(["not", "a", "dict"], "claude", 1.0) == HookRecord(1.0, "claude")


@pytest.mark.parametrize(
    "obj",
    [
        None,
        "a string",
        ["a", "list"],
        [START],
        42,
        {},
        START | {"source": "other"},
        {k: v for k, v in START.items() if k != "ts"},
        START | {"ts": "12.5"},
        START | {"ts": True},
        START | {"ts": math.nan},
        START | {"ts": 10**400},
        START | {"event": "tool_middle"},
        START | {"event": None},
        START | {"tool": 7},
        START | {"tool": ""},
        START | {"call_id": "3"},
        START | {"call_id": 3.0},
        START | {"pid": None},
        START | {"pid": True},
        END | {"outcome": "maybe"},
        END | {"outcome": 1},
        END | {"duration_ms": "1"},
        END | {"evict_action": {"a": 1}},
        END | {"error": ["x"]},
        HOOK | {"cli": 1},
        HOOK | {"hook_event_name": ["Stop"]},
        HOOK | {"stop_hook_active": "true"},
        HOOK | {"message": 3},
    ],
)
def test_wrong_shapes_are_refused(obj: Any) -> None:
    assert parse(obj) is None


def test_huge_strings_are_cut_not_refused() -> None:
    huge = "y" * 10_000_000
    tap = parse(END | {"error": huge, "tool": huge})
    assert isinstance(tap, TapRecord) and len(tap.error or "") == MAX_TEXT and len(tap.tool) == MAX_TEXT
    hook = parse(HOOK | {"message": huge})
    assert isinstance(hook, HookRecord) and len(hook.message or "") == MAX_TEXT


SOME = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
KEYS = st.sampled_from(sorted({*END, *HOOK, "error", "task_id", "agent_id", "message", "prompt", "x"}))


@SOME
@given(st.sampled_from([START, END, HOOK]), st.dictionaries(KEYS, JSON, max_size=3))
def test_parse_never_raises_and_what_it_accepts_is_typed(
    base: dict[str, Any], changes: dict[str, Any]
) -> None:
    record = parse(base | changes)
    if record is None:
        return
    assert isinstance(record.ts, float)
    if isinstance(record, TapRecord):
        assert isinstance(record.event, TapEvent) and isinstance(record.call_id, int)
        assert record.outcome is None or isinstance(record.outcome, TapOutcome)
    assert parse(json.loads(json.dumps(record.to_json()))) == record


@SOME
@given(JSON)
def test_parse_takes_any_json_value(obj: Any) -> None:
    parse(obj)


def test_the_mark_of_the_sends_counts_those_that_share_a_ts_and_never_goes_back() -> None:
    from waaah_agent.core.mcp.inbox_records import NO_SENDS, marks_of, next_mark

    assert marks_of([1.0, 2.0, 2.0, 3.0, 2.0]) == [(1.0, 1), (2.0, 1), (2.0, 2), (3.0, 1), (2.0, 3)]
    mark = next_mark(None, 2.0)
    assert mark == (2.0, 1) and next_mark(mark, 2.0) == (2.0, 2)
    assert next_mark((3.0, 1), 2.5) == (3.0, 1)  # a send written late: the mark stays
    assert next_mark(NO_SENDS, 0.5) == (0.5, 1)
