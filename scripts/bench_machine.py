"""The supervisor machine's decision cost per event (µs), over the scripted 8-hour night.

The night (tests/unit/night.py: a model CLI with tasks, loop exits, ignored nudges, a crash,
a hang, a usage limit, an eviction and a user's draft) is played several times; only the
time spent inside ``Machine.handle`` is counted, per event kind.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.unit.night import whole_night  # noqa: E402
from waaah_agent.core.supervise.machine import Machine  # noqa: E402


def measure(rounds: int) -> dict[str, object]:
    costs: dict[str, list[float]] = defaultdict(list)
    original = Machine.handle

    def timed(self: Machine, event, t):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return original(self, event, t)
        finally:
            costs[type(event).__name__].append(time.perf_counter() - started)

    Machine.handle = timed  # type: ignore[method-assign]
    walls = []
    try:
        for _ in range(rounds):
            started = time.perf_counter()
            whole_night()
            walls.append(time.perf_counter() - started)
    finally:
        Machine.handle = original  # type: ignore[method-assign]
    every = [c for per_kind in costs.values() for c in per_kind]
    return {
        "events_per_night": len(every) // rounds,
        "night_wall_s_p50": statistics.median(walls),
        "us_per_event_mean": 1e6 * statistics.fmean(every),
        "us_per_event_p50": 1e6 * statistics.median(every),
        "us_per_event_p99": 1e6 * statistics.quantiles(every, n=100)[98],
        "us_per_event_by_kind": {k: round(1e6 * statistics.fmean(v), 1) for k, v in sorted(costs.items())},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = measure(args.rounds)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"supervisor machine, scripted 8-hour night x{args.rounds}: {result['events_per_night']} events per night,"
    )
    print(
        f"  the whole night in {result['night_wall_s_p50'] * 1000:.0f} ms (model CLI and fake clock included)"
    )
    print(
        f"  decision cost per event: mean {result['us_per_event_mean']:.1f} µs, "
        f"p50 {result['us_per_event_p50']:.1f} µs, p99 {result['us_per_event_p99']:.1f} µs"
    )
    for kind, cost in result["us_per_event_by_kind"].items():  # type: ignore[union-attr]
        print(f"    {kind:20} {cost:8.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
