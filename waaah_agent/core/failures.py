"""What went wrong with one headless CLI run, from its exit code, stderr and JSON stream.

Only the CLI's own error report counts (the stream's error fields, stderr, the exit code): a model
that merely writes "rate limit" in its answer has not failed. Each class says whether trying again
can help (``recoverable``) and what the run loop does with it (see core/resilience.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, tzinfo

from waaah_agent.core.kinds import StrEnum
from waaah_agent.core.limits import parse_reset
from waaah_agent.core.streams import StreamSummary


class ErrorType(StrEnum):
    """The error types of the `waaah run` envelope (``error_type``, an attempt's ``outcome``)."""

    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    AUTH = "auth"
    INVALID_MODEL = "invalid_model"
    INVALID_SESSION = "invalid_session"
    CRASH = "crash"
    TRANSIENT = "transient"
    INVALID_INPUT = "invalid_input"
    INTERRUPTED = "interrupted"


TIMEOUT = ErrorType.TIMEOUT
RATE_LIMIT = ErrorType.RATE_LIMIT
AUTH = ErrorType.AUTH
INVALID_MODEL = ErrorType.INVALID_MODEL
INVALID_SESSION = ErrorType.INVALID_SESSION
CRASH = ErrorType.CRASH
TRANSIENT = ErrorType.TRANSIENT
INVALID_INPUT = ErrorType.INVALID_INPUT
INTERRUPTED = ErrorType.INTERRUPTED

RECOVERABLE: dict[ErrorType, bool] = {
    TIMEOUT: True,
    RATE_LIMIT: True,
    TRANSIENT: True,
    CRASH: True,
    INTERRUPTED: True,
}

_AUTH = re.compile(
    r"(?i)not logged in|please run /login|failed to authenticate|authentication_error|unauthenticated|"
    r"invalid (?:x-)?api[ _-]?key|api key not valid|must specify the \w+_API_KEY|invalid auth method|"
    r"set an auth method|permission_denied|oauth token (?:has )?expired|incorrect api key|"
    r"missing environment variable:\W*\w*(?:key|token)\b"
)
_RATE = re.compile(
    r"(?i)rate[ _-]?limit|resource_exhausted|exhausted your (?:daily )?quota|quota exceeded|usage limit|"
    r"too many requests|hit your limit|limit reached"
)
_MODEL = re.compile(
    r"(?i)issue with the selected model|model\S* (?:\S+ )?(?:was )?not found|modelnotfound|unknown model|"
    r"model (?:\S+ )?(?:does not|doesn't) exist|unrecognized_model|invalid model"
)
_SESSION = re.compile(
    r"(?i)no conversation found with session|invalid session identifier|error resuming session|"
    r"session id \S+ (?:already exists|is already in use)|session not found"
)
_INPUT = re.compile(
    r"(?i)unknown (?:option|argument)s?|unknown arguments|invalid (?:option|argument|value)|"
    r"prompt is too long|input is too long|context (?:length|window) exceeded|invalid_request_error|"
    r"not enough arguments|missing required argument"
)
_TRANSIENT = re.compile(
    r"(?i)overloaded|server[- ]side issue|internal (?:server )?error|service unavailable|bad gateway|"
    r"gateway timeout|econnreset|econnrefused|etimedout|socket hang up|fetch failed|network error|"
    r"connection (?:error|reset|refused)|api_error|HTTP 5\d\d|API Error: 5\d\d|"
    r"experiencing high demand|temporary errors?\b"
)


@dataclass(frozen=True)
class Failure:
    type: ErrorType
    message: str
    recoverable: bool
    exit_code: int | None  # the CLI's, None when it was stopped (timeout, interrupt)
    reset_at: datetime | None = None  # a rate limit's parsed reset time


def classify(
    exit_code: int | None,
    stderr: str,
    summary: StreamSummary,
    *,
    timed_out: bool = False,
    now: datetime | None = None,
    tz: tzinfo | None = None,
) -> Failure | None:
    """None when the run answered; else the failure's class and a one-line message."""
    if timed_out:
        return Failure(TIMEOUT, "the CLI did not finish within the time left", True, None)
    cli_error = summary.error.strip()
    if exit_code == 0 and not cli_error:
        return None
    tail = _tail(stderr)
    evidence = f"{cli_error}\n{tail}"
    status = summary.error_status
    message = _first_line(cli_error) or _first_line(tail) or f"the CLI exited with code {exit_code}"

    def failure(kind: ErrorType, reset: datetime | None = None) -> Failure:
        return Failure(kind, message, RECOVERABLE.get(kind, False), exit_code, reset)

    kind = summary.error_kind.lower()
    if (
        status in (401, 403)
        or kind in ("authentication_failed", "authentication_error")
        or _AUTH.search(evidence)
    ):
        return failure(AUTH)
    if status == 429 or kind in ("rate_limit", "rate_limit_error") or _RATE.search(evidence):
        reset = parse_reset(evidence, now, tz) if now is not None and tz is not None else None
        return failure(RATE_LIMIT, reset)
    if _MODEL.search(evidence) or (status == 404 and "model" in evidence.lower()):
        return failure(INVALID_MODEL)
    if _SESSION.search(evidence):
        return failure(INVALID_SESSION)
    if _INPUT.search(evidence) or status in (400, 413) or exit_code == 2:
        return failure(INVALID_INPUT)
    if (status is not None and (status >= 500 or status == 408)) or _TRANSIENT.search(evidence):
        return failure(TRANSIENT)
    if status == 404:
        return failure(INVALID_MODEL)
    if exit_code is not None and (exit_code < 0 or exit_code > 128) and not cli_error:
        return Failure(CRASH, f"the CLI died ({_signal_text(exit_code)})", True, exit_code)
    return failure(CRASH)


def _tail(stderr: str, limit: int = 4000) -> str:
    return stderr[-limit:]


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return ""


def _signal_text(code: int) -> str:
    signum = -code if code < 0 else code - 128
    return f"signal {signum}"
