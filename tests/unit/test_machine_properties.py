"""Properties of the supervisor machine over random event sequences (hypothesis)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.night import BUSY, EVENING, READY, WORKFLOW, Exit
from waaah_agent.core.mcp.inbox_records import HookRecord, TapEvent, TapOutcome, TapRecord
from waaah_agent.core.supervise import events as ev
from waaah_agent.core.supervise.backoff import BackoffConfig, Restarts
from waaah_agent.core.supervise.delivery import ENTER, PASTE_START, Delivery, Phase
from waaah_agent.core.supervise.detect import Reading
from waaah_agent.core.supervise.lifecycle import restart_decision
from waaah_agent.core.supervise.machine import Machine, MachineConfig, Saved
from waaah_agent.core.supervise.policy import PolicyConfig

READINGS = [
    READY,
    replace(READY, input_empty=False, fingerprint="> a draft"),
    BUSY,
    replace(READY, dialog="Allow execution"),
    replace(BUSY, limit="│ Usage limit reached for gemini-2.5-pro. resets 3am"),
    replace(BUSY, limit="You've hit your limit · resets in 2 hours"),
    Reading(login="│ Enter Gemini API Key"),
    Reading(exiting="Agent powering down. Goodbye!"),
    Reading(),
]
KEYS = [b"x", b"hello", b"\x03", b"s", b"c", b"p", b"\r", b"\x1b", b"\x03\x03", b"\x1b[99;5u"]

events = st.one_of(
    st.tuples(st.just("look"), st.sampled_from(range(len(READINGS))), st.floats(0, 400)),
    st.tuples(st.just("keys"), st.sampled_from(KEYS), st.floats(0, 5)),
    st.tuples(
        st.just("tap"),
        st.sampled_from(["tool_start", "tool_end"]),
        st.integers(1, 3),
        st.sampled_from(["idle", "task", "ok", "evict"]),
    ),
    st.tuples(
        st.just("hook"), st.sampled_from(["UserPromptSubmit", "Stop", "Notification"]), st.floats(0, 5)
    ),
    st.tuples(st.just("tick"), st.floats(0, 2000)),
    st.tuples(st.just("server"), st.booleans()),
    st.tuples(st.just("exit"), st.integers(0, 2)),
)


def the_event(raw: tuple) -> tuple[ev.Event, float]:
    """(event, seconds that pass before it)."""
    kind = raw[0]
    if kind == "look":
        return ev.Observed(READINGS[raw[1]], last_output=-1.0), raw[2]
    if kind == "keys":
        return ev.Keys(raw[1]), raw[2]
    if kind == "tap":
        outcome = TapOutcome(raw[3]) if raw[1] == "tool_end" else None
        action = "RESTART" if outcome is TapOutcome.EVICT else None
        return TapRecord(
            0.0, TapEvent(raw[1]), "wait_for_prompt", raw[2], 7, None, outcome, evict_action=action
        ), 0.1
    if kind == "hook":
        return HookRecord(0.0, "claude", raw[1]), raw[2]
    if kind == "tick":
        return ev.Tick(), raw[1]
    if kind == "server":
        return ev.ServerChanged(raw[1], "ok" if raw[1] else "unreachable", "http://127.0.0.1:3456"), 1.0
    return ev.ChildExited(Exit(raw[1])), 0.0


@settings(max_examples=300, deadline=None)
@given(st.lists(events, max_size=120), st.booleans(), st.booleans())
def test_never_types_into_a_busy_agent_a_draft_a_dialog_or_a_limit_and_one_prompt_at_a_time(
    script, delivered, policy
):
    cfg = MachineConfig(
        "gemini", interactive=True, limit_resume_keys=b"\r", policy=PolicyConfig() if policy else None
    )
    first = None if delivered else Delivery("workflow", WORKFLOW)
    m = Machine(cfg, first, Saved(workflow_delivered=delivered), 0.0, strict=True)
    t, in_flight = 0.0, 0
    m.handle(ev.Began(), ev.Instant(t, EVENING))
    for raw in script:
        event, dt = the_event(raw)
        t += dt
        if isinstance(event, ev.Tick) and (due := m.next_due()) is not None:
            t = max(t, due)  # the shell ticks when a deadline is due
        before = (m.limit.deadline, bool(m.reports.waits), m.menu.open, m.delivery and m.delivery.phase)
        actions = m.handle(event, ev.Instant(t, EVENING + timedelta(seconds=t)))
        limited, waiting, menu, phase = before
        for action in actions:
            if isinstance(action, ev.Record) and action.name == "delivery":
                in_flight += {"pasted": 1, "confirmed": -1}.get(action.fields["phase"], 0)
                # given up on, or back to waiting for an empty box (a paste never shown)
                in_flight -= action.fields["phase"] in ("failed", "waiting")
                assert 0 <= in_flight <= 1  # never more than one prompt in flight
            if not isinstance(action, ev.Type) or isinstance(event, ev.Keys):
                continue  # the user's own keys go through as typed
            if action.data.startswith(PASTE_START):
                reading = event.reading if isinstance(event, ev.Observed) else None
                assert reading is not None and reading.ready and reading.input_empty
                assert reading.limit is None and reading.login is None and reading.dialog is None
                assert limited is None and not waiting and not menu and m.ending.stopping is None
            elif action.data == ENTER:
                limit_resume = isinstance(event, ev.Tick) and limited is not None
                assert limit_resume or phase in (Phase.PASTED, Phase.ENTERED)
            else:
                assert action.data == b"\x1b" and m.stalls.watch is not None  # Esc for a stall, nothing else
            if not (isinstance(event, ev.Tick) and action.data == ENTER):
                assert limited is None or m.limit.deadline is None  # nothing typed while limited
        if m.ending.finished:
            break


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.1, 2000), st.sampled_from(["crash", "stalled", "evict-restart", "ok"])),
        max_size=80,
    ),
    st.integers(1, 8),
    st.floats(60, 7200),
)
def test_every_restart_is_within_the_budget(runs, budget, window):
    restarts = Restarts(BackoffConfig(budget=budget, window=window))
    t, granted = 0.0, []
    reasons = {
        "crash": ev.StopReason.AGENT_EXIT,
        "stalled": ev.StopReason.STALLED,
        "evict-restart": ev.StopReason.RESTART,
    }
    for ran, how in runs:
        restarts.on_start(t)
        t += ran
        outcome = ev.Outcome(reasons.get(how, ev.StopReason.AGENT_EXIT), Exit(0 if how == "ok" else 1))
        decision = restart_decision(outcome, restarts, t, 0.5)
        if how == "ok":
            assert decision is None  # the user's own /quit is never restarted
            continue
        assert decision is not None
        if decision.restart:
            granted.append(t)
            assert sum(1 for g in granted if t - g < window) <= budget
            t += decision.delay
