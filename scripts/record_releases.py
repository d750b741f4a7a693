#!/usr/bin/env python3
"""Record what each installed CLI release says to --version and --help.

Run after `make clis clis-old`; writes tests/fixtures/releases/<cli>-<version>/version.txt and
help.txt for the pinned releases (.cache/clis) and the older ones (.cache/clis-old/<cli>-<v>).
Each CLI runs in a throwaway HOME with no credentials, as waaah asks it (runtime/releases.py).
The unit tests read these files to show what waaah decides for each release.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from waaah_agent.core.versions import parse_version  # noqa: E402
from waaah_agent.runtime.releases import probe_env  # noqa: E402

CLIS = ("gemini", "claude")
OUT = REPO / "tests" / "fixtures" / "releases"


def binaries() -> list[tuple[str, Path]]:
    found = [(name, REPO / ".cache" / "clis" / "node_modules" / ".bin" / name) for name in CLIS]
    for prefix in sorted((REPO / ".cache" / "clis-old").glob("*-*")):
        name = prefix.name.split("-", 1)[0]
        if name not in CLIS:
            continue  # codex has no release checks (docs/supervisor.md "CLI releases")
        found.append((name, prefix / "node_modules" / ".bin" / name))
    return [(name, path) for name, path in found if path.exists()]


def ask(binary: Path, flag: str) -> str:
    with tempfile.TemporaryDirectory(prefix="waaah-record-") as home:
        done = subprocess.run(
            [str(binary), flag],
            cwd=home,
            env=probe_env(os.environ, home),  # PATH (node) and the locale; no credentials
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    return done.stdout


def main() -> None:
    for name, binary in binaries():
        version_text = ask(binary, "--version")
        version = parse_version(version_text)
        if not version:
            print(f"{binary}: no version in {version_text!r}", file=sys.stderr)
            continue
        folder = OUT / f"{name}-{version}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "version.txt").write_text(version_text, encoding="utf-8")
        (folder / "help.txt").write_text(ask(binary, "--help"), encoding="utf-8")
        print(f"recorded {folder.relative_to(REPO)}")


if __name__ == "__main__":
    main()
