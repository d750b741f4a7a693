"""Benchmark the output relay: direct vs `script` vs a bare Python relay vs `waaah agent`.

Each relay runs the same measurement child (``python -m waaah_agent.simulated`` with
``SIM_MODE`` set) inside an outer PTY that this script reads itself. Rounds are short and
interleaved, so machine noise spreads over all relays alike; the table shows per metric the
median over rounds and the comparison with the child writing straight to the outer PTY.
The bare Python relay (``--bare-relay``, below) is the least any relay written in Python can
do: a PTY, select, read, write, nothing recorded. What waaah costs beyond it is its own work.

Then two floods besides the agent-like text, through script and waaah: a TUI's coloured frames
(claude's recorded wait, an escape between most characters) and source code (this package's
own sources, keys and tokens named on most lines), where the masking of secrets works hardest.

Then the figures a user feels, with the real ``waaah agent --start=simulated`` over the
interactive simulated CLI (BENCH_FELT_ROUNDS rounds, p50 and max): how much later the CLI's
first screen comes through waaah than when the CLI is started directly; how long after the
agent's death the new agent is spawned (less the restart backoff, configured tiny here); and
how long after the agent's turn ends the continue prompt is typed (less the deliberate wait
for quiet that the policy keeps before it, shown apart).

    make bench                       # or: .venv/bin/python scripts/bench_relay.py
    BENCH_ROUNDS=3 BENCH_BIG_MB=200 make bench   # a quicker, rougher run

Results also go to ``bench-results/<YYYYmmdd-HHMMSS>.json`` with the machine's details.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import termios
import time
import tty
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ptyprocess import PtyProcess

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
WAAAH = str(Path(sys.executable).parent / "waaah")
ROWS, COLS = 40, 120
READ_SIZE = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")
MB = 1024 * 1024

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
LAT_LINES = int(os.environ.get("BENCH_LINES", "2000"))
KEYS = int(os.environ.get("BENCH_KEYS", "100"))
BLAST_MB = float(os.environ.get("BENCH_MB", "50"))
BIG_MB = float(os.environ.get("BENCH_BIG_MB", "1024"))
SILENT_S = float(os.environ.get("BENCH_SILENT", "20"))
SCREEN_MB = float(os.environ.get("BENCH_SCREEN_MB", "8"))
FELT_ROUNDS = int(os.environ.get("BENCH_FELT_ROUNDS", "5"))
RESTART_BASE_S = 0.05  # WAAAH_RESTART_BASE_SECONDS for the crash rounds: the backoff is 25-50 ms
RELAYS = ("direct", "script", "python", "waaah")
BENCH_KEY = "AIzaSyBench-0123456789abcdefghijklmnopq"  # a known secret in the relays' environment

Sample = dict[str, float]


class BenchError(RuntimeError):
    """A measurement could not be made (the message says which and why)."""


# -- the outer PTY ---------------------------------------------------------------------------------
class Outer:
    """A relay (or the bare child) running in a PTY that the benchmark owns and reads."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        self.argv = argv
        self.proc = PtyProcess.spawn(argv, env=env, cwd=cwd, dimensions=(ROWS, COLS))
        self.fd: int = self.proc.fd
        self.pid: int = self.proc.pid
        os.set_blocking(self.fd, False)
        self.eof = False
        self.tail = b""  # text seen recently, for finding markers split across reads

    def read(self, timeout: float) -> tuple[bytes, int]:
        """One large read (b"" on timeout or EOF) and the monotonic_ns time it returned."""
        if self.eof:
            return b"", time.monotonic_ns()
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return b"", time.monotonic_ns()
        try:
            data = os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            data = b""
        except OSError:  # EIO: every writer of the PTY is gone
            data = b""
            self.eof = True
        now = time.monotonic_ns()
        if not data and not self.eof and ready:
            self.eof = not self.proc.isalive()
        return data, now

    def expect(
        self, pattern: bytes, timeout: float, on_data: Callable[[bytes, int], None] | None = None
    ) -> bytes:
        """Read until ``pattern`` (a regex) appears; return its match. Raises BenchError on timeout/EOF."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            data, now = self.read(min(0.5, max(0.0, deadline - time.monotonic())))
            if data:
                if on_data is not None:
                    on_data(data, now)
                window = self.tail + data
                if m := regex.search(window):
                    self.tail = window[m.end() :][-256:]
                    return m.group(0)
                self.tail = window[-256:]
            elif self.eof:
                raise BenchError(f"{self.argv[0]} ended before {pattern!r}")
            if time.monotonic() > deadline:
                raise BenchError(f"no {pattern!r} from {shlex.join(self.argv)} within {timeout:.0f}s")

    def expect_at(self, pattern: bytes, timeout: float) -> int:
        """Like :meth:`expect`; return the monotonic_ns time of the read that completed the match."""
        last = [0]

        def on_data(_data: bytes, now: int) -> None:
            last[0] = now

        self.expect(pattern, timeout, on_data)
        return last[0]

    def finish(self, timeout: float = 15.0) -> int | None:
        """Drain to EOF, wait for the exit, and kill our process group if it lingers."""
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            self.read(0.2)
        while self.proc.isalive() and time.monotonic() < deadline:
            time.sleep(0.02)
        code: int | None = self.proc.exitstatus if not self.proc.isalive() else None
        self.kill()
        return code

    def kill(self) -> None:
        """SIGKILL the process group we started (the child leads its own session)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.close(force=True)


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


