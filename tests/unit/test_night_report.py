"""The night's picture from its events (pure): stretches, shares, tasks, nudges, restarts, tokens."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.doubles.scripted_night import EVENING, EXPECTED, SCRIPT, SESSION
from waaah_agent.core.night.report import duration, read_night, summary_lines
from waaah_agent.core.prices import parse


def scripted() -> list[dict]:
    return [
        {"event": name, "t": (EVENING + timedelta(minutes=m)).timestamp(), **fields}
        for m, name, fields in SCRIPT
    ]


def test_the_scripted_night_reads_as_it_went():
    night = read_night([(SESSION, scripted(), (EVENING + timedelta(hours=8)).timestamp())])
    assert night.end - night.start == 8 * 3600
    seconds = night.seconds()
    assert round(seconds["usage limit"] / 60) == EXPECTED["limited_minutes"]
    assert abs(sum(night.shares().values()) - 1) < 1e-9
    assert seconds["in the loop"] > seconds["working"] > seconds["idle"] > 0
    assert [(t.task_id, t.outcome) for t in night.tasks] == [("task-1", "answered"), ("task-2", "blocked")]
    assert [n.answered for n in night.nudges] == [True, False, True]
    assert [(r.after, r.t) for r in night.restarts] == [
        ("exit code 1", (EVENING + timedelta(minutes=201)).timestamp())
    ]
    assert night.tokens[-1][1:] == (EXPECTED["tokens_in"], EXPECTED["tokens_out"])
    kinds = [m.kind for m in night.markers]
    assert kinds.count("nudge") == 3 and "restart" in kinds and "Esc on a stall" in kinds
    assert "usage-limit wait" in kinds
    restarting = [s for s in night.stretches if s.kind == "restarting"]
    assert len(restarting) == 1 and restarting[0].seconds == 60


def test_stretches_tile_the_night_without_gaps_or_overlaps():
    night = read_night([(SESSION, scripted(), None)])
    for before, after in zip(night.stretches, night.stretches[1:], strict=False):
        assert before.end == after.start and before.kind != after.kind


def test_a_task_cut_off_by_a_restart_or_the_end_is_unfinished():
    events = [
        {"event": "start", "t": 0},
        {"event": "mcp-tool_end", "tool": "wait_for_prompt", "outcome": "task", "task_id": "a", "t": 10},
        {"event": "restart", "after": "killed", "t": 20},
        {"event": "start", "t": 21},
        {"event": "mcp-tool_end", "tool": "wait_for_prompt", "outcome": "task", "task_id": "b", "t": 30},
    ]
    night = read_night([("s", events, None)])
    assert [(t.task_id, t.outcome, t.end) for t in night.tasks] == [
        ("a", "unfinished", 21),
        ("b", "unfinished", None),
    ]


def test_tasks_the_session_link_kept_or_brought_back_are_said_and_marked():
    events = [
        {"event": "start", "t": 0},
        {"event": "task-kept", "task_id": "task-7", "t": 10},
        {"event": "start", "t": 12},
        {"event": "mcp-tool_end", "tool": "wait_for_prompt", "outcome": "task", "task_id": "task-7", "t": 20},
        {"event": "task-recovered", "task_id": "task-8", "t": 60},
        {"event": "evict-dropped", "action": "RESTART", "t": 70},
    ]
    night = read_night([("s", events, None)])
    assert [(k.what, k.t) for k in night.kept] == [("task-7", 10), ("task-8", 60)]
    marked = [(m.kind, m.cause) for m in night.markers]
    assert ("task kept through a restart", "task-7") in marked and ("task brought back", "task-8") in marked
    assert ("EVICT RESTART served by the restart", "it came while the agent was being restarted") in marked
    text = "\n".join(summary_lines(night, lambda t: f"t{t:g}"))
    assert "tasks the session kept or brought back: 2" in text
    assert "t10  task-7  came while the agent was restarting: kept for it" in text
    assert "t60  task-8  reserved for the agent on the server but never sent: brought back" in text
    assert "tasks served: 1" in text


def test_prompts_that_needed_another_paste_or_enter_are_counted_and_marked():
    """A workflow left unsent in the box shows the night as idle: the report says why."""
    delivery = [
        ("workflow", "pasted"),
        ("workflow", "paste never appeared in the input box: pasting again in 5 s"),
        ("workflow", "pasted again (1)"),
        ("workflow", "enter"),
        ("workflow", "enter re-sent (1)"),
        ("workflow", "confirmed"),
        ("continue", "pasted"),
        ("continue", "enter"),
        ("continue", "confirmed"),
        ("send", 7),  # an odd note is no retry
    ]
    events = [{"event": "start", "t": 0}] + [
        {"event": "delivery", "kind": kind, "phase": "x", "note": note, "t": 10 + i}
        for i, (kind, note) in enumerate(delivery)
    ]
    night = read_night([("s", events, None)])
    assert night.count("typed again") == 2
    assert [(m.kind, m.cause, m.t) for m in night.markers] == [
        ("prompt typed again", "workflow: pasted again (1)", 12),
        ("prompt typed again", "workflow: enter re-sent (1)", 14),
    ]
    text = "\n".join(summary_lines(night, str))
    assert "prompts typed again: 2 (a paste the agent never showed, or an Enter it dropped)" in text
    assert "prompts typed again" not in "\n".join(summary_lines(read_night([("s", events[:2], None)]), str))


def test_odd_events_are_skipped_and_an_empty_session_is_none():
    night = read_night([("s", [{"event": "state"}, {"t": "x"}], None), ("t", [], None)])
    assert night.sessions == [] and summary_lines(night, str) == ["no events in the sessions asked for"]
    night = read_night([("s", [{"event": "state", "state": "weird", "t": 1}, {"event": "x", "t": 5}], None)])
    assert [(s.kind, s.seconds) for s in night.stretches] == [("idle", 4)]


def test_summary_and_durations():
    night = read_night([(SESSION, scripted(), None)])
    text = "\n".join(summary_lines(night, lambda t: datetime.fromtimestamp(t).strftime("%H:%M")))
    assert "tasks served: 2" in text and "nudges: 3 (2 answered" in text and "restarts: 1" in text
    assert "tokens: 300,000 in, 8,000 out" in text and "usage limit" in text
    assert (duration(40), duration(725), duration(8 * 3600 + 60)) == ("40s", "12m 05s", "8h 01m")


def test_each_tokens_event_is_its_session_s_total_and_sessions_add_up():
    """A session's events hold its totals so far (whatever transcript file they name, or none):
    the night's are the sum of each session's latest, never a file counted twice."""
    one = [
        {"event": "start", "t": 0},
        {"event": "tokens", "source": "a.jsonl", "input": 100, "output": 10, "t": 10},
        {"event": "tokens", "input": 150, "output": 15, "t": 20},  # the budget's quiet read: no source
        {"event": "tokens", "source": "b.jsonl", "input": 200, "output": 20, "t": 30},  # a second file
    ]
    two = [{"event": "start", "t": 5}, {"event": "tokens", "input": 1000, "output": 1, "t": 25}]
    night = read_night([("one", one, None), ("two", two, None)])
    assert night.tokens == [(10, 100, 10), (20, 150, 15), (25, 1150, 16), (30, 1200, 21)]
    assert night.costs == []  # no price table


def test_with_a_price_table_the_night_has_its_cost_over_time():
    night = read_night(
        [(SESSION, scripted(), None)], parse('["gemini-*"]\ninput = 1.25\ncached = 0.31\noutput = 10.0\n')
    )
    assert [round(usd, 4) for _, usd in night.costs] == [0.184, 0.3355, 0.361]
    text = "\n".join(summary_lines(night, str))
    assert f"cost: {EXPECTED['cost']} at your price table's prices" in text
    unpriced = read_night([(SESSION, scripted(), None)], parse('["other"]\ninput = 2.0\noutput = 20.0\n'))
    assert unpriced.unpriced == ["gemini-2.5-pro"] and "gemini-2.5-pro at its highest prices" in "\n".join(
        summary_lines(unpriced, str)
    )


def test_totals_written_without_models_are_charged_at_the_highest_prices_and_said():
    events = [{"event": "start", "t": 0}, {"event": "tokens", "input": 2_000_000, "output": 500_000, "t": 10}]
    night = read_night(
        [("old", events, None)], parse('["a"]\ninput = 1.0\noutput = 2.0\n["b"]\ninput = 3.0\noutput = 4.0\n')
    )
    assert night.costs == [(10, 8.0)] and night.unpriced == ["(unknown model)"]


def test_odd_per_model_counts_in_tokens_events_never_break_the_report():
    prices = parse('["m"]\ninput = 1.0\noutput = 1.0\n')
    for models in ("x", [1], {"m": "x"}, {"m": {"input": "lots", "output": None}}, {"m": {"input": 1e30}}):
        events = [
            {"event": "start", "t": 0},
            {"event": "tokens", "input": 10, "output": 2, "models": models, "t": 5},
        ]
        night = read_night([("s", events, None)], prices)
        assert night.tokens == [(5, 10, 2)] and len(night.costs) == 1 and night.costs[0][1] >= 0
