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
from waaah_agent.core.oneshot.streams import StreamSummary
from waaah_agent.core.printable import one_line


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
    BUDGET = "budget"  # --max-tokens / --max-cost of the run spent: no more attempts
    QUOTA = "quota"  # a usage quota or plan limit is spent (hours or a day), not a short rate limit
    PROVIDER_ERROR = "provider_error"  # the model provider's own 5xx / overload the CLI gave up on
    UNKNOWN = "unknown"  # the CLI reported a failure that no other class explains


TIMEOUT = ErrorType.TIMEOUT
RATE_LIMIT = ErrorType.RATE_LIMIT
AUTH = ErrorType.AUTH
INVALID_MODEL = ErrorType.INVALID_MODEL
INVALID_SESSION = ErrorType.INVALID_SESSION
CRASH = ErrorType.CRASH
TRANSIENT = ErrorType.TRANSIENT
INVALID_INPUT = ErrorType.INVALID_INPUT
INTERRUPTED = ErrorType.INTERRUPTED
BUDGET = ErrorType.BUDGET
QUOTA = ErrorType.QUOTA
PROVIDER_ERROR = ErrorType.PROVIDER_ERROR
UNKNOWN = ErrorType.UNKNOWN

#: The eight error types of the older wrappers' envelope (``error_type``), which their callers
#: read; each precise type maps to one of them (``error_kind`` keeps the precise one).
LEGACY_TYPES = (
    "timeout",
    "quota",
    "rate_limit",
    "invalid_model",
    "invalid_session",
    "invalid_input",
    "provider_error",
    "unknown",
)
#: The precise types the eight do not name: auth, crash and transient are the provider's side
#: failing (another CLI has its own login, install and network path: a fallback is worth it);
#: interrupted (Ctrl+C, SIGTERM: whoever stopped the run decides) and budget (the run's own
#: --max-tokens / --max-cost: a retry spends more) are not worth retrying.
LEGACY: dict[ErrorType, str] = {
    AUTH: "provider_error",
    CRASH: "provider_error",
    TRANSIENT: "provider_error",
    INTERRUPTED: "unknown",
    BUDGET: "unknown",
}
#: The older wrappers' ``recoverable``: a retry or a fallback is appropriate.
LEGACY_RECOVERABLE = frozenset(
    {"timeout", "quota", "rate_limit", "invalid_model", "invalid_session", "provider_error"}
)


def legacy_type(kind: ErrorType) -> str:
    """The one of :data:`LEGACY_TYPES` that ``kind`` is reported as in ``error_type``."""
    return LEGACY.get(kind, str(kind))


def is_recoverable(kind: ErrorType) -> bool:
    """Whether a caller should retry or fall back after ``kind`` (the older wrappers' table)."""
    return legacy_type(kind) in LEGACY_RECOVERABLE


RECOVERABLE: dict[ErrorType, bool] = {kind: is_recoverable(kind) for kind in ErrorType}

