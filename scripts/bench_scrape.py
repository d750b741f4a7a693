"""Does a Prometheus scrape slow the relay? `waaah agent` measured with and without its metrics
server scraped every second (/metrics, /readyz, /healthz: the health ping wakes the loop each
time), through the relay benchmark's own latency and blast measurements, in interleaved rounds.

    .venv/bin/python scripts/bench_scrape.py          # BENCH_ROUNDS (5), BENCH_MB (50), BENCH_LINES

Prints the median of each figure per variant and the scrapes made (with their slowest answer).
"""

from __future__ import annotations

import importlib.util
import socket
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("bench_relay", HERE / "bench_relay.py")
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
sys.modules["bench_relay"] = bench
spec.loader.exec_module(bench)

ROUNDS = int(bench.os.environ.get("BENCH_ROUNDS", "5"))
PATHS = ("/metrics", "/readyz", "/healthz")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Scraper(threading.Thread):
    """Scrapes every endpoint once a second until stopped; counts answers and the slowest."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.done = port, threading.Event()
        self.answers, self.failures, self.slowest = 0, 0, 0.0

    def run(self) -> None:
        while not self.done.wait(1.0):
            for path in PATHS:
                started = time.monotonic()
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as a:
                        a.read()
                    self.answers += 1
                except urllib.error.HTTPError:
                    self.answers += 1  # /readyz: 503 while the agent is not in a WAAAH loop
                except OSError:
                    self.failures += 1  # before the server is up, after it is gone
                self.slowest = max(self.slowest, time.monotonic() - started)


def measure(setup, scraped: bool, failures: list[str], scrapers: list[Scraper]) -> dict[str, float]:
    port = free_port()
    base_argv = setup.argv

    def argv(relay: str) -> list[str]:
        extra = ["--metrics-port", str(port)] if scraped else []
        return [*base_argv(relay), *extra]

    setup.argv = argv
    scraper = Scraper(port)
    if scraped:
        scraper.start()
        scrapers.append(scraper)
    try:
        sample = bench.measure_latency(setup, "waaah", failures)
        sample |= bench.measure_blast(setup, "waaah", failures)
    finally:
        scraper.done.set()
        setup.argv = base_argv
    return sample


def main() -> int:
    failures: list[str] = []
    scrapers: list[Scraper] = []
    rounds: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with bench.make_setup() as setup:
        for n in range(ROUNDS):
            for scraped in (n % 2 == 0, n % 2 != 0):
                rounds[scraped].append(measure(setup, scraped, failures, scrapers))
            print(f"round {n + 1}/{ROUNDS} done", flush=True)
    keys = ("lat_p50", "lat_p99", "lat_max", "mb_per_s", "cpu_s_per_100mb")
    print(f"\n{'figure (median of ' + str(ROUNDS) + ')':<32}{'no scrape':>12}{'scraped 1/s':>14}")
    for key in keys:
        a = statistics.median(r[key] for r in rounds[False])
        b = statistics.median(r[key] for r in rounds[True])
        print(f"{key:<32}{a:>12.2f}{b:>14.2f}")
    answers = sum(s.answers for s in scrapers)
    print(
        f"\nscrapes answered: {answers} ({sum(s.failures for s in scrapers)} refused at start/end), "
        f"slowest answer {max((s.slowest for s in scrapers), default=0) * 1000:.0f} ms"
    )
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
