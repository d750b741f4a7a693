"""Record a real CLI's output while it sits in wait_for_prompt, with the time of each read.

    .venv/bin/python scripts/record_wait_stream.py [--cli gemini|claude|codex] [--seconds 30]

The CLI (the pinned release, offline against the fake model API, in a 120x40 PTY with a
throwaway HOME) is asked to call wait_for_prompt, whose MCP server (tests/doubles/slow_mcp.py)
holds the call; what the CLI prints meanwhile (gemini redraws its live area many times a
second, claude and codex their spinner line) is saved to
``tests/fixtures/streams/<cli>-<version>/wait-loop.jsonl.gz``: a first line
``{"cli", "version", "cols", "rows", "seconds"}``, then one ``[t, base64 bytes]`` per read, ``t``
in seconds since the wait began. `make bench` and the tests replay it at its real pace
(``SIM_MODE=replay`` of the simulated agent).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import record_screens as rec  # noqa: E402

from tests.doubles.cli_homes import cli_version, slow_mcp_server  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", choices=sorted(rec.PROFILES), default="gemini")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    cli, profile = args.cli, rec.PROFILES[args.cli]
    version = cli_version(cli)
    out = REPO / "tests" / "fixtures" / "streams" / f"{cli}-{version}" / "wait-loop.jsonl.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    hold = args.seconds + 30
    with rec.session(cli, mcp_servers={"waaah": slow_mcp_server(hold)}) as (pty, _):
        rec.start_idle(pty, profile)
        pty.paste(rec.TOOL_PROMPT)
        pty.enter()
        pty.wait(profile.tool, "wait_for_prompt in flight")
        start, reads = len(pty.raw), []
        began = time.monotonic()
        while (now := time.monotonic()) < began + args.seconds:
            before = len(pty.raw)
            pty.pump(0.005)
            if len(pty.raw) > before:
                reads.append((round(now - began, 4), bytes(pty.raw[before:])))
        head = {
            "cli": cli,
            "version": version,
            "cols": rec.COLS,
            "rows": rec.ROWS,
            "seconds": args.seconds,
        }
        lines = [json.dumps(head)] + [json.dumps([t, base64.b64encode(b).decode()]) for t, b in reads]
        out.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
        total = len(pty.raw) - start
        print(
            f"{out.relative_to(REPO)}: {len(reads)} reads, {total} bytes in {args.seconds:.0f} s "
            f"({total / args.seconds / 1024:.1f} KB/s), {out.stat().st_size} bytes gzipped"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
