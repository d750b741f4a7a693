"""Control from another shell (`waaah send|pause|resume|stop`), in-process on a fake clock."""

from __future__ import annotations

import pytest

from tests.unit.night import HOUR, Night
from waaah_agent.core.mcp.inbox_records import (
    MAX_PROMPT,
    MAX_QUEUED_CHARS,
    ControlCommand,
    ControlRecord,
    parse,
)
from waaah_agent.core.supervise import events as ev
from waaah_agent.core.supervise.policy import CONTINUE_PROMPT


def control(night: Night, command: ControlCommand, text: str | None = None) -> None:
    night.tell(ControlRecord(night.t, command, text))


def started() -> Night:
    night = Night()
    night.start()
    night.run_until(60)  # the workflow is in, the agent waits in its loop
    assert night.cli.in_wait
    return night


def test_pause_holds_the_nudges_for_hours_and_resume_releases_them():
    night = started()
    control(night, ControlCommand.PAUSE)
    night.cli.loops = False
    night.wait_ends("task")  # works on a task, then ends its turn outside the loop
    night.run_until(3 * HOUR)
    assert night.records("nudge") == [] and night.saved["paused"] is True
    assert [a.text for a in night.actions(ev.Title)][-1].endswith("nudges paused (waaah unpause)")
    night.cli.loops = True  # it takes the next nudge back into its loop
    control(night, ControlCommand.RESUME)
    night.run_until(3 * HOUR + 120)
    nudges = night.records("nudge")
    assert [(n["kind"], n["reason"]) for n in nudges] == [("continue", "nudges resumed (waaah unpause)")]
    assert (
        night.saved["paused"] is False and night.cli.transcript[-1] == CONTINUE_PROMPT and night.cli.in_wait
    )


def test_a_pause_outlives_a_restart_of_the_cli():
    night = started()
    control(night, ControlCommand.PAUSE)
    night.exit(ev_exit())
    night.run_until(120)
    night.cli.loops = False
    night.wait_ends("task")
    night.run_until(2 * HOUR)
    assert night.runs == 2 and night.records("nudge") == []
    # Nor the continue prompt a resumed conversation begins with: it waits for waaah unpause.
    assert [r for r in night.records("delivery") if r["kind"] == "continue"] == []
    assert CONTINUE_PROMPT not in night.cli.transcript
    night.cli.loops = True
    control(night, ControlCommand.RESUME)
    night.run_until(2 * HOUR + 120)
    assert night.cli.transcript.count(CONTINUE_PROMPT) == 1 and night.cli.in_wait


def ev_exit():
    from tests.unit.night import Exit

    return Exit(1)


def test_send_ends_a_wait_with_one_esc_then_types_the_prompt_once():
    night = started()
    control(night, ControlCommand.SEND, "Please summarise what you did today.")
    night.run_until(night.t + 60)
    escs = [a for a in night.actions(ev.Type) if a.data == b"\x1b"]
    assert len(escs) == 1
    assert night.cli.transcript.count("Please summarise what you did today.") == 1
    sent = [r for r in night.records("delivery") if r["kind"] == "send"]
    assert [r["phase"] for r in sent] == ["pasted", "entered", "confirmed"]
    assert night.saved["queued"] == [] and night.cli.in_wait  # typed, then back in its loop


def test_send_waits_for_an_agent_working_on_a_task_and_queues_in_order():
    night = started()
    night.cli.task_for = 600
    night.wait_ends("task")
    control(night, ControlCommand.SEND, "first")
    control(night, ControlCommand.SEND, "second")
    night.run_until(night.t + 300)
    assert "first" not in night.cli.transcript and night.saved["queued"] == ["first", "second"]
    assert not [a for a in night.actions(ev.Type) if a.data == b"\x1b"]  # never interrupts work
    night.run_until(night.t + 600)
    assert [p for p in night.cli.transcript if p in ("first", "second")] == ["first", "second"]
    assert night.saved["queued"] == []


def test_a_send_past_the_queue_limit_is_dropped_with_one_record_and_the_rest_typed_in_order():
    night = started()
    night.cli.task_for = 3 * HOUR
    night.wait_ends("task")  # busy: nothing is typed meanwhile
    for i in range(MAX_QUEUED_CHARS // MAX_PROMPT):
        control(night, ControlCommand.SEND, f"{i:02d}".ljust(MAX_PROMPT, "z"))
    control(night, ControlCommand.SEND, "one more")
    [refused] = [r for r in night.records("control") if "refused" in r]
    assert "4,000,000" in refused["refused"]
    assert night.saved["queued"] == [f"{i:02d}".ljust(MAX_PROMPT, "z") for i in range(40)]
    assert [a for a in night.actions(ev.Enqueue)][-1].text.startswith("39")


def test_stop_saves_and_exits_without_a_restart():
    night = started()
    control(night, ControlCommand.STOP)
    night.run_until(night.t + 30)
    assert night.outcome is not None and night.outcome.reason is ev.StopReason.USER
    assert night.runs == 1


@pytest.mark.parametrize(
    "line",
    [
        {"ts": 1, "source": "control", "command": "reboot"},
        {"ts": 1, "source": "control", "command": "send"},
        {"ts": 1, "source": "control", "command": "send", "text": "  "},
        {"ts": 1, "source": "control", "command": "send", "text": "a\x00b"},
        {"ts": 1, "source": "control", "command": "send", "text": "x" * 100_001},
        {"ts": 1, "source": "control", "command": "pause", "text": "why"},
        {"ts": 1, "source": "control", "command": 3},
        {"source": "control", "command": "stop"},
    ],
)
def test_a_control_line_of_the_wrong_shape_is_ignored(line):
    assert parse(line) is None


def test_control_lines_round_trip():
    for record in (ControlRecord(1.5, ControlCommand.SEND, "hi"), ControlRecord(2.0, ControlCommand.STOP)):
        assert parse(record.to_json()) == record
    assert ControlRecord(1, ControlCommand.SEND, "secret text").event_fields() == {
        "command": "send",
        "chars": 11,
    }


def test_a_spent_token_budget_holds_the_nudges_and_stops_once_the_task_is_done():
    night = started()
    night.cli.task_for = 600
    night.wait_ends("task")  # working on a task
    night.run_until(night.t + 10)
    night.tell(ev.TokensCounted(900, 1000))
    night.run_until(night.t + 10)
    assert night.outcome is None and night.records("budget") == []
    night.tell(ev.TokensCounted(1200, 1000))
    night.run_until(night.t + 300)
    assert night.outcome is None  # the task in hand goes on
    assert night.records("budget") == [{"tokens": 1200, "limit": 1000}]
    night.run_until(night.t + 600)
    assert night.outcome is not None and night.outcome.reason is ev.StopReason.BUDGET
    assert night.records("nudge") == [] and night.runs == 1
    assert "1,200 tokens used" in night.outcome.detail


def test_no_budget_is_no_stop():
    night = started()
    night.tell(ev.TokensCounted(10**9, None))
    night.run_until(night.t + 600)
    assert night.outcome is None