# -- the relays ------------------------------------------------------------------------------------
@dataclass
class Setup:
    """Where and how each relay starts: a throwaway git workspace and HOME for waaah."""

    workspace: Path
    home: Path
    base_env: dict[str, str] = field(default_factory=dict)

    def child_argv(self) -> list[str]:
        return [PYTHON, "-m", "waaah_agent.simulated", "--session-id", "00000000-bench"]

    def argv(self, relay: str) -> list[str]:
        if relay == "direct":
            return self.child_argv()
        if relay == "script":
            return ["script", "-qfec", shlex.join(self.child_argv()), "/dev/null"]
        if relay == "python":
            return [PYTHON, __file__, "--bare-relay", *self.child_argv()]
        return [WAAAH, "agent", "--start=simulated", "--no-mcp"]

    def start(self, relay: str, mode: str, **knobs: str) -> Outer:
        env = dict(self.base_env, SIM_MODE=mode, **knobs)
        return Outer(self.argv(relay), env, str(self.workspace))


@contextlib.contextmanager
def make_setup() -> Iterator[Setup]:
    with tempfile.TemporaryDirectory(prefix="waaah-bench-") as tmp:
        workspace, home = Path(tmp) / "ws", Path(tmp) / "home"
        workspace.mkdir()
        home.mkdir()
        subprocess.run(["git", "init", "-q", str(workspace)], check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WAAAH_", "SIM_", "CI"))}
        env.update(
            HOME=str(home),
            TERM="xterm-256color",
            PYTHONPATH=str(ROOT),
            SIM_STARTUP_SECONDS="0.3",
            SIM_TRANSCRIPT_DIR=str(workspace / ".waaah" / "simulated"),
            # A user's environment holds keys: the record looks for them (and their parts) in
            # everything it writes, so the figures include that search.
            GEMINI_API_KEY=BENCH_KEY,
            GITHUB_TOKEN="ghp_" + "b3nchT0ken" * 4,
        )
        yield Setup(workspace, home, env)


def ensure_done(outer: Outer, what: str, failures: list[str]) -> None:
    code = outer.finish()
    if code != 0:
        failures.append(f"{what}: exit {code}")


# -- the measurements ------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def measure_latency(setup: Setup, relay: str, failures: list[str]) -> Sample:
    """Output latency: time read at the outer PTY minus the time the child wrote the line."""
    outer = setup.start(relay, "latency", SIM_LINES=str(LAT_LINES))
    lat_ms: list[float] = []
    pending = b""

    def on_data(data: bytes, now: int) -> None:
        nonlocal pending
        lines = (pending + data).split(b"\n")
        pending = lines.pop()
        for line in lines:
            if line.startswith(b"LAT ") and len(parts := line.split()) == 3:
                lat_ms.append((now - int(parts[2])) / 1e6)

    try:
        outer.expect(rb"LAT-END", 30 + LAT_LINES / 500, on_data)
    finally:
        ensure_done(outer, f"{relay} latency", failures)
    if len(lat_ms) < LAT_LINES * 0.99:
        raise BenchError(f"{relay}: only {len(lat_ms)} of {LAT_LINES} latency lines arrived")
    return {f"lat_{p}": percentile(lat_ms, q) for p, q in (("p50", 50), ("p90", 90), ("p99", 99))} | {
        "lat_max": max(lat_ms)
    }


def measure_keys(setup: Setup, relay: str, failures: list[str]) -> Sample:
    """Keystroke latency: a byte written to the outer PTY until the raw-mode child reads it."""
    outer = setup.start(relay, "keys")
    lat_ms: list[float] = []
    try:
        outer.expect(rb"KEYS-READY", 30)
        time.sleep(0.2)  # let the relay finish starting up (its screen timer, logs...)
        for _ in range(KEYS):
            sent = time.monotonic_ns()
            os.write(outer.fd, b"k")
            ack = outer.expect(rb"KEY 6b (\d+)\r\n", 5)
            lat_ms.append((int(ack.split()[2]) - sent) / 1e6)
            time.sleep(0.003)
        os.write(outer.fd, b"q")
    finally:
        ensure_done(outer, f"{relay} keys", failures)
    return {"key_p50": percentile(lat_ms, 50), "key_p99": percentile(lat_ms, 99)}


def measure_blast(
    setup: Setup, relay: str, failures: list[str], mb: float = BLAST_MB, recorded: Path | None = None
) -> Sample:
    """Throughput of a text blast at the outer PTY, and the relay's CPU and memory meanwhile
    (``recorded``: a recorded stream's reads blasted instead of the agent-like text)."""
    knobs = {"SIM_BLAST_FROM": str(recorded)} if recorded else {}
    outer = setup.start(relay, "blast", SIM_MB=str(mb), **knobs)
    seen = 0
    rss: list[float] = []
    next_sample = 100 * MB

    def on_data(data: bytes, now: int) -> None:
        nonlocal seen, next_sample
        seen += len(data)
        if relay != "direct" and seen >= next_sample:
            rss.append(memory_mb(outer.pid)["VmRSS"])
            next_sample += 100 * MB

    try:
        start_line = outer.expect(rb"START blast (\d+)", 30)
        started_ns = int(start_line.split()[2])
        cpu0 = cpu_seconds(outer.pid) if relay != "direct" else 0.0
        end = outer.expect(rb"BLAST-END \d+ \d+ \d+", 60 + mb, on_data)
        ended_ns = time.monotonic_ns()
        cpu1 = cpu_seconds(outer.pid) if relay != "direct" else 0.0
        mem = memory_mb(outer.pid) if relay != "direct" else {}
    finally:
        ensure_done(outer, f"{relay} blast", failures)
    sent, newlines = (int(n) for n in end.split()[1:3])
    if not sent + newlines <= seen <= sent + newlines + 300:  # onlcr: each \n arrives as \r\n
        failures.append(f"{relay} blast: {seen} bytes arrived for {sent} sent ({newlines} newlines)")
    seconds = (ended_ns - started_ns) / 1e9
    mb = sent / MB  # a recorded stream is sent in whole blocks: a little more than asked
    sample: Sample = {"mb_per_s": mb / seconds}
    if relay != "direct":
        sample["cpu_s_per_100mb"] = (cpu1 - cpu0) / mb * 100
        sample["rss_end_mb"] = mem.get("VmRSS", 0.0)
        sample["rss_peak_mb"] = mem.get("VmHWM", 0.0)
        if rss:
            sample["rss_at_100mb"] = rss[0]
    return sample


def measure_idle(setup: Setup, relay: str, failures: list[str]) -> Sample:
    """CPU of the relay while the child prints nothing for SILENT_S seconds (% of one core)."""
    outer = setup.start(relay, "silent", SIM_SECONDS=str(SILENT_S))
    try:
        outer.expect(rb"START silent", 30)
        time.sleep(1.0)  # the relay's start-up work (screen timer, first flush) is not idling
        cpu0, t0 = cpu_seconds(outer.pid), time.monotonic()
        outer.expect(rb"SILENT-END", SILENT_S + 30)
        cpu1, t1 = cpu_seconds(outer.pid), time.monotonic()
        rss = memory_mb(outer.pid)["VmRSS"]
    finally:
        ensure_done(outer, f"{relay} silent", failures)
    return {"idle_cpu_pct": (cpu1 - cpu0) / (t1 - t0) * 100, "rss_idle_mb": rss}


STREAMS = ROOT / "tests" / "fixtures" / "streams"
WAIT_STREAM = STREAMS / "gemini-0.61.0" / "wait-loop.jsonl.gz"
# The other CLIs' waits (scripts/record_wait_stream.py --cli): claude and codex redraw a spinner
# line in small reads (~0.7 and ~2 KB/s, 10 and 30 reads a second), each a change for pyte.
OTHER_WAITS = {
    "claude": STREAMS / "claude-2.1.332" / "wait-loop.jsonl.gz",
    "codex": STREAMS / "codex-0.171.0" / "wait-loop.jsonl.gz",
}
# Blasted as fast as the terminal takes it, besides the agent-like text: a TUI's frames, where an
# escape stands between most characters (the known secrets' look through escapes works hardest).
TUI_STREAM = OTHER_WAITS["claude"]


def measure_waiting(setup: Setup, relay: str, failures: list[str], stream: Path = WAIT_STREAM) -> Sample:
    """CPU of the relay while the child replays a CLI's recorded wait_for_prompt redraws (gemini:
    its live area drawn again ~20 times a second, ~68 KB/s) for SILENT_S seconds (% of one core)."""
    outer = setup.start(relay, "replay", SIM_REPLAY=str(stream), SIM_SECONDS=str(SILENT_S))
    try:
        outer.expect(rb"START replay", 30)
        time.sleep(1.0)
        cpu0, t0 = cpu_seconds(outer.pid), time.monotonic()
        outer.expect(rb"REPLAY-END", SILENT_S + 30)
        cpu1, t1 = cpu_seconds(outer.pid), time.monotonic()
    finally:
        ensure_done(outer, f"{relay} replay", failures)
    return {"waiting_cpu_pct": (cpu1 - cpu0) / (t1 - t0) * 100}


def record_check(setup: Setup) -> dict[str, Any]:
    """What the newest session's record holds after a blast through waaah: the .cast every byte the
    agent wrote (its parts included), the text log each distinct line of the blast's text, and no
    part (8 characters in a row) of the known key in the environment anywhere under .waaah/."""
    from waaah_agent.runtime.supervise.logfiles import replay
    from waaah_agent.simulated_modes import AGENT_TEXT

    logs = setup.workspace / ".waaah" / "logs"
    casts = sorted(logs.glob("simulated-*.cast"), key=lambda p: p.stat().st_mtime)
    if not casts:
        return {"ok": False, "why": "no .cast"}
    played = replay(casts[-1])
    start, end = played.find(b"START blast"), played.find(b"BLAST-END ")
    if start < 0 or end < 0:
        return {"ok": False, "why": "the .cast misses the blast's first or last line"}
    sent, newlines = (int(n) for n in played[end:].split()[1:3])
    body = len(played[played.index(b"\n", start) + 1 : end]) - len(b"\x1b[0m\r\n")
    cast_ok = body == sent + newlines  # each \n arrived as \r\n
    text = b"".join(p.read_bytes() for p in logs.glob(casts[-1].stem + ".log*") if p.suffix != ".gz")
    lines = [
        "Reading src/app/handlers.py (lines 120-180)",
        "cannot block the event loop",
        "42 passed in 1.23s",
    ]
    lines_ok = all(line.encode() in text for line in lines)
    grams = {BENCH_KEY[i : i + 8].encode() for i in range(len(BENCH_KEY) - 7)}
    leaked = [
        str(p)
        for p in (setup.workspace / ".waaah").rglob("*")
        if p.is_file() and "simulated" not in p.parts and any(g in p.read_bytes() for g in grams)
    ]
    return {
        "ok": cast_ok and lines_ok and not leaked,
        "cast_bytes_ok": cast_ok,
        "cast_body_bytes": body,
        "expected_bytes": sent + newlines,
        "text_lines_ok": lines_ok,
        "key_parts_in": leaked,
        "distinct_lines_of_the_blast": len({ln for ln in AGENT_TEXT.splitlines() if ln.strip()}),
    }


# -- what a user feels: start-up, restart after a crash, the continue prompt ----------------------
WALL_MINUS_MONO = time.time() - time.monotonic()  # events.jsonl stamps wall-clock time


def wall(mono_ns: int) -> float:
    return mono_ns / 1e9 + WALL_MINUS_MONO


def fresh_workspace(setup: Setup, name: str) -> Path:
    """Its own git workspace per run, so each waaah run has one session folder to read."""
    ws = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=setup.workspace.parent))
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


