"""core/vitals.py: a session's events folded into what /healthz, /readyz and /metrics say."""

from __future__ import annotations

from datetime import datetime, timezone

from waaah_agent.core.supervise.vitals import (
    AGENT_STATES,
    METRICS,
    Snapshot,
    Vitals,
    families,
    liveness,
    readiness,
)

NOW = 1_800_000_000.0


def fold(*events: dict, start: Snapshot | None = None) -> Vitals:
    vitals = Vitals(start or Snapshot("gemini", "waaah-orc", "s1"))
    for n, event in enumerate(events):
        vitals.see(event, NOW + n)
    return vitals


def sample(vitals: Vitals, name: str, now: float = NOW + 100, **labels: str) -> float | None:
    for family in families(vitals.snapshot, now):
        if family.name != name:
            continue
        for values, value in family.samples:
            named = dict(zip(family.labels, values, strict=True))
            if all(named.get(k) == v for k, v in labels.items()):
                return value
    return None


WAIT_START = {"event": "mcp-tool_start", "tool": "wait_for_prompt", "call_id": 1, "pid": 9}
WAIT_TASK = {"event": "mcp-tool_end", "tool": "wait_for_prompt", "call_id": 1, "outcome": "task"}


def test_ready_only_in_the_loop_waiting_or_working():
    v = fold({"event": "start"}, {"event": "state", "state": "ready"})
    assert readiness(v.snapshot, NOW) == (False, {"ready": False, "reason": "starting", "state": "ready"})
    v.see(WAIT_START, NOW)
    v.see({"event": "state", "state": "tool"}, NOW)
    assert readiness(v.snapshot, NOW) == (True, {"ready": True, "state": "waiting"})
    v.see(WAIT_TASK, NOW)
    v.see({"event": "state", "state": "busy"}, NOW)
    assert readiness(v.snapshot, NOW) == (True, {"ready": True, "state": "working"})
    v.see({"event": "state", "state": "ready"}, NOW)
    assert readiness(v.snapshot, NOW)[1]["reason"] == "out of its loop"
    assert sample(v, "waaah_tasks_total") == 1


def test_every_reason_not_to_be_ready_is_one_line_of_json():
    looped = fold({"event": "start"}, WAIT_START, {"event": "state", "state": "tool"})
    until = "2028-01-15T08:00:00+01:00"
    cases = [
        ({"event": "state", "state": "login"}, {"reason": "login"}),
        ({"event": "limit", "until": until}, {"reason": "usage limit", "until": "2028-01-15T07:00:00+00:00"}),
        ({"event": "server", "ok": False, "detail": "connection refused"}, {"reason": "server down"}),
        ({"event": "control", "command": "pause"}, {"reason": "paused"}),
        ({"event": "restart", "delay": 4.0}, {"reason": "restarting"}),
        ({"event": "state", "state": "exiting"}, {"reason": "stopping"}),
        ({"event": "end", "reason": "signal"}, {"reason": "stopped", "detail": "signal"}),
    ]
    for event, expected in cases:
        v = Vitals(looped.snapshot)
        assert v.see(event, NOW) is True, event
        ok, why = readiness(v.snapshot, NOW)
        assert not ok and why.items() >= expected.items(), (event, why)
    # What ends each one makes it ready again.
    for event, undo in [
        ({"event": "limit", "until": until}, {"event": "limit-over"}),
        ({"event": "server", "ok": False, "detail": "x"}, {"event": "server", "ok": True}),
        ({"event": "control", "command": "pause"}, {"event": "control", "command": "resume"}),
    ]:
        v = Vitals(looped.snapshot)
        v.see(event, NOW)
        v.see(undo, NOW)
        assert readiness(v.snapshot, NOW)[0], (event, undo)


def test_a_limit_in_the_past_no_longer_holds_and_its_gauge_is_zero():
    v = fold({"event": "start"}, WAIT_START, {"event": "state", "state": "tool"})
    v.see({"event": "limit", "until": "2020-01-01T00:00:00+00:00"}, NOW)
    assert readiness(v.snapshot, NOW)[0]
    assert sample(v, "waaah_usage_limit_until_seconds") == 0.0
    future = datetime(2030, 1, 1, tzinfo=timezone.utc)
    v.see({"event": "limit", "until": future.isoformat()}, NOW)
    assert sample(v, "waaah_usage_limit_until_seconds") == future.timestamp()


