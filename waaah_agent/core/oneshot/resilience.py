"""Retries, fallback, one time budget and a per-CLI circuit breaker for `waaah run` (pure).

After each failed attempt :func:`next_step` says what to do: retry the same CLI after a delay,
move to the next CLI of the fallback chain, or stop. The clock and the random jitter come in as
arguments, so every decision is testable with a fake clock.

Policy, by error class (core/failures.py):

* transient, provider_error: retry the same CLI with exponential backoff and jitter (1 s, 2 s, 4 s ... capped),
  at most ``transient_retries`` times, then fall back;
* rate_limit: wait until the parsed reset time when it falls within the budget, else a longer
  backoff (10 s doubling); a wait the budget cannot cover moves on to the next CLI at once;
* quota: never waited out (a quota resets in hours): the next CLI at once;
* crash, timeout, auth, invalid_model, unknown: never retried on the same CLI; the next CLI in the
  chain gets the prompt (another CLI has its own credentials and models);
* invalid_input, invalid_session: stop (the same input fails everywhere);
* no time left in the budget: stop with the last failure; no time left in this CLI's share
  (:func:`cli_share`) of it: the next CLI.

The budget is shared, but the first CLI cannot eat it all: each CLI of the chain may use only
its share of the time still left, so a CLI that hangs leaves its fallbacks their turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from waaah_agent.core import failures as F
from waaah_agent.core.backoff import backoff
from waaah_agent.core.failures import Failure
from waaah_agent.core.oneshot.breaker import COUNTED, Breaker, BreakerConfig, BreakerState

__all__ = [
    "COUNTED",
    "SHARE_FLOOR",
    "Breaker",
    "BreakerConfig",
    "BreakerState",
    "RetryConfig",
    "Step",
    "backoff",
    "cli_share",
    "default_chain",
    "max_attempts",
    "next_step",
]

#: No CLI of a chain is given less than this many seconds (unless less is left in the budget).
SHARE_FLOOR = 2.0


@dataclass(frozen=True)
class RetryConfig:
    transient_retries: int = 2
    rate_limit_retries: int = 1
    base: float = 1.0
    cap: float = 30.0
    rate_limit_base: float = 10.0
    rate_limit_cap: float = 120.0
    jitter: float = 0.25  # +- this fraction of the delay
    reset_margin: float = 2.0  # seconds added after a parsed reset time


@dataclass(frozen=True)
class Step:
    action: Literal["retry", "fallback", "stop"]
    delay: float = 0.0
    reason: str = ""


def next_step(
    failure: Failure,
    retries_so_far: int,
    remaining: float,
    has_fallback: bool,
    now: float,
    rand: float,
    config: RetryConfig = RetryConfig(),
) -> Step:
    """What to do after ``failure`` on a CLI already retried ``retries_so_far`` times.

    ``remaining`` is the time this CLI has left (seconds): its share of the run's budget while
    other CLIs follow, the whole rest of the budget for the last one; ``now`` is the wall clock
    (epoch seconds) used against a rate limit's reset time."""
    onward = Step("fallback", reason=f"{failure.type}: trying the next CLI") if has_fallback else None
    kind = failure.type
    if kind in (F.INVALID_INPUT, F.INVALID_SESSION, F.INTERRUPTED):
        return Step("stop", reason=f"{kind}: trying again cannot help")
    if remaining <= 0:
        return (
            Step("fallback", reason=f"{kind}: this CLI's share of the time budget is spent")
            if has_fallback
            else Step("stop", reason="the time budget is spent")
        )
    if kind in (F.TRANSIENT, F.PROVIDER_ERROR) and retries_so_far < config.transient_retries:
        delay = backoff(retries_so_far + 1, config.base, config.cap, config.jitter, rand)
        if delay < remaining:
            return Step("retry", delay, f"{kind}: retry {retries_so_far + 1} in {delay:.1f} s")
    if kind == F.RATE_LIMIT and retries_so_far < config.rate_limit_retries:
        if failure.reset_at is not None:
            delay = max(0.0, failure.reset_at.timestamp() - now) + config.reset_margin
            why = f"rate limited until {failure.reset_at.isoformat(timespec='seconds')}"
        else:
            delay = backoff(
                retries_so_far + 1, config.rate_limit_base, config.rate_limit_cap, config.jitter, rand
            )
            why = f"rate limited: retry in {delay:.1f} s"
        if delay < remaining:
            return Step("retry", delay, why)
        if onward is None:
            return Step("stop", reason=f"{why}: longer than the time left ({remaining:.0f} s)")
    return onward or Step("stop", reason=f"{kind}: no fallback CLI left")


def cli_share(remaining: float, clis_left: int, floor: float = SHARE_FLOOR) -> float:
    """Seconds the next CLI of a chain may use of the ``remaining`` budget, when ``clis_left``
    CLIs (it included) may still need time: an equal share of what is left, at least ``floor``,
    never more than what is left. Its retries and waits come out of the same share; a CLI that
    answers (or fails) early leaves what it did not use to the ones after it.

    ``--timeout 600`` over three CLIs: the first may use 200 s; if it fails after 20 s, the
    second may use 290 s, and the last all that is then left."""
    if remaining <= 0:
        return 0.0
    share = remaining / max(1, clis_left)
    return min(remaining, max(share, floor))


#: The order in which the other CLIs follow the first when no fallback chain is given. opencode
#: is not among them: its login (a provider of opencode.json or its auth file) cannot be checked
#: without running it, so it is tried only when named (--fallback, --role).
DEFAULT_ORDER = ("gemini", "claude", "codex")


def default_chain(primary: str, usable: dict[str, bool]) -> list[str]:
    """The fallback CLIs of a run that names none: the others of DEFAULT_ORDER that are
    ``usable`` now (installed, credentials found, breaker closed, no usage limit in force), in
    that order."""
    return [name for name in DEFAULT_ORDER if name != primary and usable.get(name, False)]


def max_attempts(clis: int, config: RetryConfig = RetryConfig()) -> int:
    """The most CLI processes a run over a chain of ``clis`` CLIs can start: per CLI its first
    attempt, one model retry (core/models.py) and its retries (transient and rate-limit retries
    share one count)."""
    return clis * (2 + max(config.transient_retries, config.rate_limit_retries))