def session_events(ws: Path) -> list[dict[str, Any]]:
    found = list((ws / ".waaah" / "sessions").glob("*/events.jsonl"))
    if not found:
        return []
    from waaah_agent.runtime.store import event_epoch

    events = []
    for line in found[0].read_text().splitlines():
        with contextlib.suppress(ValueError):  # a line being written
            event = json.loads(line)
            # ISO times with milliseconds (older files: epoch floats): epoch seconds to subtract
            event["ts"] = event_epoch(event.get("ts")) or 0.0
            events.append(event)
    return events


def wait_event(
    outer: Outer, ws: Path, match: Callable[[list[dict[str, Any]]], Any], what: str, timeout: float = 30
) -> Any:
    """Read the terminal (as a real one does) until ``match(events)`` returns something."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = match(session_events(ws))
        if found:
            return found
        outer.read(0.01)
        if outer.eof:
            break
    raise BenchError(f"waaah: no {what} in events.jsonl within {timeout:.0f}s")


def first_screen(setup: Setup, relay: str) -> tuple[float, Outer, Path]:
    """Milliseconds from the exec of ``relay`` to the simulated CLI's first screen at the outer PTY."""
    ws = fresh_workspace(setup, relay)
    env = dict(
        setup.base_env,
        SIM_STARTUP_SECONDS="0",
        SIM_BUSY_SECONDS="0.3",
        SIM_TRANSCRIPT_DIR=str(ws / ".waaah" / "simulated"),
        WAAAH_RESTART_BASE_SECONDS=str(RESTART_BASE_S),
    )
    argv = setup.child_argv() if relay == "direct" else [WAAAH, "agent", "--start=simulated"]
    started = time.monotonic_ns()
    outer = Outer(argv, env, str(ws))
    try:
        shown = outer.expect_at(rb"SIMULATED AGENT", 30)
    except BaseException:
        outer.kill()
        raise
    return (shown - started) / 1e6, outer, ws


