"""A CLI that floods its stream: the run log stops taking its events at a size, says so, and its
end record is still written where every reader finds it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.runtime.oneshot import listing, runlog

EVENT = '{"type":"message","role":"assistant","content":"x","delta":true}'


def test_a_flood_of_events_is_cut_and_the_end_is_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runlog, "EVENTS_CAP", 20_000)
    monkeypatch.setattr(runlog, "RUN_LOG_CAP", 40_000)  # the readers' cap, scaled down with it
    path = runlog.new_log_path(tmp_path, "flood-1", datetime.now())
    log = runlog.RunLog(path, Redactor())
    log.write("start", prompt="hi", agent="gemini", parent_id=None)
    log.write("attempt", n=1, agent="gemini", session_id="flood-1")
    for _ in range(10_000):  # about 1 MB of events
        log.event(1, "gemini", EVENT)
    log.write("attempt_end", n=1, agent="gemini", exit_code=0)
    log.write("end", envelope={"ok": True, "response": "x" * 100, "exit_code": 0})
    log.close()
    assert path.stat().st_size < 22_000
    assert log.events_left_out > 9_000
    records = list(runlog.records(path, events=True))
    kinds = [r["record"] for r in records]
    assert kinds[-2:] == ["attempt_end", "end"] and kinds.count("cut") == 1
    assert "not written" in next(r for r in records if r["record"] == "cut")["what"]
    (node,) = [n for n in listing.nodes(tmp_path) if n.id == "flood-1"]
    assert node.status == "ok", node.status
