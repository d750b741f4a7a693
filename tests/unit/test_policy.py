"""The supervisor's decisions with a fake clock: restarts, nudges, stalls."""

from __future__ import annotations

from dataclasses import replace

from waaah_agent.core.supervise.backoff import BackoffConfig, Restarts
from waaah_agent.core.supervise.detect import AgentState
from waaah_agent.core.supervise.policy import Now, Nudger, PolicyConfig, StallWatch, fingerprint


def test_backoff_doubles_with_jitter_up_to_the_cap():
    r = Restarts(BackoffConfig(base=1, cap=60, budget=100, window=10_000))
    delays = []
    t = 0.0
    for _ in range(9):
        r.on_start(t)
        t += 5  # crashes after 5 s every time
        d = r.on_exit(t, rand=0.999)
        assert d.restart
        delays.append(round(d.delay))
        t += d.delay
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    low = Restarts(BackoffConfig(base=8)).on_exit(0, rand=0.0)
    assert low.delay == 4  # half the ceiling at the least


def test_a_stable_run_resets_the_backoff():
    r = Restarts(BackoffConfig(base=1, stable=600, budget=100, window=10_000))
    for t in (0, 10, 20):
        r.on_start(t)
        r.on_exit(t + 1, rand=0.999)
    r.on_start(100)
    assert round(r.on_exit(100 + 601, rand=0.999).delay) == 1


def test_budget_per_window_then_give_up_then_allowed_again_later():
    r = Restarts(BackoffConfig(budget=5, window=1800))
    t = 0.0
    for _ in range(5):
        r.on_start(t)
        t += 10
        assert r.on_exit(t, 0.5).restart
    r.on_start(t)
    stop = r.on_exit(t + 10, 0.5)
    assert not stop.restart and "5 restarts in the last 30 minutes" in stop.reason
    r.on_start(3000)
    assert r.on_exit(3000 + 10, 0.5).restart  # the window moved on


def ready(t: float, **kw: object) -> Now:
    base = Now(
        time=t,
        state=AgentState.READY,
        input_empty=True,
        wait_in_flight=False,
        last_activity=t,
        last_user_input=None,
        workflow_delivered=True,
        delivering=False,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_loop_left_gets_one_continue_then_spaced_nudges():
    n = Nudger(PolicyConfig(settle=2, continue_gap=10, heartbeat=120))
    n.turn_ended(100)
    assert n.decide(ready(101, last_activity=100)) is None  # not settled yet
    assert n.decide(ready(102, last_activity=100)) == "continue"
    assert n.decide(ready(103, last_activity=100)) is None  # no fresh turn: no second prompt
    n.turn_ended(110)  # the agent answered and ended its turn again
    assert n.decide(ready(111, last_activity=110)) is None  # within the gap (10 s since the nudge at 102)
    assert n.decide(ready(115, last_activity=110)) == "continue"
    n.turn_ended(120)
    assert n.decide(ready(130, last_activity=120)) is None  # gap doubled to 20
    assert n.decide(ready(136, last_activity=120)) == "continue"


def test_wait_for_prompt_resets_the_spacing():
    n = Nudger(PolicyConfig(settle=0, continue_gap=10))
    for t in (0, 10, 30, 70):
        n.turn_ended(t)
        assert n.decide(ready(t + 1, last_activity=t)) == "continue"
    assert n.gap == 80
    n.saw_wait()
    assert n.gap == 10


def test_never_types_when_it_must_not():
    n = Nudger(PolicyConfig(settle=0))
    n.turn_ended(0)
    t = 1000.0
    assert n.decide(ready(t, last_activity=0, state=AgentState.BUSY)) is None
    assert n.decide(ready(t, last_activity=0, input_empty=False)) is None  # a human's draft
    assert n.decide(ready(t, last_activity=0, wait_in_flight=True)) is None
    assert n.decide(ready(t, last_activity=0, last_user_input=t - 5)) is None
    assert n.decide(ready(t, last_activity=0, state=AgentState.DIALOG)) is None  # never answer y/n
    assert n.decide(ready(t, last_activity=0, workflow_delivered=False)) is None
    assert n.decide(ready(t, last_activity=0, delivering=True)) is None


def test_silence_at_the_prompt_gets_a_heartbeat_every_interval():
    n = Nudger(PolicyConfig(heartbeat=120, settle=2))
    assert n.decide(ready(50, last_activity=0)) is None  # no turn ended, not idle long enough
    assert n.decide(ready(120, last_activity=0)) == "heartbeat"
    assert n.decide(ready(200, last_activity=0)) is None
    assert n.decide(ready(240, last_activity=0)) == "heartbeat"
    assert 241 < n.next_check(ready(241, last_activity=0)) <= 360  # a wake-up hint, never late


def test_a_whole_night_of_an_agent_that_keeps_leaving_the_loop():
    """8 hours; the agent ends its turn 5 s after every prompt: nudges thin out to the cap."""
    cfg = PolicyConfig(settle=2, continue_gap=10, continue_gap_max=600, heartbeat=120)
    n = Nudger(cfg)
    t, last_activity, nudges = 0.0, 0.0, []
    n.turn_ended(0)
    while t < 8 * 3600:
        kind = n.decide(ready(t, last_activity=last_activity))
        if kind:
            nudges.append((t, kind))
            last_activity = t + 5  # it answers, then ends its turn
            n.turn_ended(t + 5)
        t += 1
    gaps = [b[0] - a[0] for a, b in zip(nudges, nudges[1:], strict=False)]
    assert max(gaps) <= 601
    assert len(nudges) < 80  # about one every 10 minutes once backed off, not a flood


def test_stall_esc_then_restart_and_only_while_progress_is_expected():
    s = StallWatch(PolicyConfig(stall_timeout=900, stall_grace=30))
    screen = "⠋ Thinking... (esc to cancel, 12s)"
    assert s.observe(0, True, screen) is None
    assert s.next_verdict() == 900
    assert s.observe(899, True, screen.replace("12", "911")) is None
    assert s.observe(900, True, screen) == "esc"
    assert s.next_verdict() == 930
    assert s.observe(920, True, screen) is None
    assert s.observe(931, True, screen) == "restart"
    w = StallWatch(PolicyConfig(stall_timeout=900))
    assert w.observe(0, False, "tool box") is None
    assert w.observe(5000, False, "tool box") is None  # not expected to move (a wait, a dialog)
    assert w.next_verdict() is None
    assert w.observe(5001, True, "tool box") is None  # expected from now on: the clock starts here
    assert w.observe(5900, True, "tool box") is None
    w.saw_activity(5900)  # an MCP call or a hook: alive
    assert w.observe(6799, True, "tool box") is None
    assert w.observe(6800, True, "tool box") == "esc"
    assert fingerprint("⠙ 1s") == fingerprint("⠹ 2s")