def felt_round(setup: Setup, failures: list[str], direct_first: bool) -> Sample:
    from waaah_agent.core.supervise.policy import PolicyConfig

    sample: Sample = {}
    for relay in ("direct", "waaah") if direct_first else ("waaah", "direct"):
        ms, outer, ws = first_screen(setup, relay)
        sample[f"startup_{relay}_ms"] = ms
        if relay == "direct":
            outer.kill()
            continue
        try:
            sample |= continue_and_restart(outer, ws, PolicyConfig().settle)
            os.kill(outer.pid, signal.SIGTERM)
        finally:
            ensure_done(outer, "waaah felt round", failures)
    sample["startup_overhead_ms"] = sample["startup_waaah_ms"] - sample["startup_direct_ms"]
    return sample


def continue_and_restart(outer: Outer, ws: Path, settle: float) -> Sample:
    """The workflow's answer ends a turn: until the continue prompt is pasted. Then SIGKILL the
    agent: until waaah has noticed (its restart event) and spawned the next (its start event)."""
    # The answer and the ready screen come in one write: the turn's end, as the terminal shows it.
    turn_end = wall(outer.expect_at(rb"\(simulated\) Received \d+ characters", 30))

    def pasted(events: list[dict[str, Any]]) -> dict[str, Any] | None:
        return next(
            (
                e
                for e in events
                if e["event"] == "delivery" and e["kind"] == "continue" and e["phase"] == "pasted"
            ),
            None,
        )

    paste = wait_event(outer, ws, pasted, "continue prompt pasted", 30)
    events = session_events(ws)
    seen = next(
        (
            e
            for e in events
            if e["event"] == "state" and e["state"] == "ready" and e["ts"] >= turn_end - 0.002
        ),
        None,
    )
    continue_ms = (paste["ts"] - turn_end) * 1000
    sample: Sample = {"continue_ms": continue_ms, "continue_less_settle_ms": continue_ms - settle * 1000}
    if seen is not None:
        sample["turn_end_seen_ms"] = (seen["ts"] - turn_end) * 1000
    agent_pid = next(e["pid"] for e in events if e["event"] == "start")
    killed = time.time()
    os.kill(agent_pid, signal.SIGKILL)

    def respawned(events: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
        restart = next((e for e in events if e["event"] == "restart"), None)
        starts = [e for e in events if e["event"] == "start"]
        return (restart, starts[1]) if restart and len(starts) > 1 else None

    restart, start = wait_event(outer, ws, respawned, "restart and second start", 30)
    sample["crash_seen_ms"] = (restart["ts"] - killed) * 1000
    sample["restart_less_backoff_ms"] = (start["ts"] - killed - restart["delay"]) * 1000
    # The new agent's screen comes through the loop: it runs, and handles a SIGTERM (until then
    # a SIGTERM finds no handler of waaah's in place).
    outer.expect(rb"Resumed session", 30)
    return sample


def run_felt(setup: Setup, results: Results) -> None:
    for n in range(FELT_ROUNDS):
        sample = felt_round(setup, results.failures, direct_first=n % 2 == 0)
        results.felt.append(sample)
        print(
            f"felt {n + 1}/{FELT_ROUNDS}: first screen +{sample['startup_overhead_ms']:.0f} ms through waaah, "
            f"restart {sample['restart_less_backoff_ms']:.0f} ms + backoff, "
            f"continue {sample['continue_ms']:.0f} ms after the turn's end",
            flush=True,
        )


# -- in-process cost of the screen model and the line cleaner -------------------------------------
def screen_costs() -> Sample:
    """CPU ms per MB of recorded agent screens: Screen + detect per 64 KiB chunk, and LineCleaner."""
    from waaah_agent.adapters import registry
    from waaah_agent.core.supervise.detect import detect
    from waaah_agent.core.supervise.screen import Screen
    from waaah_agent.core.supervise.textlog import LineCleaner

    recorded = sorted((ROOT / "tests" / "fixtures" / "screens").glob("*/*.bin"))
    if not recorded:
        raise BenchError("no recorded screens in tests/fixtures/screens")
    one = b"".join(p.read_bytes() for p in recorded)
    data = one * max(1, int(SCREEN_MB * MB / len(one)))
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    mb = len(data) / MB
    adapter = registry()["gemini"]

    screen = Screen(COLS, ROWS)
    t0 = time.process_time()
    for chunk in chunks:
        screen.feed(chunk)
        detect(adapter.rules, screen.view())
    screen_ms = (time.process_time() - t0) * 1000 / mb

    cleaner = LineCleaner()
    t0 = time.process_time()
    for chunk in chunks:
        cleaner.feed(chunk, time.monotonic())
    cleaner_ms = (time.process_time() - t0) * 1000 / mb
    return {"screen_ms_per_mb": screen_ms, "cleaner_ms_per_mb": cleaner_ms, "screen_input_mb": mb}


# -- running it all --------------------------------------------------------------------------------
@dataclass
class Results:
    rounds: dict[str, list[Sample]] = field(default_factory=lambda: {r: [] for r in RELAYS})
    once: dict[str, Sample] = field(default_factory=lambda: {r: {} for r in RELAYS})
    felt: list[Sample] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)  # what the last waaah blast's record holds

    def felt_stats(self, key: str) -> dict[str, float] | None:
        values = [s[key] for s in self.felt if key in s]
        if not values:
            return None
        return {"p50": statistics.median(values), "max": max(values), "n": len(values)}

    def median(self, relay: str, key: str) -> float | None:
        values = [s[key] for s in self.rounds[relay] if key in s]
        if not values:
            return self.once[relay].get(key)
        return statistics.median(values)