#: What the CLIs say when a login or key is missing or refused: claude's "Not logged in" and
#: "OAuth token has expired", gemini's FatalAuthenticationError ("Manual authorization is
#: required ..." when "Sign in with Google" was chosen and nobody can answer), "Error
#: authenticating", IneligibleTierError / ProjectIdRequiredError / "Account validation required"
#: of its Code Assist login, codex's 401 and "Missing environment variable" and its expired or
#: revoked login ("log in again"), opencode's ProviderAuthError, the APIs' invalid-key errors.
_AUTH = re.compile(
    r"(?i)not logged in|please run /login|failed to authenticate|authentication_error|unauthenticated|"
    r"invalid (?:x-)?api[ _-]?key|api key not valid|must specify the \w+_API_KEY|invalid auth method|"
    r"set an auth method|permission_denied|oauth token (?:has )?expired|incorrect api key|"
    r"missing environment variable:\W*\w*(?:key|token)\b|FatalAuthenticationError|error authenticating|"
    r"manual authorization is required|IneligibleTierError|ProjectIdRequiredError|"
    r"account validation required|ProviderAuthError|(?:please )?(?:log|sign) ?in again|"
    r"refresh token (?:was|has been|is) (?:revoked|expired|invalid)|token could not be refreshed"
)
_RATE = re.compile(
    r"(?i)rate[ _-]?limit|resource_exhausted|exhausted your (?:daily )?quota|quota exceeded|usage limit|"
    r"too many requests|hit your limit|limit reached"
)
#: A usage quota or plan limit (reset in hours or days), as the CLIs word it: gemini's
#: TerminalQuotaError ("You have exhausted your daily quota", "Quota exceeded for quota metric
#: ... per day"), claude's "You've hit your usage limit / session limit / weekly limit / monthly
#: spend limit" and "out of usage credits", codex's "You've hit your usage limit", the OpenAI
#: API's insufficient_quota. (claude's bare "You've hit your limit · resets 3pm" stays a rate limit.)
_QUOTA = re.compile(
    r"(?i)exhausted your (?:daily |monthly )?quota|quota exceeded[^\n]*per ?day|insufficient_quota|"
    r"usage limit|(?:5|five)-hour limit|session limit|weekly limit|daily limit|monthly (?:spend )?limit|"
    r"spend limit|plan limit|exceeded your current quota|out of (?:usage )?credits|credit balance is too low"
)
#: The model provider's own server failure or overload (rather than the network to it).
_PROVIDER = re.compile(
    r"(?i)overloaded|server[- ]side issue|internal (?:server )?error|service unavailable|bad gateway|"
    r"gateway timeout|api_error|HTTP 5\d\d|API Error: 5\d\d|experiencing high demand|"
    r"server had an error"
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
#: A CLI's own usage error: a line that names an argument it rejected while parsing its command line.
_REJECTED = re.compile(
    r"(?im)^.*\b(?:unknown|unexpected|unrecognized|unrecognised) (?:option|argument|flag|arguments)\b.*$"
)
#: A usage text (printed by a CLI that rejected its arguments, with or without an error line).
_USAGE = re.compile(r"(?im)^(?:usage:|options:|positionals:)")
_TRANSIENT = re.compile(
    r"(?i)overloaded|server[- ]side issue|internal (?:server )?error|service unavailable|bad gateway|"
    r"gateway timeout|econnreset|econnrefused|etimedout|socket hang up|fetch failed|network error|"
    r"connection (?:error|reset|refused)|api_error|HTTP 5\d\d|API Error: 5\d\d|"
    r"experiencing high demand|temporary errors?\b"
)


def rejected_arguments(output: str) -> str | None:
    """The line in which a CLI rejected its command line (an unknown option, say), or its usage
    text's first line when it printed only that; None when ``output`` shows neither."""
    if rejected := _REJECTED.search(output):
        return _line(rejected.group(0))
    if usage := _USAGE.search(output):
        return _line(output[usage.start() :].splitlines()[0])
    return None


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
    refused: tuple[re.Pattern[str], str] | None = None,
) -> Failure | None:
    """None when the run answered; else the failure's class and a one-line message. ``refused``:
    what the CLI says when its login refused the account for good, and what works instead
    (``Adapter.account_refused``, ``Adapter.refused_hint``), added to the message."""
    if timed_out:
        return Failure(TIMEOUT, "the CLI did not finish within the time left", RECOVERABLE[TIMEOUT], None)
    cli_error = summary.error.strip()
    if exit_code == 0 and not cli_error:
        if summary.finished or summary.response:
            return None
        # Exit 0 and nothing of the stream: no answer, no final result (plain text, garbage, a
        # wrapper that printed its own words). Not an empty answer: the CLI did not work.
        return Failure(CRASH, _no_result(summary, stderr), RECOVERABLE[CRASH], exit_code)
    head, tail = _head(stderr), _tail(stderr)
    evidence = f"{cli_error}\n{head}\n{tail}"
    status = summary.error_status
    message = _first_line(cli_error) or _first_line(tail) or f"the CLI exited with code {exit_code}"

    def failure(kind: ErrorType, reset: datetime | None = None) -> Failure:
        return Failure(kind, message, RECOVERABLE.get(kind, False), exit_code, reset)

    if exit_code not in (0, None) and not cli_error:
        # The CLI refused its command line (an argument passed after `--`) before doing anything.
        rejected = _REJECTED.search(head)
        if rejected:
            return Failure(INVALID_INPUT, _line(rejected.group(0)), RECOVERABLE[INVALID_INPUT], exit_code)
        if _USAGE.search(head):
            message = f"the CLI rejected its arguments and printed its usage ({_first_line(head)})"
            return failure(INVALID_INPUT)

    kind = summary.error_kind.lower()
    if (
        status in (401, 403)
        or kind in ("authentication_failed", "authentication_error")
        or _AUTH.search(evidence)
    ):
        # What the CLI said of its login, not whatever line came first (a warning, a trace).
        said = _AUTH.search(cli_error) or _AUTH.search(f"{head}\n{tail}")
        if said is not None:
            message = _line(_whole_line(said))
        if refused is not None and refused[0].search(evidence):
            message = f"{message}. {refused[1]}"
        return failure(AUTH)
    if _QUOTA.search(evidence):
        return failure(QUOTA, parse_reset(evidence, now, tz) if now is not None and tz is not None else None)
    if status == 429 or kind in ("rate_limit", "rate_limit_error") or _RATE.search(evidence):
        reset = parse_reset(evidence, now, tz) if now is not None and tz is not None else None
        return failure(RATE_LIMIT, reset)
    if _MODEL.search(evidence) or (status == 404 and "model" in evidence.lower()):
        return failure(INVALID_MODEL)
    if _SESSION.search(evidence):
        return failure(INVALID_SESSION)
    if _INPUT.search(evidence) or status in (400, 413) or exit_code == 2:
        return failure(INVALID_INPUT)
    if (status is not None and status >= 500) or kind in ("overloaded_error", "api_error"):
        return failure(PROVIDER_ERROR)
    if status == 408 or _TRANSIENT.search(evidence):
        return failure(PROVIDER_ERROR if _PROVIDER.search(evidence) else TRANSIENT)
    if status == 404:
        return failure(INVALID_MODEL)
    if exit_code is not None and (exit_code < 0 or exit_code > 128) and not cli_error:
        return Failure(CRASH, f"the CLI died ({_signal_text(exit_code)})", RECOVERABLE[CRASH], exit_code)
    # An error the CLI reported that nothing above explains; a CLI that failed without a word
    # of its own stays a crash.
    return failure(UNKNOWN if cli_error else CRASH)


