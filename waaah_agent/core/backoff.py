"""The one backoff formula of waaah: the supervisor's restarts (core/supervise/backoff.py) and
`waaah run`'s retries (core/oneshot/resilience.py) both wait what it says. Pure: the caller passes
a random number in [0, 1)."""

from __future__ import annotations


def backoff(
    attempt: int, base: float, cap: float, jitter: float, rand: float, *, under_cap: bool = False
) -> float:
    """Delay before try number ``attempt`` (1-based): ``base`` doubled at each try, at most
    ``cap``; ``rand`` spreads it by +-``jitter`` of itself, or with ``under_cap`` from
    (1 - ``jitter``) of it up to it (never above the ceiling)."""
    ceiling = min(cap, base * 2.0 ** max(0, attempt - 1))
    low = 1 - jitter
    high = 1.0 if under_cap else 1 + jitter
    return max(0.0, ceiling * (low + (high - low) * rand))