def run_rounds(setup: Setup, results: Results) -> None:
    for n in range(ROUNDS):
        order = RELAYS[n % len(RELAYS) :] + RELAYS[: n % len(RELAYS)]
        samples: dict[str, Sample] = {r: {} for r in RELAYS}
        for measure in (measure_latency, measure_keys, measure_blast):
            for relay in order:
                samples[relay] |= measure(setup, relay, results.failures)
        for relay in RELAYS:
            results.rounds[relay].append(samples[relay])
        w, d = samples["waaah"], samples["direct"]
        print(
            f"round {n + 1}/{ROUNDS}: waaah p99 +{w['lat_p99'] - d['lat_p99']:.2f} ms, "
            f"{w['mb_per_s']:.1f} MB/s (direct {d['mb_per_s']:.1f}, script {samples['script']['mb_per_s']:.1f}, "
            f"bare Python {samples['python']['mb_per_s']:.1f})",
            flush=True,
        )


def run_once(setup: Setup, results: Results) -> None:
    for relay in ("script", "waaah"):
        results.once[relay] |= measure_idle(setup, relay, results.failures)
        print(f"idle {relay}: {results.once[relay]['idle_cpu_pct']:.3f} % of a core", flush=True)
        results.once[relay] |= measure_waiting(setup, relay, results.failures)
        print(
            f"gemini waiting, {relay}: {results.once[relay]['waiting_cpu_pct']:.2f} % of a core", flush=True
        )
        for cli, stream in OTHER_WAITS.items():
            pct = measure_waiting(setup, relay, results.failures, stream)["waiting_cpu_pct"]
            results.once[relay][f"waiting_cpu_pct_{cli}"] = pct
            print(f"{cli} waiting, {relay}: {pct:.2f} % of a core", flush=True)
    for relay in ("script", "waaah"):
        big = measure_blast(setup, relay, results.failures, BIG_MB)
        results.once[relay] |= {
            "big_mb_per_s": big["mb_per_s"],
            "big_cpu_s_per_100mb": big["cpu_s_per_100mb"],
            "rss_after_big_mb": big["rss_end_mb"],
            "rss_peak_big_mb": big["rss_peak_mb"],
            "rss_at_100mb": big.get("rss_at_100mb", 0.0),
        }
        print(
            f"{BIG_MB:.0f} MB through {relay}: {big['mb_per_s']:.1f} MB/s, "
            f"{big['cpu_s_per_100mb']:.2f} CPU s per 100 MB, RSS {big['rss_end_mb']:.1f} MB",
            flush=True,
        )
    results.record = record_check(setup)
    print(f"the record of the last blast: {results.record}", flush=True)
    # Two floods besides the agent-like text: a TUI's coloured frames (an escape between most
    # characters) and source code (keys and tokens named on most lines: this package's sources).
    source = setup.workspace.parent / "source.py.txt"
    source.write_bytes(b"".join(p.read_bytes() for p in sorted((ROOT / "waaah_agent").rglob("*.py"))))
    floods = (("tui", f"{TUI_STREAM.parent.name}'s frames", TUI_STREAM), ("code", "source code", source))
    for key, label, path in floods:
        for relay in ("script", "waaah"):
            flood = measure_blast(setup, relay, results.failures, BLAST_MB, path)
            results.once[relay] |= {
                f"{key}_mb_per_s": flood["mb_per_s"],
                f"{key}_cpu_s_per_100mb": flood["cpu_s_per_100mb"],
            }
            print(
                f"{BLAST_MB:.0f} MB of {label} through {relay}: "
                f"{flood['mb_per_s']:.1f} MB/s, {flood['cpu_s_per_100mb']:.2f} CPU s per 100 MB",
                flush=True,
            )


