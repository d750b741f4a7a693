"""The names of the records in events.jsonl are one enum (core/supervise/events.py EventKind),
kept as the plain strings in the files and in every comparison."""

from __future__ import annotations

import json

from tests.unit.night import whole_night
from waaah_agent.core.supervise import events as ev
from waaah_agent.core.supervise.events import EventKind
from waaah_agent.core.supervise.vitals import Snapshot, Vitals
from waaah_agent.runtime.supervise.session.ending import headless_line


def test_a_kind_is_its_plain_string_in_json_in_text_and_in_comparisons() -> None:
    assert json.dumps({"event": EventKind.LIMIT_OVER}) == '{"event": "limit-over"}'
    assert f"{EventKind.NUDGE}" == str(EventKind.NUDGE) == "nudge"
    assert EventKind.MCP_TOOL_END == "mcp-tool_end" and EventKind("mcp-tool_end") is EventKind.MCP_TOOL_END
    assert {EventKind.STATE: 1}.get("state") == 1  # a record read back finds its kind's entry


def test_every_record_of_a_whole_night_is_a_kind_of_the_enum() -> None:
    night = whole_night()
    names = {a.name for _, _, acts in night.log for a in acts if isinstance(a, ev.Record)}
    assert names - {k.value for k in EventKind} == set()
    assert {"state", "delivery", "nudge", "stall", "limit", "stop", "mcp-tool_start"} <= names
    assert all(type(n) is EventKind for n in names)  # never a bare string


def test_records_read_back_from_the_file_are_told_by_their_kind() -> None:
    record = json.loads(
        json.dumps(
            {"ts": "2026-11-26T01:00:00+00:00", "event": EventKind.NUDGE, "kind": "continue", "reason": "x"}
        )
    )
    assert headless_line(record) is not None and "continue prompt (x)" in str(headless_line(record))
    vitals = Vitals(Snapshot("gemini", "orc", "s1"))
    assert vitals.see(record, 0.0) and vitals.snapshot.nudges == (("continue", 1),)
