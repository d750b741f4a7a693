"""The simulated agent's measurement modes (SIM_MODE), for `scripts/bench_relay.py`.

SIM_MODE selects a measurement mode for `scripts/bench_relay.py` instead of the interactive
simulation (the default). Each mode waits SIM_STARTUP_SECONDS, prints a START line, then:
``latency`` writes SIM_LINES lines (default 2000), each carrying time.monotonic_ns() at
write time, SIM_GAP_MS apart (default 0.5); ``blast`` writes SIM_MB megabytes (default 50)
of agent-like text (or, with SIM_BLAST_FROM, a file's bytes over and over: a recorded stream's
reads, a TUI's coloured frames, or any file, source code) as fast as the terminal takes it,
then a BLAST-END line; ``keys`` puts the
terminal in raw mode and answers each byte read with an ack line holding the receive time
(``q`` ends it); ``silent`` prints nothing for SIM_SECONDS (default 20); ``replay`` writes a
recorded stream (SIM_REPLAY: a ``wait-loop.jsonl.gz`` of scripts/record_wait_stream.py) at its
recorded pace, over and over, for SIM_SECONDS. Then it exits 0.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import sys
import termios
import time
import tty
from pathlib import Path

AGENT_TEXT = (
    "\x1b[1m✦ Reading\x1b[0m src/app/handlers.py (lines 120-180)\n"
    "  \x1b[32m+    result = await client.fetch(url, timeout=30)\x1b[0m\n"
    "  \x1b[31m-    result = client.fetch(url)\x1b[0m\n"
    "  │ The handler now awaits the fetch and passes a timeout, so a slow upstream\n"
    "  │ cannot block the event loop. Next I will update the tests in tests/test_api.py.\n"
    "\x1b[2m⠋ Running: pytest -q tests/test_api.py\x1b[0m\r\x1b[2K"
    "\x1b[2m⠙ Running: pytest -q tests/test_api.py\x1b[0m\r\x1b[2K"
    "....................................................... [ 87%] ✓ 42 passed in 1.23s\n"
)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _say(fd: int, text: str) -> None:
    _write_all(fd, text.encode())


def _latency(fd: int) -> None:
    lines = int(os.environ.get("SIM_LINES", "2000"))
    gap = float(os.environ.get("SIM_GAP_MS", "0.5")) / 1000
    for i in range(lines):
        _say(fd, f"LAT {i} {time.monotonic_ns()}\n")
        if gap:
            time.sleep(gap)
    _say(fd, "LAT-END\n")


def _blast(fd: int) -> None:
    total = int(float(os.environ.get("SIM_MB", "50")) * 1024 * 1024)
    if recorded := os.environ.get("SIM_BLAST_FROM"):
        path = Path(recorded)
        try:
            is_stream = path.name.endswith(".jsonl.gz")
            text = b"".join(data for _, data in _recorded_reads(path)) if is_stream else path.read_bytes()
        except (OSError, ValueError) as err:
            raise SystemExit(f"SIM_BLAST_FROM: cannot read {recorded}: {err}") from None
        if not text:
            raise SystemExit(f"SIM_BLAST_FROM: {recorded} is empty")
    else:
        text = AGENT_TEXT.encode()
    block = text * max(1, 65536 // len(text))  # whole characters (and reads) only
    if recorded:  # whole blocks: a sequence cut open at the end would hold back BLAST-END
        total = -(-total // len(block)) * len(block)
    sent = 0
    while sent < total:
        chunk = block[: total - sent]
        _write_all(fd, chunk)
        sent += len(chunk)
    newlines = block.count(b"\n") * (total // len(block)) + block[: total % len(block)].count(b"\n")
    _say(fd, f"\x1b[0m\nBLAST-END {sent} {newlines} {time.monotonic_ns()}\n")


def _keys(fd_in: int, fd_out: int) -> None:
    saved = termios.tcgetattr(fd_in) if os.isatty(fd_in) else None
    if saved is not None:
        tty.setraw(fd_in)
    try:
        _say(fd_out, "KEYS-READY\r\n")
        while True:
            data = os.read(fd_in, 1024)
            now = time.monotonic_ns()
            if not data or b"q" in data:
                return
            _say(fd_out, "".join(f"KEY {b:02x} {now}\r\n" for b in data))
    finally:
        if saved is not None:
            termios.tcsetattr(fd_in, termios.TCSANOW, saved)


def _recorded_reads(path: Path) -> list[tuple[float, bytes]]:
    """The reads of a ``wait-loop.jsonl.gz`` (scripts/record_wait_stream.py), with their times."""
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()[1:]
    return [(float(t), base64.b64decode(b)) for t, b in map(json.loads, lines)]


def _replay(fd: int, path: Path, seconds: float) -> None:
    """The recorded reads of ``path``, each at its time, the recording looped for ``seconds``."""
    reads = _recorded_reads(path)
    length = reads[-1][0] + 0.05
    began = time.monotonic()
    for lap in range(int(seconds // length) + 1):
        for t, data in reads:
            at = began + lap * length + t
            if at - began > seconds:
                return
            time.sleep(max(0.0, at - time.monotonic()))
            _write_all(fd, data)


def measure(mode: str) -> int:
    """Run one measurement mode (see the module docstring); 2 for an unknown mode."""
    fd_in, fd_out = sys.stdin.fileno(), sys.stdout.fileno()
    time.sleep(float(os.environ.get("SIM_STARTUP_SECONDS", "0.3")))
    _say(fd_out, f"START {mode} {time.monotonic_ns()}\r\n")
    if mode == "latency":
        _latency(fd_out)
    elif mode == "blast":
        time.sleep(0.05)  # the START line arrives on its own, so a reader can count what follows
        _blast(fd_out)
    elif mode == "keys":
        _keys(fd_in, fd_out)
    elif mode == "silent":
        time.sleep(float(os.environ.get("SIM_SECONDS", "20")))
        _say(fd_out, "SILENT-END\r\n")
    elif mode == "replay":
        _replay(fd_out, Path(os.environ["SIM_REPLAY"]), float(os.environ.get("SIM_SECONDS", "20")))
        _say(fd_out, "\r\nREPLAY-END\r\n")
    else:
        _say(fd_out, f"unknown SIM_MODE {mode!r}\r\n")
        return 2
    return 0