# -- the report ------------------------------------------------------------------------------------
ROWS_SPEC: list[tuple[str, str, str]] = [
    # key, label, kind: "lat" (show relay minus direct), "ratio" (relay / direct), "abs" (no direct)
    ("lat_p50", "output latency p50 (ms)", "lat"),
    ("lat_p90", "output latency p90 (ms)", "lat"),
    ("lat_p99", "output latency p99 (ms)", "lat"),
    ("lat_max", "output latency max (ms)", "lat"),
    ("key_p50", "keystroke latency p50 (ms)", "lat"),
    ("key_p99", "keystroke latency p99 (ms)", "lat"),
    ("mb_per_s", f"throughput, {BLAST_MB:.0f} MB blast (MB/s)", "ratio"),
    ("cpu_s_per_100mb", "relay CPU s per 100 MB", "abs"),
    ("rss_peak_mb", f"relay peak RSS after {BLAST_MB:.0f} MB (MB)", "abs"),
    ("idle_cpu_pct", f"idle CPU, {SILENT_S:.0f} s silent (% core)", "abs"),
    ("rss_idle_mb", "RSS when idle (MB)", "abs"),
    ("waiting_cpu_pct", f"CPU while gemini waits, {SILENT_S:.0f} s of its redraws (% core)", "abs"),
    ("waiting_cpu_pct_claude", f"CPU while claude waits, {SILENT_S:.0f} s of its redraws (% core)", "abs"),
    ("waiting_cpu_pct_codex", f"CPU while codex waits, {SILENT_S:.0f} s of its redraws (% core)", "abs"),
    ("big_mb_per_s", f"throughput, {BIG_MB:.0f} MB blast (MB/s)", "abs"),
    ("big_cpu_s_per_100mb", f"CPU s per 100 MB over {BIG_MB:.0f} MB", "abs"),
    ("rss_at_100mb", "RSS after 100 MB of the big blast (MB)", "abs"),
    ("rss_after_big_mb", f"RSS after {BIG_MB:.0f} MB (MB)", "abs"),
    ("rss_peak_big_mb", f"peak RSS over {BIG_MB:.0f} MB (MB)", "abs"),
    ("tui_mb_per_s", f"throughput, {BLAST_MB:.0f} MB of claude's frames (MB/s)", "abs"),
    ("tui_cpu_s_per_100mb", "CPU s per 100 MB of claude's frames", "abs"),
    ("code_mb_per_s", f"throughput, {BLAST_MB:.0f} MB of source code (MB/s)", "abs"),
    ("code_cpu_s_per_100mb", "CPU s per 100 MB of source code", "abs"),
]


FELT_SPEC: list[tuple[str, str]] = [
    ("startup_direct_ms", "exec to the CLI's first screen, direct (ms)"),
    ("startup_waaah_ms", "exec to the CLI's first screen, waaah (ms)"),
    ("startup_overhead_ms", "  waaah's start-up overhead (ms)"),
    ("restart_less_backoff_ms", "agent killed -> next agent spawned, less backoff (ms)"),
    ("crash_seen_ms", "  of which: the death noticed (ms)"),
    ("continue_ms", "turn ended -> continue prompt pasted (ms)"),
    ("continue_less_settle_ms", "  less the policy's deliberate settle (ms)"),
    ("turn_end_seen_ms", "  of which: the turn's end seen (ms)"),
]


