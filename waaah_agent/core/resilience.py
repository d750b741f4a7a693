"""Retries, fallback, one time budget and a per-CLI circuit breaker for `waaah run` (pure).

After each failed attempt :func:`next_step` says what to do: retry the same CLI after a delay,
move to the next CLI of the fallback chain, or stop. The clock and the random jitter come in as
arguments, so every decision is testable with a fake clock.

Policy, by error class (core/failures.py):

* transient: retry the same CLI with exponential backoff and jitter (1 s, 2 s, 4 s ... capped),
  at most ``transient_retries`` times, then fall back;
* rate_limit: wait until the parsed reset time when it falls within the budget, else a longer
  backoff (10 s doubling); a wait the budget cannot cover moves on to the next CLI at once;
* crash, timeout, auth, invalid_model: never retried on the same CLI; the next CLI in the
  chain gets the prompt (another CLI has its own credentials and models);
* invalid_input, invalid_session: stop (the same input fails everywhere);
* no time left in the budget: stop with the last failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from waaah_agent.core import failures as F
from waaah_agent.core.failures import Failure
from waaah_agent.core.kinds import StrEnum


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


def backoff(attempt: int, base: float, cap: float, jitter: float, rand: float) -> float:
    """Delay before retry number ``attempt`` (1-based); ``rand`` in [0, 1) spreads it by +-jitter."""
    delay = min(cap, base * 2.0 ** max(0, attempt - 1))
    return max(0.0, delay * (1 + jitter * (2 * rand - 1)))


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

    ``remaining`` is the time left in the run's budget (seconds); ``now`` is the wall clock
    (epoch seconds) used against a rate limit's reset time."""
    onward = Step("fallback", reason=f"{failure.type}: trying the next CLI") if has_fallback else None
    if remaining <= 0:
        return Step("stop", reason="the time budget is spent")
    kind = failure.type
    if kind in (F.INVALID_INPUT, F.INVALID_SESSION, F.INTERRUPTED):
        return Step("stop", reason=f"{kind}: trying again cannot help")
    if kind == F.TRANSIENT and retries_so_far < config.transient_retries:
        delay = backoff(retries_so_far + 1, config.base, config.cap, config.jitter, rand)
        if delay < remaining:
            return Step("retry", delay, f"transient error: retry {retries_so_far + 1} in {delay:.1f} s")
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


# --------------------------------------------------------------------------------------------
# Circuit breaker
# --------------------------------------------------------------------------------------------

# Failures that say "this CLI is not working right now" (not: the caller asked for something wrong).
COUNTED = (F.TRANSIENT, F.TIMEOUT, F.CRASH, F.RATE_LIMIT, F.AUTH)


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@dataclass(frozen=True)
class BreakerConfig:
    threshold: int = 3  # consecutive failures that open it
    cooldown: float = 300.0  # seconds open before one trial run is let through


@dataclass
class Breaker:
    """closed -> (threshold failures in a row) -> open -> (cooldown) -> half-open -> one trial:
    success closes it, failure opens it again for another cooldown."""

    failures: int = 0
    opened_at: float | None = None
    last_error: str = ""
    config: BreakerConfig = field(default_factory=BreakerConfig)

    def state(self, now: float) -> BreakerState:
        if self.opened_at is None:
            return BreakerState.CLOSED
        return BreakerState.HALF_OPEN if now - self.opened_at >= self.config.cooldown else BreakerState.OPEN

    def allows(self, now: float) -> bool:
        return self.state(now) is not BreakerState.OPEN

    def retry_at(self) -> float | None:
        return None if self.opened_at is None else self.opened_at + self.config.cooldown

    def record(self, ok: bool, now: float, failure: Failure | None = None) -> None:
        if ok:
            self.failures, self.opened_at, self.last_error = 0, None, ""
            return
        if failure is not None and failure.type not in COUNTED:
            return
        self.failures += 1
        self.last_error = f"{failure.type}: {failure.message}" if failure else "failed"
        if self.opened_at is not None or self.failures >= self.config.threshold:
            self.opened_at = now  # (re)open: a failed half-open trial starts a new cooldown

    def to_json(self) -> dict[str, Any]:
        return {"failures": self.failures, "opened_at": self.opened_at, "last_error": self.last_error}

    @classmethod
    def from_json(cls, data: Any, config: BreakerConfig) -> Breaker:
        if not isinstance(data, dict):
            return cls(config=config)
        opened = data.get("opened_at")
        return cls(
            failures=int(data.get("failures") or 0),
            opened_at=float(opened) if isinstance(opened, (int, float)) else None,
            last_error=str(data.get("last_error") or ""),
            config=config,
        )
