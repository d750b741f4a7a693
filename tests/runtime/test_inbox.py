"""The session inbox hands the loop typed records and skips lines that are not ones."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from waaah_agent.core.mcp.inbox_records import HookRecord, TapEvent, TapRecord
from waaah_agent.runtime.mcp.hook import record_from
from waaah_agent.runtime.mcp.proxy import Inbox as ProxyInbox
from waaah_agent.runtime.mcp.proxy import end_record, start_record
from waaah_agent.runtime.supervise.background import Mailbox
from waaah_agent.runtime.supervise.inbox import Inbox

pytestmark = pytest.mark.timeout(20)


def test_read_new_returns_typed_records_and_skips_bad_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "inbox.jsonl"
    mailbox = Mailbox()
    inbox = Inbox(path, mailbox)
    writer = ProxyInbox(path)
    writer.write(start_record("wait_for_prompt", 1, 1.0, 42))
    with path.open("a", encoding="utf-8") as fh:
        fh.write("not json\n")
        fh.write(json.dumps(["a", "list"]) + "\n")
        fh.write(json.dumps({"ts": 2.0, "source": "mcp", "event": "tool_end", "tool": 5}) + "\n")
        fh.write(json.dumps(record_from({"hook_event_name": "Stop"}, "claude", 3.0).to_json()) + "\n")
    writer.write(end_record("wait_for_prompt", 1, 4.0, 42, 3.0, {"outcome": "idle"}))
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"ts": 5.0, "source": "mc')  # half a line: read once it is whole
    with caplog.at_level(logging.WARNING):
        records = inbox.read_new()
    assert [type(r) for r in records] == [TapRecord, HookRecord, TapRecord]
    first, hook, last = records
    assert isinstance(first, TapRecord) and first.event is TapEvent.START and first.pid == 42
    assert isinstance(hook, HookRecord) and hook.hook_event_name == "Stop"
    assert isinstance(last, TapRecord) and last.outcome == "idle" and last.duration_ms == 3000
    assert sum("malformed inbox line" in r.message for r in caplog.records) == 3
    with path.open("a", encoding="utf-8") as fh:
        fh.write('p", "event": "tool_start", "tool": "ack_task", "call_id": 2, "pid": 42}\n')
    assert [r.tool for r in inbox.read_new() if isinstance(r, TapRecord)] == ["ack_task"]
    assert inbox.read_new() == []
    mailbox.close()


def test_a_stop_right_after_the_start_leaves_nothing_to_print(tmp_path):
    """Ctrl+C then s early in a session printed watchdog's "InotifyEmitter.queue_events() called
    when the thread is inactive" after the session ended: its emitter, stopped between two reads,
    logged from its own thread after our stop returned. Stopped at once, many times over: no
    record of it, and no watchdog thread left running."""
    import logging
    import threading

    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    root = logging.getLogger()
    keep, level = Keep(), root.level
    root.addHandler(keep)
    root.setLevel(logging.DEBUG)
    try:
        for n in range(60):
            path = tmp_path / f"inbox-{n}.jsonl"
            path.write_text("")
            inbox = Inbox(path, Mailbox())
            inbox.start()
            with path.open("a") as fh:
                fh.write('{"source": "hook"}\n')
            inbox.stop()
    finally:
        root.removeHandler(keep)
        root.setLevel(level)
    assert not [r for r in records if "thread is inactive" in r], records
    assert not [
        t for t in threading.enumerate() if "Emitter" in type(t).__name__ or "Observer" in type(t).__name__
    ]


def test_a_rewritten_inbox_hands_out_only_its_new_records(tmp_path: Path) -> None:
    """The same lines in a new file (sed -i), two of them identical (one instant, one command):
    none comes again; the one line the new file adds does, and so does a second copy of a line
    that was handled once."""
    path = tmp_path / "inbox.jsonl"
    mailbox = Mailbox()
    inbox = Inbox(path, mailbox)
    same = json.dumps({"ts": 1.0, "source": "control", "command": "pause"}) + "\n"
    path.write_text(same + same + json.dumps({"ts": 2.0, "source": "control", "command": "stop"}) + "\n")
    assert len(inbox.read_new()) == 3
    new = tmp_path / "inbox.new"
    new.write_text(
        path.read_text() + same + json.dumps({"ts": 3.0, "source": "control", "command": "resume"}) + "\n"
    )
    new.replace(path)
    again = inbox.read_new() + inbox.read_new()
    assert [(r.ts, r.command.value) for r in again] == [(1.0, "pause"), (3.0, "resume")]
    mailbox.close()