def felt_table(results: Results) -> str:
    from waaah_agent.core.supervise.policy import PolicyConfig

    head = f"{'felt by users (' + str(FELT_ROUNDS) + ' rounds, simulated CLI)':56} {'p50':>8} {'max':>8}"
    lines = [head, "-" * len(head)]
    for key, label in FELT_SPEC:
        stats = results.felt_stats(key)
        p50, top = (stats["p50"], stats["max"]) if stats else (None, None)
        lines.append(f"{label:56} {cell(p50):>8} {cell(top):>8}")
    lines.append(
        f"(backoff: WAAAH_RESTART_BASE_SECONDS={RESTART_BASE_S}, the delay each restart event states is "
        f"subtracted, to 10 ms; settle: {PolicyConfig().settle:.1f} s of quiet before a continue prompt)"
    )
    return "\n".join(lines)


def cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if abs(value) < 1 else f"{value:.2f}"


def versus(value: float | None, direct: float | None, kind: str) -> str:
    if value is None or direct is None or kind == "abs":
        return ""
    if kind == "lat":
        return f"{value - direct:+.2f}"
    return f"{value / direct:.2f}x" if direct else ""


def table(results: Results, costs: Sample) -> str:
    names = {"direct": "direct", "script": "script", "python": "bare py", "waaah": "waaah"}
    head = f"{'metric (median of ' + str(ROUNDS) + ' rounds)':44} {'direct':>8}" + "".join(
        f" {names[r]:>8} {'vs dir':>7}" for r in RELAYS[1:]
    )
    lines = [head, "-" * len(head)]
    for key, label, kind in ROWS_SPEC:
        d, *others = (results.median(r, key) for r in RELAYS)
        lines.append(
            f"{label:44} {cell(d):>8}" + "".join(f" {cell(v):>8} {versus(v, d, kind):>7}" for v in others)
        )
    lines.append("-" * len(head))
    lines.append(f"{'screen model + detect (CPU ms per MB)':44} {costs['screen_ms_per_mb']:>8.1f}")
    lines.append(f"{'LineCleaner (CPU ms per MB)':44} {costs['cleaner_ms_per_mb']:>8.1f}")
    return "\n".join(lines)


def goals(results: Results) -> list[str]:
    """Each target, met or missed, with its figures (docs/performance.md)."""

    def get(relay: str, key: str) -> float:
        value = results.median(relay, key)
        return float("nan") if value is None else value

    w, s_, d = "waaah", "script", "direct"
    rss_after = get(w, "rss_after_big_mb")
    checks = [
        (
            f"throughput over {BLAST_MB:.0f} MB {get(w, 'mb_per_s'):.1f} MB/s >= script's {get(s_, 'mb_per_s'):.1f}",
            get(w, "mb_per_s") >= get(s_, "mb_per_s"),
        ),
        (
            f"throughput over {BIG_MB:.0f} MB {get(w, 'big_mb_per_s'):.1f} MB/s >= script's "
            f"{get(s_, 'big_mb_per_s'):.1f}",
            get(w, "big_mb_per_s") >= get(s_, "big_mb_per_s"),
        ),
        (
            f"CPU per 100 MB {get(w, 'cpu_s_per_100mb'):.2f} s <= 1.5x script's {get(s_, 'cpu_s_per_100mb'):.2f} "
            f"({get(w, 'cpu_s_per_100mb') / get(s_, 'cpu_s_per_100mb'):.2f}x; over {BIG_MB:.0f} MB "
            f"{get(w, 'big_cpu_s_per_100mb'):.2f} against {get(s_, 'big_cpu_s_per_100mb'):.2f})",
            get(w, "cpu_s_per_100mb") <= 1.5 * get(s_, "cpu_s_per_100mb")
            and get(w, "big_cpu_s_per_100mb") <= 1.5 * get(s_, "big_cpu_s_per_100mb"),
        ),
        (
            f"keystroke p50 {get(w, 'key_p50'):.3f} ms within 0.1 ms of script's {get(s_, 'key_p50'):.3f}",
            get(w, "key_p50") <= get(s_, "key_p50") + 0.1,
        ),
        (
            f"keystroke p99 {get(w, 'key_p99'):.3f} ms within 0.5 ms of script's {get(s_, 'key_p99'):.3f}",
            get(w, "key_p99") <= get(s_, "key_p99") + 0.5,
        ),
        (
            f"output latency p99 {get(w, 'lat_p99'):.3f} ms within 1 ms of direct's {get(d, 'lat_p99'):.3f}",
            get(w, "lat_p99") <= get(d, "lat_p99") + 1.0,
        ),
        (
            f"CPU while gemini waits in its loop {get(w, 'waiting_cpu_pct'):.2f} % <= 1.5 % of a core",
            get(w, "waiting_cpu_pct") <= 1.5,
        ),
        (
            f"nothing lost: the .cast holds every byte ({results.record.get('cast_body_bytes')} of "
            f"{results.record.get('expected_bytes')}), the text log the blast's lines "
            f"({results.record.get('text_lines_ok')}), no part of the known key in a file "
            f"({results.record.get('key_parts_in')})",
            bool(results.record.get("ok")),
        ),
        (
            f"idle CPU {get(w, 'idle_cpu_pct'):.3f} % < 0.2 % of a core",
            get(w, "idle_cpu_pct") < 0.2,
        ),
        (
            f"RSS after {BIG_MB:.0f} MB {rss_after:.1f} MB < 80 MB, flat "
            f"(after 100 MB {get(w, 'rss_at_100mb'):.1f} MB)",
            rss_after < 80 and rss_after - get(w, "rss_at_100mb") < 10,
        ),
    ]
    report = [f"[{'met ' if ok else 'MISS'}] {text}" for text, ok in checks]
    bare = get("python", "mb_per_s")
    report.append(
        f"[info] the bare Python relay: {bare:.1f} MB/s, {bare / get(s_, 'mb_per_s'):.2f}x script's; "
        f"waaah {get(w, 'mb_per_s') / bare:.2f}x the bare relay's, "
        f"{get(w, 'cpu_s_per_100mb') - get('python', 'cpu_s_per_100mb'):.2f} CPU s per 100 MB more"
    )
    load = os.getloadavg()
    report.append(
        f"[info] load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores "
        "(throughput and latency move with the machine's other work; CPU seconds much less)"
    )
    return report


