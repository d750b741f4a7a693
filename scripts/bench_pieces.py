"""What each piece of the relay's recording costs, in process, in CPU seconds per 100 MB.

The blast text of ``scripts/bench_relay.py`` (the simulated agent's measurement mode: agent-like
lines with colours, a spinner redrawn with CR, box characters) in reads of BENCH_PIECE_KB (16 KB:
what the loop joins from the PTY under a flood), with two known secrets in the redactor, as a
user's environment has. Each figure is the best of BENCH_PIECE_RUNS runs of process CPU time
(other work on the machine slows a run; the best is the least disturbed).

    .venv/bin/python scripts/bench_pieces.py
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from waaah_agent.core.secrets import redact, separators, shapes  # noqa: E402
from waaah_agent.core.secrets.redact import Redactor, cast_facts  # noqa: E402
from waaah_agent.core.supervise import castjson
from waaah_agent.core.supervise.textlog import LineCleaner  # noqa: E402
from waaah_agent.runtime.supervise import logs as logs_module
from waaah_agent.runtime.supervise.logfiles import char_boundary  # noqa: E402
from waaah_agent.runtime.supervise.logs import SessionLogs  # noqa: E402
from waaah_agent.runtime.supervise.parts import COMPRESS_LEVEL, GZIP  # noqa: E402
from waaah_agent.simulated_modes import AGENT_TEXT  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
PIECE = int(os.environ.get("BENCH_PIECE_KB", "16")) * 1024
RUNS = int(os.environ.get("BENCH_PIECE_RUNS", "3"))
SECRETS = ["AIzaSyBench-0123456789abcdefghijklmnopq", "ghp_" + "b3nchT0ken" * 4]


def blast(total: int) -> list[bytes]:
    block = AGENT_TEXT.encode() * (65536 // len(AGENT_TEXT.encode()))
    data = (block * (total // len(block) + 1))[:total]
    chunks, at = [], 0
    while at < len(data):
        end = char_boundary(data, min(len(data), at + PIECE)) if at + PIECE < len(data) else len(data)
        chunks.append(data[at:end])
        at = end
    return chunks


def tui_frames(total: int) -> list[bytes]:
    """claude's recorded wait (its spinner's frames) over and over, in batches of 256 KB (as the
    record batches a flood)."""
    path = ROOT / "tests" / "fixtures" / "streams" / "claude-2.1.332" / "wait-loop.jsonl.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()[1:]
    frames = b"".join(base64.b64decode(json.loads(line)[1]) for line in lines)
    data = (frames * (total // len(frames) + 1))[:total]
    return [data[at : at + 256 * 1024] for at in range(0, len(data), 256 * 1024)]


def source_code(total: int) -> list[bytes]:
    """This package's sources over and over (lines ended as a terminal gets them), in batches of
    256 KB."""
    files = sorted((ROOT / "waaah_agent").rglob("*.py"))
    text = b"".join(p.read_bytes() for p in files).replace(b"\n", b"\r\n")
    data = (text * (total // len(text) + 1))[:total]
    return [data[at : at + 256 * 1024] for at in range(0, len(data), 256 * 1024)]


def best(work: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return min(times)


def each(items: list[bytes], work: Callable[[bytes], object]) -> Callable[[], None]:
    """``work`` on each item, its result dropped at once (as the relay drops it)."""

    def run() -> None:
        for item in items:
            work(item)

    return run


def main() -> int:
    chunks = blast(100 * MB)
    redactor = Redactor(SECRETS)
    assert redactor.scanner is not None  # compiled before the clock starts
    records = [redactor.record(c) for c in chunks]
    budget = logs_module.CLEAN_PER_SECOND
    facts = [cast_facts(d) for d, _ in records]

    def replace_all() -> None:
        for (data, _), present in zip(records, facts, strict=True):
            castjson.replaced(data, present)

    rows: list[tuple[str, float]] = [
        ("native pass: known secrets' runs and the shapes", best(each(chunks, redactor.scanner.spans))),
        ("a chunk's end held back (Redactor.hold_from)", best(each(chunks, redactor.hold_from))),
        (
            "JSON escaping (castjson.escaped: "
            + (
                "native, UTF-8 checked in the same pass)"
                if castjson.NATIVE
                else "built without a C compiler)"
            ),
            best(each([d for d, _ in records], lambda d: castjson.escaped(d, None))),
        ),
        (
            "  without a C compiler: native pass for what to escape (FACTS)",
            best(each(chunks, cast_facts)),
        ),
        (
            "  without a C compiler: bytes.replace (castjson.replaced)",
            best(replace_all),
        ),
        (
            "  (for comparison: decoded and escaped by orjson)",
            best(each(chunks, castjson.json_string)),
        ),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        logs_module.CLEAN_PER_SECOND = 0  # the .cast alone
        cast_only = SessionLogs(Path(tmp) / "a", "bench", (120, 40), redactor)
        rows.append(
            (
                "the whole .cast path (SessionLogs.output, no text log)",
                best(each(chunks, cast_only.output)),
            )
        )
        cast_only.close()
    # A TUI's coloured frames (claude's recorded wait): an escape between most characters, so the
    # look for a known secret spread through escapes runs on every chunk.
    tui = tui_frames(20 * MB)
    tui_redactor = Redactor(SECRETS)
    per_tui = 100 * MB / sum(map(len, tui))
    rows.append(
        (
            "a TUI's frames: the secrets' pass (Redactor.record), "
            + ("separators removed in C" if separators.NATIVE_VISIBLE else "built without a C compiler"),
            best(each(tui, tui_redactor.record)) * per_tui,
        )
    )
    if separators.NATIVE_VISIBLE:
        native_visible, native_text = separators._native_visible, separators._native_text
        separators._native_visible = separators._native_text = None
        try:
            rows.append(
                (
                    "  without a C compiler: pairs looked for, separators removed in Python",
                    best(each(tui, tui_redactor.record)) * per_tui,
                )
            )
        finally:
            separators._native_visible, separators._native_text = native_visible, native_text
    # Source code (this package's own): keys and tokens named on most lines, so nearly every
    # chunk holds a shape's anchor and the shapes are looked for in it.
    code = source_code(20 * MB)
    per_code = 100 * MB / sum(map(len, code))
    rows.append(
        (
            "source code: the secrets' pass (shapes tried where they may begin)",
            best(each(code, redactor.record)) * per_code,
        )
    )

    def whole_chunk(data: bytes) -> bytes:
        for _, pattern in shapes.RAW_SHAPES:
            data = pattern.sub(redact._keep_raw_prefix, data)
        return shapes.RAW_ASSIGN.sub(redact._keep_raw_prefix, data)

    rows.append(
        (
            "  (for comparison: each shape over the whole chunk, as Python's re does)",
            best(each(code, whole_chunk)) * per_code,
        )
    )
    cleaner_mb = 4
    text = blast(cleaner_mb * MB)
    per_mb = best(lambda: [LineCleaner().feed(c, 0.0) for c in text]) / cleaner_mb
    rows.append(("text log cleaning, per 100 MB cleaned", per_mb * 100))
    sample = b"".join(r[0] for r in records[: 4 * MB // PIECE])
    rows.append(
        (
            f"compressing a rolled part ({GZIP.__name__} level {COMPRESS_LEVEL}; per 100 MB of .cast)",
            best(lambda: GZIP.compress(sample, COMPRESS_LEVEL)) * 100 * MB / len(sample),
        )
    )
    # The blast text repeats every 64 KB and compresses at once; code is what agents print.
    code_cast = b"".join(castjson.escaped(redactor.record(c)[0], None) for c in code[:16])
    rows.append(
        (
            "  ... of source code's .cast (text that does not repeat)",
            best(lambda: GZIP.compress(code_cast, COMPRESS_LEVEL)) * 100 * MB / len(code_cast),
        )
    )
    print(
        f"CPU seconds per 100 MB of agent text in {PIECE // 1024} KB reads (best of {RUNS}; load {os.getloadavg()[0]:.2f})"
    )
    for label, seconds in rows:
        print(f"  {label:68} {seconds:6.3f}")
    print(
        f"  the text log cleans at most {budget // 1024} KB a second: {per_mb * budget / MB * 100:.1f} % of a core "
        "under a flood"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
