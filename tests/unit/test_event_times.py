"""events.jsonl times: ISO-8601 with milliseconds and the offset; old epoch floats still read."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from waaah_agent.runtime.night.report import _when
from waaah_agent.runtime.store import SessionDir, event_epoch, event_time

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$")


def test_events_are_stamped_with_iso_milliseconds_and_offset(tmp_path: Path) -> None:
    session = SessionDir(tmp_path, "s-1")
    session.event("state", state="ready")
    record = json.loads(session.events_file.read_text())
    assert ISO_MS.match(record["ts"]), record["ts"]
    assert abs(event_epoch(record["ts"]) - datetime.now().timestamp()) < 5  # type: ignore[operator]


def test_old_float_and_new_iso_times_both_read() -> None:
    assert event_epoch(1700000000.25) == 1700000000.25
    assert (
        event_epoch("2026-11-22T01:02:03.456+01:00")
        == datetime.fromisoformat("2026-11-22T00:02:03.456+00:00").timestamp()
    )
    naive = event_time("2026-11-22T01:02:03.456")  # no offset: taken as local time
    assert naive is not None and naive.tzinfo is not None
    for bad in (None, True, "noon", float("nan"), 10**400, [], {}):
        assert event_time(bad) is None
    # In the year 10000 or 0 once in UTC: no local time, so no time at all.
    for out_of_range in ("9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+14:00"):
        assert event_time(out_of_range) is None and event_epoch(out_of_range) is None
    assert _when(1700000000.0) == datetime.fromtimestamp(1700000000.0).astimezone().isoformat(
        timespec="seconds"
    )
    assert _when("2026-11-22T01:02:03.456+01:00") == "2026-11-22T01:02:03+01:00"
    assert _when("noon") == ""


def test_observers_see_each_event_masked(tmp_path: Path) -> None:
    from waaah_agent.core.secrets.redact import Redactor

    session = SessionDir(tmp_path, "s-2")
    session.redact = Redactor(["hunter2-secret-value"])
    seen: list[dict] = []
    session.observers.append(seen.append)
    session.event("server", detail="key hunter2-secret-value refused")
    assert seen and seen[0]["event"] == "server" and "hunter2-secret-value" not in json.dumps(seen)
