"""Restart backoff: exponential with jitter (core/backoff.py's formula), reset after a stable run,
a budget per window.

Pure: the caller passes the time and a random number in [0, 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from waaah_agent.core.backoff import backoff


@dataclass(frozen=True)
class BackoffConfig:
    base: float = 1.0  # first delay, seconds
    cap: float = 60.0  # longest delay
    stable: float = 600.0  # a run this long resets the delay to ``base``
    budget: int = 5  # restarts allowed per ``window``
    window: float = 1800.0


@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    delay: float
    reason: str


@dataclass
class Restarts:
    """Decides, at each unexpected exit, whether and when to start the agent again."""

    config: BackoffConfig = field(default_factory=BackoffConfig)
    consecutive: int = 0
    history: list[float] = field(default_factory=list)  # times restarts were granted
    started_at: float | None = None

    def on_start(self, now: float) -> None:
        self.started_at = now

    def on_exit(self, now: float, rand: float) -> RestartDecision:
        cfg = self.config
        ran = now - self.started_at if self.started_at is not None else 0.0
        if ran >= cfg.stable:
            self.consecutive = 0
        self.history = [t for t in self.history if now - t < cfg.window]
        if len(self.history) >= cfg.budget:
            return RestartDecision(
                False,
                0.0,
                f"{len(self.history)} restarts in the last {cfg.window / 60:.0f} minutes: giving up",
            )
        # jitter: between half and all of the ceiling
        delay = backoff(self.consecutive + 1, cfg.base, cfg.cap, 0.5, rand, under_cap=True)
        self.consecutive += 1
        self.history.append(now)
        return RestartDecision(
            True,
            delay,
            f"restart {len(self.history)} of {cfg.budget} in this window after {ran:.0f}s of running",
        )