def _no_result(summary: StreamSummary, stderr: str) -> str:
    """The message of a CLI that exited 0 without its stream's result, with what it printed."""
    said = "no result from the CLI: it exited with code 0 without an answer or its stream's final result"
    if summary.other_output:
        last = " | ".join(_line(line, 120) for line in summary.other_output[-3:] if line.strip())
        return f"{said} ({summary.noise} line(s) of stdout not its JSON stream, ending: {last})"
    last_lines = [line for line in _tail(stderr).splitlines() if line.strip()]
    if last_lines:
        return f"{said} (stderr ends: {_line(last_lines[-1])})"
    return f"{said} ({summary.events} event(s), nothing on stdout otherwise)"


def _whole_line(match: re.Match[str]) -> str:
    """The line of the searched text in which ``match`` lies."""
    text = match.string
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end >= 0 else len(text)]


def _head(stderr: str, limit: int = 4000) -> str:
    """The first ``limit`` characters of stderr, in whole lines (a CLI's usage error comes first)."""
    if len(stderr) <= limit:
        return stderr
    cut = stderr[:limit]
    return cut[: cut.rfind("\n") + 1] or cut


def _tail(stderr: str, limit: int = 4000) -> str:
    """The last ``limit`` characters of stderr, in whole lines (an error at the end of a long log)."""
    if len(stderr) <= limit:
        return stderr
    cut = stderr[-limit:]
    newline = cut.find("\n")
    return cut[newline + 1 :] if newline >= 0 else cut


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _line(line)
    return ""


def _line(line: str, limit: int = 300) -> str:
    """One line of a CLI's output for a message: whole, or cut at a word with an ellipsis; its
    control characters (an escape sequence the CLI printed) shown as escapes, never acted on: the
    message is printed on the terminal and kept in the breaker's file, shown by later runs."""
    line = one_line(line.strip())
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0] if " " in line[:limit] else line[:limit]
    return cut.rstrip() + " ..."


def _signal_text(code: int) -> str:
    signum = -code if code < 0 else code - 128
    return f"signal {signum}"