def test_a_restart_is_counted_and_the_wait_is_alive_without_a_loop():
    v = fold({"event": "start"}, {"event": "restart", "delay": 30.0})
    assert sample(v, "waaah_restarts_total") == 1
    assert sample(v, "waaah_agent_state", state="restarting") == 1
    assert sample(v, "waaah_agent_state", state="starting") == 0
    restart_seen = NOW + 1
    assert liveness(v.snapshot, restart_seen + 20, None)[0]  # the delay runs: no loop to ask
    assert not liveness(v.snapshot, restart_seen + 60, None)[0]  # long past it: not alive
    v.see({"event": "start"}, NOW + 40)
    assert not liveness(v.snapshot, NOW + 40, None)[0]
    assert liveness(v.snapshot, NOW + 40, 0.2)[0]
    assert not liveness(v.snapshot, NOW + 40, 12.0)[0]


def test_counters_gauges_and_labels_follow_the_conventions():
    v = fold(
        {"event": "start"},
        {"event": "nudge", "kind": "continue"},
        {"event": "nudge", "kind": "continue"},
        {"event": "nudge", "kind": "heartbeat"},
        {"event": "tokens", "input": 1200, "output": 34, "cached": 100, "cost_usd": 0.0123},
        WAIT_START,
    )
    assert sample(v, "waaah_nudges_total", kind="continue") == 2
    assert sample(v, "waaah_nudges_total", kind="heartbeat") == 1
    assert sample(v, "waaah_tokens_total", direction="input") == 1200
    assert sample(v, "waaah_tokens_total", direction="output") == 34
    assert sample(v, "waaah_cached_tokens_total") == 100
    assert sample(v, "waaah_cost_usd_total") == 0.0123
    # In flight: the agent is seen waiting now.
    assert sample(v, "waaah_last_wait_timestamp_seconds", now=NOW + 500) == NOW + 500
    v.see({**WAIT_TASK, "outcome": "idle"}, NOW + 600)
    assert sample(v, "waaah_last_wait_timestamp_seconds", now=NOW + 900) == NOW + 600
    for family in families(v.snapshot, NOW):
        assert family.name.startswith("waaah_") and family.name.islower()
        assert family.name.endswith("_total") == (family.kind == "counter"), family.name
        assert family.labels[:3] == ("agent", "workflow", "session")
    states = [
        s
        for s, _ in [
            (x[0][3], x[1])
            for f in families(v.snapshot, NOW)
            if f.name == "waaah_agent_state"
            for x in f.samples
        ]
    ]
    assert states == list(AGENT_STATES)
    assert [m[0] for m in METRICS] == [f.name for f in families(v.snapshot, NOW)]


def test_no_cost_without_prices_and_nothing_made_up_before_a_wait():
    v = fold({"event": "start"}, {"event": "tokens", "input": 5, "output": 1, "cached": 0})
    assert sample(v, "waaah_cost_usd_total") is None
    assert sample(v, "waaah_last_wait_timestamp_seconds") is None


def test_events_that_change_nothing_publish_nothing_and_bad_fields_are_ignored():
    v = fold({"event": "start"})
    assert v.see({"event": "screen"}, NOW) is False
    assert v.see({"event": "state", "state": "no such state"}, NOW) is False
    assert v.see({"event": "limit", "until": "not a time"}, NOW) is False
    assert v.see({"event": "restart", "delay": "soon"}, NOW) is True
    assert v.snapshot.restart_at == NOW
    assert v.see({"event": "tokens", "input": -3, "output": True, "cached": "x"}, NOW) is True
    assert dict(v.snapshot.tokens) == {"input": 0, "output": 0, "cached": 0}


def test_the_docs_table_lists_every_metric_with_its_type():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "crew.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line.split("|")[2].strip() for line in doc.splitlines()
            if line.startswith("| `waaah_")}  # fmt: skip
    assert rows == {name: kind for name, kind, _, _ in METRICS}


def test_a_wait_in_flight_is_waiting_whatever_the_screen_said_last():
    v = fold({"event": "start"}, {"event": "state", "state": "busy"}, WAIT_START)
    assert readiness(v.snapshot, NOW) == (True, {"ready": True, "state": "waiting"})
    v.see(WAIT_TASK, NOW)
    assert readiness(v.snapshot, NOW) == (True, {"ready": True, "state": "working"})
    assert sample(v, "waaah_agent_state", state="busy") == 1
    v.see(WAIT_START, NOW)
    assert sample(v, "waaah_agent_state", state="tool") == 1
    assert sample(v, "waaah_agent_state", state="busy") == 0
