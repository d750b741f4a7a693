"""The circuit breaker of one CLI for `waaah run` (pure: the clock comes in as ``now``).

closed -> open when the CLI failed ``threshold`` runs in a row (3), or timed out
``timeout_threshold`` runs in a row (5: slow is not broken, so timeouts count apart) -> after
``cooldown`` seconds (60) half-open: exactly one run may probe it (it claims the probe with
:meth:`Breaker.admit`; every other run skips the CLI while the probe is in flight) -> the probe's
success closes it, its failure opens it for another cooldown. A probe whose run vanished (killed)
frees itself when its lease ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from waaah_agent.core import failures as F
from waaah_agent.core.failures import Failure
from waaah_agent.core.kinds import StrEnum

# Failures that say "this CLI is not working right now" (not: the caller asked for something
# wrong). A timeout says "slow", and is counted apart.
COUNTED = (F.TRANSIENT, F.CRASH, F.RATE_LIMIT, F.AUTH, F.QUOTA, F.PROVIDER_ERROR, F.UNKNOWN)


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@dataclass(frozen=True)
class BreakerConfig:
    threshold: int = 3  # failed runs in a row that open it
    timeout_threshold: int = 5  # timed-out runs in a row that open it
    cooldown: float = 60.0  # seconds open before one probe run is let through


@dataclass
class Breaker:
    failures: int = 0
    timeouts: int = 0
    opened_at: float | None = None
    probe_until: float | None = None  # a half-open probe in flight, until this time at most
    last_error: str = ""
    config: BreakerConfig = field(default_factory=BreakerConfig)

    def state(self, now: float) -> BreakerState:
        if self.opened_at is None:
            return BreakerState.CLOSED
        return BreakerState.HALF_OPEN if now - self.opened_at >= self.config.cooldown else BreakerState.OPEN

    def probing(self, now: float) -> bool:
        """Half-open with another run's probe still in flight."""
        return (
            self.state(now) is BreakerState.HALF_OPEN
            and self.probe_until is not None
            and now < self.probe_until
        )

    def allows(self, now: float) -> bool:
        """Whether a run may use the CLI now (half-open: only while nobody probes it)."""
        state = self.state(now)
        return state is BreakerState.CLOSED or (state is BreakerState.HALF_OPEN and not self.probing(now))

    def admit(self, now: float, lease: float) -> bool:
        """:meth:`allows`, and when half-open, claim the one probe for ``lease`` seconds."""
        if not self.allows(now):
            return False
        if self.state(now) is BreakerState.HALF_OPEN:
            self.probe_until = now + lease
        return True

    def retry_at(self) -> float | None:
        return None if self.opened_at is None else self.opened_at + self.config.cooldown

    def record(self, ok: bool, now: float, failure: Failure | None = None) -> None:
        """One run's result for this CLI: a success closes it; a counted failure or a timeout
        may open it (a failed probe always does); anything else only frees a probe."""
        if ok:
            self.failures, self.timeouts, self.opened_at, self.probe_until = 0, 0, None, None
            self.last_error = ""
            return
        self.probe_until = None
        kind = failure.type if failure is not None else F.CRASH
        if kind == F.TIMEOUT:
            self.timeouts += 1
        elif kind in COUNTED:
            self.failures += 1
        else:
            return
        self.last_error = f"{kind}: {failure.message}" if failure else "failed"
        over = self.failures >= self.config.threshold or self.timeouts >= self.config.timeout_threshold
        if self.opened_at is not None or over:
            self.opened_at = now  # (re)open: a failed probe starts a new cooldown

    def why(self) -> str:
        """What opened it (or what it counts so far), for messages."""
        counts = [f"{self.failures} failure(s)"] if self.failures else []
        counts += [f"{self.timeouts} timeout(s)"] if self.timeouts else []
        return " and ".join(counts) + " in a row" if counts else "no failures"

    def to_json(self) -> dict[str, Any]:
        return {
            "failures": self.failures,
            "timeouts": self.timeouts,
            "opened_at": self.opened_at,
            "probe_until": self.probe_until,
            "last_error": self.last_error,
        }

    @classmethod
    def from_json(cls, data: Any, config: BreakerConfig) -> Breaker:
        if not shaped(data):
            return cls(config=config)
        return cls(
            failures=data.get("failures", 0),
            timeouts=data.get("timeouts", 0),
            opened_at=_time(data.get("opened_at")),
            probe_until=_time(data.get("probe_until")),
            last_error=data.get("last_error", ""),
            config=config,
        )


#: An ``opened_at`` later than now by more than this was not written by this clock: the file is
#: damaged, or the clock went back (it would keep the CLI skipped until the clock caught up).
CLOCK_SLACK = 60.0
#: A probe's claim runs for the run's share of its time: never this long.
PROBE_MAX = 7 * 24 * 3600.0


def from_the_future(entry: dict[str, Any], now: float) -> str | None:
    """Why a breaker read at ``now`` cannot be taken as written (a time too far ahead), or None."""
    opened, probe = _time(entry.get("opened_at")), _time(entry.get("probe_until"))
    if opened is not None and opened > now + CLOCK_SLACK:
        return "opened in the future: the file is damaged or the clock went back"
    if probe is not None and probe > now + PROBE_MAX:
        return "a probe claimed for more than a week"
    return None


def shaped(entry: Any) -> bool:
    """A breaker as :meth:`Breaker.to_json` writes it (missing keys take their defaults)."""
    if not isinstance(entry, dict):
        return False
    counts = (entry.get("failures", 0), entry.get("timeouts", 0))
    times = (entry.get("opened_at"), entry.get("probe_until"))
    return (
        all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1_000_000 for n in counts)
        and all(t is None or _time(t) is not None for t in times)
        and isinstance(entry.get("last_error", ""), str)
    )


def _time(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if 0 <= number < 1e11 else None  # an epoch time, not NaN or infinity
