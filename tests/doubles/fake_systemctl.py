"""A fake ``systemctl`` first on PATH, so that no test asks the machine's own user systemd.

It appends each call's arguments to a log (one line each) and succeeds; with
``FAKE_SYSTEMCTL_FAIL`` set in its environment it fails as systemctl does where no user bus
answers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SCRIPT = """#!/bin/sh
echo "$*" >> '{log}'
if [ -n "$FAKE_SYSTEMCTL_FAIL" ]; then
    echo "Failed to connect to bus: No medium found" >&2
    exit 1
fi
exit 0
"""


def fake_systemctl(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the fake in ``folder`` and ``folder`` first on this process' PATH (the environments
    the tests build copy it); the log of its calls."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "systemctl.log"
    log.touch()
    script = folder / "systemctl"
    script.write_text(SCRIPT.format(log=log))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    return log