def machine() -> dict[str, Any]:
    model = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    script_version = subprocess.run(["script", "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "script": script_version,
        "load_avg": os.getloadavg(),
    }


def save(results: Results, costs: Sample, report: str, info: dict[str, Any]) -> Path:
    folder = ROOT / "bench-results"
    folder.mkdir(exist_ok=True)
    path = folder / f"{datetime.now():%Y%m%d-%H%M%S}.json"
    medians = {r: {k: results.median(r, k) for k, _, _ in ROWS_SPEC} for r in RELAYS}
    payload = {
        "machine": info,
        "settings": {
            "rounds": ROUNDS,
            "latency_lines": LAT_LINES,
            "keys": KEYS,
            "blast_mb": BLAST_MB,
            "big_mb": BIG_MB,
            "silent_s": SILENT_S,
            "felt_rounds": FELT_ROUNDS,
            "size": [COLS, ROWS],
        },
        "medians": medians,
        "rounds": results.rounds,
        "once": results.once,
        "felt": {key: results.felt_stats(key) for key, _ in FELT_SPEC},
        "felt_rounds": results.felt,
        "felt_notes": {
            "startup": "exec to the simulated CLI's first screen at the outer PTY, direct vs `waaah agent`",
            "restart_less_backoff_ms": "SIGKILL of the agent to waaah's next `start` event, less the "
            f"`delay` of its `restart` event (WAAAH_RESTART_BASE_SECONDS={RESTART_BASE_S}; stated to 10 ms)",
            "continue_ms": "the turn's end as the terminal shows it to the `delivery` event (continue, pasted)",
            "continue_less_settle_ms": "the same less PolicyConfig.settle, the quiet the policy waits for",
        },
        "in_process": costs,
        "goals": goals(results),
        "record": results.record,
        "load_avg_end": os.getloadavg(),
        "failures": results.failures,
        "table": report,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


# -- the bare Python relay ---------------------------------------------------------------------------
def bare_relay(argv: list[str]) -> int:
    """Relay ``argv`` in a PTY with nothing else: select, read, write, both ways (raw mode).

    No logs, no screen model, no timers, no queues: the floor for a relay in Python.
    """
    proc = PtyProcess.spawn(argv, dimensions=(ROWS, COLS))
    saved = termios.tcgetattr(0)
    tty.setraw(0, termios.TCSANOW)
    try:
        while True:
            ready, _, _ = select.select([proc.fd, 0], [], [])
            if 0 in ready:
                os.write(proc.fd, os.read(0, 65536))
            if proc.fd in ready:
                try:
                    data = os.read(proc.fd, 65536)
                except OSError:  # EIO: the child closed its terminal
                    break
                os.write(1, data)
    finally:
        termios.tcsetattr(0, termios.TCSANOW, saved)
    proc.wait()
    return proc.exitstatus or 0


def preflight() -> None:
    for tool, hint in (("script", "install util-linux"), ("git", "install git")):
        if shutil.which(tool) is None:
            raise BenchError(f"`{tool}` is not on PATH: {hint}")
    if not Path(WAAAH).exists():
        raise BenchError(f"{WAAAH} not found: run `make venv` first")


def main() -> int:
    if sys.argv[1:2] == ["--bare-relay"]:
        return bare_relay(sys.argv[2:])
    started = time.monotonic()
    try:
        preflight()
        info = machine()
        print(
            f"{info['cpu']}, {info['cores']} cores, Linux {info['kernel']}, Python {info['python']}",
            flush=True,
        )
        results = Results()
        with make_setup() as setup:
            run_rounds(setup, results)
            run_once(setup, results)
            run_felt(setup, results)
        costs = screen_costs()
    except BenchError as err:
        print(f"bench_relay: {err}", file=sys.stderr)
        return 1
    report = table(results, costs) + "\n\n" + felt_table(results)
    print()
    print(report)
    print()
    print("\n".join(goals(results)))
    for failure in results.failures:
        print(f"warning: {failure}")
    path = save(results, costs, report, info)
    print(f"\n{time.monotonic() - started:.0f} s; results in {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
