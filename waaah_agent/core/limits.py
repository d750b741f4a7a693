"""Usage-limit banners: recognise them and read when the limit resets.

Pure: the caller passes the current time and the zone to read bare clock times in.

Forms read by :func:`parse_reset` (the time always follows a keyword such as ``resets``,
``try again``, ``retry``, ``available`` or ``until``, so a stray timestamp elsewhere on a
transcript line is not taken for the reset):

* a clock time: ``resets 3am``, ``resets 3:30pm``, ``resets at 15:00``, ``Access resets at
  3:45 PM PST``, optionally with a zone: ``resets 3pm (Europe/Dublin)`` (any zoneinfo name),
  ``UTC``/``GMT``/``Z``, ``GMT+1``, ``+01:00`` or a common US abbreviation. The result is the
  next such time after ``now`` in that zone (a time up to :data:`PAST_GRACE` ago counts as
  already reached, so a banner read a little late does not mean a day's wait); ``tomorrow``
  is honoured;
* a date and time: ``resets Nov 23, 3am``, ``try again at Nov 23rd, 2026 3:15 PM``,
  ``resets 23 Nov 03:00``, ``resets on 2026-11-23 03:00``, ISO timestamps
  (``2026-11-23T03:00:00Z``, with or without an offset). Without a year, the next such date
  (from :data:`PAST_GRACE` ago on);
* a duration: ``try again in 2 days 17 hours 14 minutes``, ``in 45 minutes`` (bare only at the
  start of the text), ``in 30s``,
  ``in 1h 5m``, ``Please retry in 23.5s`` / ``in 850ms`` (gemini), ``retryDelay: "23s"``
  (Google RPC RetryInfo), ``Retry-After: 30`` (seconds);
* a Unix time: ``Claude AI usage limit reached|1749924000`` or ``"resetsAt": 1749924000``.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: A stated clock time at most this far in the past is taken as just reached, not as tomorrow's.
PAST_GRACE = timedelta(minutes=10)

_MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1
    )
}
#: Fixed-offset abbreviations that gemini's ``timeZoneName: "short"`` prints for US locales.
_ABBREVIATIONS = {
    "UTC": 0,
    "GMT": 0,
    "Z": 0,
    "EST": -5,
    "EDT": -4,
    "CST": -6,
    "CDT": -5,
    "MST": -7,
    "MDT": -6,
    "PST": -8,
    "PDT": -7,
    "AKST": -9,
    "AKDT": -8,
    "HST": -10,
}
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}

_KEYWORD = r"\b(?:resets?|reset\s+(?:time|at)|try\s+again|retry(?:ing)?|available(?:\s+again)?|until)\b"
_UNIT = (
    r"(?P<unit>days?|d|hours?|hrs?|h|minutes?|mins?|ms|m|seconds?|secs?|s)"
    r"(?![a-z])"
)
_AMOUNT = rf"(?P<num>\d+(?:\.\d+)?)\s*{_UNIT}"
_DURATION = r"\d+(?:\.\d+)?\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|ms|m|seconds?|secs?|s)(?![a-z])"
_DURATIONS = rf"{_DURATION}(?:\s*,?\s*(?:and\s+)?{_DURATION})*"

_RELATIVE = re.compile(
    rf"(?:{_KEYWORD}[:\s]*|^\W*)(?:in|after)\s+(?P<span>{_DURATIONS})(?!\s*(?:ago|before)\b)", re.IGNORECASE
)
_RETRY_DELAY = re.compile(r"\bretryDelay\"?\s*[:=]\s*\"?(?P<num>\d+(?:\.\d+)?)s\b", re.IGNORECASE)
_RETRY_AFTER = re.compile(r"\bretry-after\s*:\s*(?P<num>\d+)\b", re.IGNORECASE)
_EPOCH = re.compile(
    r"(?:limit\s+reached\s*\||\breset(?:s|_?at|sAt)\"?\s*[:=]\s*)(?P<epoch>\d{10})(?!\d)", re.IGNORECASE
)

_TIME = (
    r"(?:(?P<h12>\d{1,2})(?::(?P<m12>\d{2}))?\s*(?P<ampm>[ap])\.?\s?m\b\.?"
    r"|(?P<h24>\d{1,2}):(?P<m24>\d{2})(?::(?P<s24>\d{2})(?:\.\d+)?)?(?![\d:]))"
)
_ZONE = (
    r"(?:\s*\(?\s*(?P<zone>[A-Za-z]+/[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)?"
    r"|(?:UTC|GMT)\s*[+-]\s*\d{1,2}(?::?\d{2})?|[+-]\d{2}:?\d{2}"
    r"|UTC|GMT|Z|[ECMP][SD]T|AK[SD]T|HST)\b\)?)?"
)
_MONTH = r"(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_WEEKDAY = r"(?:(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+)?"
_LEAD = rf"{_KEYWORD}[:\s]*(?:(?:at|on|after)\s+)?"
_ISO = re.compile(
    rf"{_LEAD}(?P<y>\d{{4}})-(?P<mo>\d{{2}})-(?P<d>\d{{2}})"
    rf"(?:[T\s]+{_TIME})?{_ZONE}",
    re.IGNORECASE,
)
_DATED = re.compile(
    rf"{_LEAD}{_WEEKDAY}(?:{_MONTH}\s+{_DAY}|(?P<day2>\d{{1,2}})(?:st|nd|rd|th)?\s+"
    rf"(?P<month2>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?)"
    rf"(?:,?\s+(?P<year>\d{{4}}))?(?:,?\s+(?:at\s+)?{_TIME})?{_ZONE}",
    re.IGNORECASE,
)
_CLOCK = re.compile(rf"{_LEAD}(?P<tomorrow>tomorrow\s+(?:at\s+)?)?{_TIME}{_ZONE}", re.IGNORECASE)

_BANNERS = re.compile(
    r"(?:\b(?:\d+-hour|weekly|daily|opus|sonnet|session|usage|monthly)\s+limit\s+reached"
    r"|\bclaude\s+ai\s+usage\s+limit\s+reached"
    r"|\byou(?:'|’)ve\s+(?:hit|reached)\s+your\s+(?:usage\s+)?limit"
    r"|\blimit\s+reached\b.{0,40}\bresets?\b"
    r"|\busage\s+limit\s+reached\s+for\b"
    r"|\byou\s+have\s+exhausted\s+your\s+(?:daily\s+)?(?:quota|capacity)"
    r"|\bquota\s+exceeded\b"
    r"|\bRESOURCE_EXHAUSTED\b"
    r"|\brate_limit_error\b"
    r"|\bexceed\s+your\s+account's\s+rate\s+limit"
    r"|\bRequest\s+rejected\s+\(429\)"
    r"|\bplease\s+retry\s+in\s+\d)",
    re.IGNORECASE,
)


def is_limit_text(line: str) -> bool:
    """Whether ``line`` has the shape of a usage-limit or quota banner of one of the CLIs.

    Only banner shapes count (``5-hour limit reached ∙ resets 3am``, ``You've hit your limit``,
    ``Usage limit reached for ...``, ``Quota exceeded``, ``Please retry in 23s``, ...): the words
    "rate limit" in ordinary prose do not. Whether the line sits where the CLI shows its errors
    is for the caller to judge."""
    return _BANNERS.search(line) is not None


def _zone(name: str | None, default_tz: tzinfo) -> tzinfo:
    if not name:
        return default_tz
    name = name.strip()
    upper = re.sub(r"\s+", "", name.upper())
    if upper in _ABBREVIATIONS:
        return timezone(timedelta(hours=_ABBREVIATIONS[upper]))
    offset = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?", upper)
    if offset:
        sign = -1 if offset.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=int(offset.group(2)), minutes=int(offset.group(3) or 0)))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return default_tz


def _clock(match: re.Match[str]) -> time | None:
    """The clock time of a ``_TIME`` group, or None when there is none or it is impossible."""
    if match.group("h12"):
        hour, minute = int(match.group("h12")), int(match.group("m12") or 0)
        if not 1 <= hour <= 12 or minute > 59:
            return None
        hour = hour % 12 + (12 if match.group("ampm").lower() == "p" else 0)
        return time(hour, minute)
    if match.group("h24"):
        hour, minute, second = int(match.group("h24")), int(match.group("m24")), int(match.group("s24") or 0)
        if hour > 23 or minute > 59 or second > 59:
            return None
        return time(hour, minute, second)
    return None


def _at(day: date, clock: time, zone: tzinfo) -> datetime:
    return datetime.combine(day, clock, tzinfo=zone)


def _duration(span: str) -> timedelta:
    seconds = 0.0
    for part in re.finditer(_AMOUNT, span, re.IGNORECASE):
        unit = part.group("unit").lower()
        key = "ms" if unit == "ms" else unit[0]
        seconds += float(part.group("num")) * _UNIT_SECONDS[key]
    return timedelta(seconds=seconds)


def _from_iso(match: re.Match[str], default_tz: tzinfo) -> datetime | None:
    zone = _zone(match.group("zone"), default_tz)
    try:
        day = date(int(match.group("y")), int(match.group("mo")), int(match.group("d")))
    except ValueError:
        return None
    clock = _clock(match) if (match.group("h12") or match.group("h24")) else time(0, 0)
    return None if clock is None else _at(day, clock, zone)


def _from_dated(match: re.Match[str], now: datetime, default_tz: tzinfo) -> datetime | None:
    zone = _zone(match.group("zone"), default_tz)
    month = _MONTHS[(match.group("month") or match.group("month2")).lower()[:3]]
    day_of_month = int(match.group("day") or match.group("day2"))
    has_clock = bool(match.group("h12") or match.group("h24"))
    clock = _clock(match) if has_clock else time(0, 0)
    if clock is None:
        return None
    local_now = now.astimezone(zone)
    years = [int(match.group("year"))] if match.group("year") else [local_now.year + d for d in (-1, 0, 1)]
    candidates = []
    for year in years:
        try:
            candidates.append(_at(date(year, month, day_of_month), clock, zone))
        except ValueError:
            continue
    upcoming = [c for c in candidates if c >= now - PAST_GRACE]
    if upcoming:
        return min(upcoming)
    return max(candidates) if candidates else None


def _from_clock(match: re.Match[str], now: datetime, default_tz: tzinfo) -> datetime | None:
    zone = _zone(match.group("zone"), default_tz)
    clock = _clock(match)
    if clock is None:
        return None
    today = now.astimezone(zone).date()
    if match.group("tomorrow"):
        return _at(today + timedelta(days=1), clock, zone)
    candidate = _at(today, clock, zone)
    if candidate < now - PAST_GRACE:
        candidate = _at(today + timedelta(days=1), clock, zone)
    return candidate


def parse_reset(text: str, now: datetime, default_tz: tzinfo) -> datetime | None:
    """When the limit stated in ``text`` resets, as an aware datetime; None if it states none.

    ``now`` must be aware; bare clock times are read in ``default_tz`` unless a zone is given.
    See the module docstring for the forms understood."""
    epoch = _EPOCH.search(text)
    if epoch:
        return datetime.fromtimestamp(int(epoch.group("epoch")), tz=timezone.utc).astimezone(default_tz)
    relative = _RELATIVE.search(text)
    if relative:
        return now + _duration(relative.group("span"))
    for pattern in (_RETRY_DELAY, _RETRY_AFTER):
        found = pattern.search(text)
        if found:
            return now + timedelta(seconds=float(found.group("num")))
    iso = _ISO.search(text)
    if iso:
        result = _from_iso(iso, default_tz)
        if result is not None:
            return result
    dated = _DATED.search(text)
    if dated:
        result = _from_dated(dated, now, default_tz)
        if result is not None:
            return result
    for clock in _CLOCK.finditer(text):
        result = _from_clock(clock, now, default_tz)
        if result is not None:
            return result
    return None


def wait_until(
    text: str,
    now: datetime,
    default_tz: tzinfo,
    default: timedelta = timedelta(minutes=30),
    margin: timedelta = timedelta(seconds=60),
    cap: timedelta = timedelta(days=7),
) -> tuple[datetime, str]:
    """When to try again after the limit banner ``text``, and how that was derived.

    The stated reset plus ``margin`` ("parsed: ..."), or ``now + default`` when ``text`` states
    no reset ("default: ..."); never before ``now`` and never after ``now + cap``."""
    reset = parse_reset(text, now, default_tz)
    if reset is None:
        deadline = min(now + default, now + cap)
        return deadline, f"default: no reset time stated; waiting {_human(deadline - now)}"
    deadline = reset + margin
    note = f"parsed: resets {reset.isoformat()}, plus {_human(margin)} margin"
    if deadline > now + cap:
        return now + cap, f"{note}; capped at {_human(cap)}"
    if deadline < now:
        return now, f"{note}; already past"
    return deadline, note


def _human(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")) if n]
    return " ".join(parts) or "0s"
