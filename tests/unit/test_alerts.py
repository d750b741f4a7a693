"""Which events become alerts, and how a bad night is kept from sending hundreds (pure)."""

from __future__ import annotations

from waaah_agent.core.night.alerts import Alert, RateLimit, Where, alert_for

WHERE = Where("gemini", "gemini-20261125-010203-abcdef", "/home/me/ws", "waaah agent --start=gemini --resume")


def test_each_moment_that_needs_the_user_is_an_alert_with_where_and_how_to_resume():
    cases = {
        "gave-up": {"event": "end", "reason": "gave-up", "detail": "5 restarts in 30 minutes"},
        "login": {"event": "login-wait"},
        "limit": {"event": "limit", "until": "2026-11-25T03:00:00+00:00"},
        "limit-over": {"event": "limit-over"},
        "evicted": {"event": "stop", "reason": "evict", "detail": "SHUTDOWN: end of the night"},
        "stall": {"event": "stall", "action": "esc", "minutes": 15},
    }
    for kind, event in cases.items():
        alert = alert_for(event, WHERE)
        assert alert is not None and alert.kind == kind, event
        assert "/home/me/ws" in alert.body and "waaah agent --start=gemini --resume" in alert.body
    for quiet in (
        {"event": "state", "state": "busy"},
        {"event": "end", "reason": "user"},
        {"event": "nudge"},
    ):
        assert alert_for(quiet, WHERE) is None


def test_a_bad_night_sends_a_dozen_at_most_and_says_what_it_held_back():
    limit = RateLimit()
    stall = Alert("stall", "t", "b")
    sent = [a for i in range(600) if (a := limit.admit(stall, i * 6.0)) is not None]  # one every 6 s, an hour
    assert len(sent) == 6  # one of a kind per 10 minutes
    assert "held back" in sent[1].body and "held back" not in sent[0].body
    limit = RateLimit()
    kinds = [Alert(f"k{i}", "t", "b") for i in range(40)]
    assert len([a for i, k in enumerate(kinds) if limit.admit(k, float(i))]) == 12  # a dozen an hour
    final = Alert("gave-up", "t", "b", "failure")
    assert limit.admit(final, 41.0) is not None  # the end of a session always goes
