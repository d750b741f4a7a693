"""Reading reset times from usage-limit banners (waaah_agent.core.limits)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from waaah_agent.core.limits import PAST_GRACE, is_limit_text, parse_reset, wait_until

BERLIN = ZoneInfo("Europe/Berlin")
DUBLIN = ZoneInfo("Europe/Dublin")
NEW_YORK = ZoneInfo("America/New_York")
UTC = timezone.utc
# A Saturday afternoon in Berlin, the day before the spring DST change (29 March 2026, 02:00).
NOW = datetime(2026, 3, 28, 16, 0, tzinfo=BERLIN)


def at(year: int, month: int, day: int, hour: int, minute: int, tz: ZoneInfo | timezone = BERLIN) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=tz)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Clock times: the next occurrence after now, in the default zone.
        ("5-hour limit reached ∙ resets 3am", at(2026, 3, 29, 3, 0)),
        ("resets 3:30pm", at(2026, 3, 29, 15, 30)),
        ("resets 5:30pm", at(2026, 3, 28, 17, 30)),
        ("resets at 15:00", at(2026, 3, 29, 15, 0)),
        ("resets at 23:59", at(2026, 3, 28, 23, 59)),
        ("resets 12am", at(2026, 3, 29, 0, 0)),
        ("resets 12pm", at(2026, 3, 29, 12, 0)),
        ("Weekly limit reached · resets 9 p.m.", at(2026, 3, 28, 21, 0)),
        ("resets tomorrow at 9am", at(2026, 3, 29, 9, 0)),
        # Stated zones.
        ("You've hit your limit · resets 11pm (Europe/Dublin)", at(2026, 3, 28, 23, 0, tz=DUBLIN)),
        ("You've hit your limit · resets 3pm (America/New_York)", at(2026, 3, 28, 15, 0, tz=NEW_YORK)),
        ("resets 10am (America/New_York)", at(2026, 3, 29, 10, 0, tz=NEW_YORK)),
        ("resets 3pm (UTC)", at(2026, 3, 28, 15, 0, tz=UTC)),
        ("resets 8pm UTC", at(2026, 3, 28, 20, 0, tz=UTC)),
        ("resets 3pm (UTC+2)", at(2026, 3, 29, 15, 0, tz=timezone(timedelta(hours=2)))),
        ("Access resets at 3:45 PM PST.", at(2026, 3, 28, 15, 45, tz=timezone(timedelta(hours=-8)))),
        # Durations.
        ("try again in 2 days 17 hours 14 minutes", NOW + timedelta(days=2, hours=17, minutes=14)),
        ("in 45 minutes", NOW + timedelta(minutes=45)),
        ("try again in 30s", NOW + timedelta(seconds=30)),
        ("Limit reached, resets in 1h 5m", NOW + timedelta(hours=1, minutes=5)),
        ("retry in 1h5m", NOW + timedelta(hours=1, minutes=5)),
        ("try again in 1 hour and 5 minutes", NOW + timedelta(hours=1, minutes=5)),
        ("Please retry in 23.5s.", NOW + timedelta(seconds=23.5)),
        ("Please retry in 850ms", NOW + timedelta(milliseconds=850)),
        ('"retryDelay": "23s"', NOW + timedelta(seconds=23)),
        ("Retry-After: 30", NOW + timedelta(seconds=30)),
        # Dates.
        ("resets Nov 23, 3am", at(2026, 11, 23, 3, 0)),
        ("resets Mar 28, 5pm", at(2026, 3, 28, 17, 0)),
        ("resets Jan 2, 3am", at(2027, 1, 2, 3, 0)),
        ("resets 23 Nov 03:00", at(2026, 11, 23, 3, 0)),
        ("try again at Nov 23rd, 2026 3:15 PM", at(2026, 11, 23, 15, 15)),
        ("resets Monday, April 6 at 9am (Europe/Dublin)", at(2026, 4, 6, 9, 0, tz=DUBLIN)),
        ("resets on 2026-11-23 03:00", at(2026, 11, 23, 3, 0)),
        ("reset at 2026-11-23T03:00:00Z", at(2026, 11, 23, 3, 0, tz=UTC)),
        ("resets 2026-11-23T03:00:00.123+01:00", at(2026, 11, 23, 3, 0, tz=timezone(timedelta(hours=1)))),
        ("available again on 2026-04-01", at(2026, 4, 1, 0, 0)),
        # Unix times (claude's older transcript form and JSON fields).
        ("Claude AI usage limit reached|1749924000", datetime.fromtimestamp(1749924000, tz=UTC)),
        ('{"resetsAt": 1800000000}', datetime.fromtimestamp(1800000000, tz=UTC)),
    ],
)
def test_parse_reset(text: str, expected: datetime) -> None:
    got = parse_reset(text, NOW, BERLIN)
    assert got is not None
    assert got.tzinfo is not None
    assert got == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "5-hour limit reached",
        "resets soon",
        "resets 25:00",
        "resets 13pm",
        "resets 3",
        "resets on 2026-02-30",
        "We rate limit requests in 45 minutes windows",
        "this was 3 days ago",
        '{"timestamp":"2026-11-23T03:00:00Z","type":"assistant","text":"limit reached"}',
        "Claude AI usage limit reached|12345",
    ],
)
def test_parse_reset_none(text: str) -> None:
    assert parse_reset(text, NOW, BERLIN) is None


def test_past_clock_time_means_tomorrow() -> None:
    four_am = at(2026, 6, 10, 4, 0)
    assert parse_reset("resets 3am", four_am, BERLIN) == at(2026, 6, 11, 3, 0)


def test_clock_time_just_passed_counts_as_reached() -> None:
    now = at(2026, 6, 10, 15, 2)
    assert parse_reset("resets 3pm", now, BERLIN) == at(2026, 6, 10, 15, 0)
    later = at(2026, 6, 10, 15, 0) + PAST_GRACE + timedelta(seconds=1)
    assert parse_reset("resets 3pm", later, BERLIN) == at(2026, 6, 11, 15, 0)


def test_dst_spring_forward_keeps_wall_clock() -> None:
    # "3am" on the DST night: 03:00 CEST is only 23 real hours after 03:00 CET the day before.
    got = parse_reset("resets 3am", NOW, BERLIN)
    assert got is not None
    assert got.utcoffset() == timedelta(hours=2)
    assert got.astimezone(UTC) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_dst_fall_back() -> None:
    now = datetime(2026, 10, 24, 12, 0, tzinfo=BERLIN)  # the day before clocks go back
    got = parse_reset("resets 9am", now, BERLIN)
    assert got is not None
    assert got.astimezone(UTC) == datetime(2026, 10, 25, 8, 0, tzinfo=UTC)


def test_named_zone_differs_from_default() -> None:
    # 16:00 in Berlin is 15:00 in Dublin: "resets 4pm (Europe/Dublin)" is an hour away.
    got = parse_reset("You've hit your limit · resets 4pm (Europe/Dublin)", NOW, BERLIN)
    assert got is not None
    assert got - NOW == timedelta(hours=1)


def test_unknown_zone_falls_back_to_default() -> None:
    assert parse_reset("resets 3am (Mars/Olympus)", NOW, BERLIN) == at(2026, 3, 29, 3, 0)


def test_now_in_other_zone() -> None:
    now_utc = NOW.astimezone(UTC)
    assert parse_reset("resets 5pm", now_utc, BERLIN) == at(2026, 3, 28, 17, 0)


def test_transcript_line_in_json() -> None:
    line = (
        '{"timestamp":"2026-03-28T15:00:00.000Z","type":"assistant","message":{"content":'
        '[{"type":"text","text":"You\'ve hit your limit · resets 9pm (Europe/Dublin)"}]}}'
    )
    assert parse_reset(line, NOW, BERLIN) == at(2026, 3, 28, 21, 0, tz=DUBLIN)


def test_wait_until_parsed_adds_margin() -> None:
    deadline, how = wait_until("5-hour limit reached ∙ resets 3am", NOW, BERLIN)
    assert deadline == at(2026, 3, 29, 3, 1)
    assert how.startswith("parsed: ")


def test_wait_until_custom_margin() -> None:
    deadline, _ = wait_until("try again in 10 minutes", NOW, BERLIN, margin=timedelta(0))
    assert deadline == NOW + timedelta(minutes=10)


def test_wait_until_default_for_unknown_format() -> None:
    deadline, how = wait_until("Usage limit reached for all Pro models.", NOW, BERLIN)
    assert deadline == NOW + timedelta(minutes=30)
    assert how.startswith("default: ")
    deadline, _ = wait_until("???", NOW, BERLIN, default=timedelta(minutes=5))
    assert deadline == NOW + timedelta(minutes=5)


def test_wait_until_caps() -> None:
    deadline, how = wait_until("resets on 2027-01-01 00:00", NOW, BERLIN)
    assert deadline == NOW + timedelta(days=7)
    assert how.startswith("parsed: ") and "capped" in how
    deadline, _ = wait_until("try again in 3 days", NOW, BERLIN, cap=timedelta(days=1))
    assert deadline == NOW + timedelta(days=1)
    deadline, _ = wait_until("x", NOW, BERLIN, default=timedelta(days=9))
    assert deadline == NOW + timedelta(days=7)


def test_wait_until_past_reset_is_now() -> None:
    deadline, how = wait_until("resets on 2026-03-01 00:00", NOW, BERLIN)
    assert deadline == NOW
    assert "already past" in how


@pytest.mark.parametrize(
    "line",
    [
        "5-hour limit reached ∙ resets 3am",
        "You've hit your limit · resets 3pm (Europe/Dublin)",
        "You’ve hit your usage limit. Upgrade to Pro or try again in 2 days 17 hours 14 minutes.",
        "Claude AI usage limit reached|1749924000",
        "Weekly limit reached · resets Nov 23, 3am",
        "Opus limit reached ∙ resets 9pm",
        "Usage limit reached for all Pro models.",
        "You have exhausted your daily quota on this model.",
        "Quota exceeded for quota metric 'Generate Content API requests per minute'",
        "Please retry in 23.5s.",
        "API Error: Request rejected (429) · This request would exceed your account's rate limit.",
        '{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}',
        "Limit reached, resets in 1h 5m",
    ],
)
def test_is_limit_text(line: str) -> None:
    assert is_limit_text(line)


@pytest.mark.parametrize(
    "line",
    [
        "",
        "The API has a rate limit of 100 requests per minute.",
        "src/client.py:42: # handle rate limit errors with backoff",
        "grep -r 'rate limit' docs/",
        "limit = 10",
        "I reset the counter at 3pm.",
    ],
)
def test_is_not_limit_text(line: str) -> None:
    assert not is_limit_text(line)


def test_codex_s_reset_is_read_from_its_session_file():
    """`rate_limits` as codex 0.171.0 wrote them (x-codex-* headers of a refused answer)."""
    from waaah_agent.adapters.codex.transcript import codex_resets_at

    now = datetime(2026, 11, 26, 13, 39, tzinfo=timezone.utc)
    reset = int(now.timestamp()) + 7200

    def record(primary: float, secondary: float, reset_at: int = reset) -> str:
        windows = {
            "primary": {"used_percent": primary, "window_minutes": 300, "resets_at": reset_at},
            "secondary": {"used_percent": secondary, "window_minutes": 10080, "resets_at": reset_at + 86400},
        }
        payload = {"type": "token_count", "info": None, "rate_limits": {"limit_id": "codex", **windows}}
        return json.dumps({"type": "event_msg", "payload": payload})

    empty = json.dumps(
        {"type": "event_msg", "payload": {"type": "token_count", "rate_limits": {"primary": None}}}
    )
    assert codex_resets_at([empty, record(100.0, 40.0)], now) == now + timedelta(hours=2)
    assert codex_resets_at([record(100.0, 100.0)], now) == now + timedelta(days=1, hours=2)  # both spent
    assert codex_resets_at([record(100.0, 40.0), empty], now) is None  # the newest says nothing spent
    assert codex_resets_at([record(80.0, 40.0)], now) is None
    assert codex_resets_at([record(100.0, 40.0, int(now.timestamp()) - 60)], now) is None  # already reset
    assert codex_resets_at(["not json", '{"rate_limits": 1}'], now) is None
