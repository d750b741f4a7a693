"""Evidence from the CLIs' own transcripts, read defensively (capped, regular files only)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

TRANSCRIPT_CAP = 32 * 1024 * 1024  # the workflow is the first prompt: it is near the start
MARKER_LINES = 3


def markers(prompt: str) -> list[bytes]:
    """Lines of ``prompt`` that a transcript stores as they are (JSON escapes none of them)."""
    found = []
    for line in prompt.splitlines():
        line = line.strip()
        if len(line) >= 24 and line.isascii() and line.isprintable() and not set(line) & set('"\\'):
            found.append(line.encode())
            if len(found) == MARKER_LINES:
                break
    return found


def holds_prompt(path: Path, prompt: str) -> bool | None:
    """Whether the transcript at ``path`` holds ``prompt``; None when it cannot tell."""
    wanted = markers(prompt)
    if not wanted:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # a FIFO, a device or a directory is no transcript
        with os.fdopen(fd, "rb", closefd=False) as fh:
            head = fh.read(TRANSCRIPT_CAP)
    except OSError:
        return None
    finally:
        os.close(fd)
    return all(marker in head for marker in wanted)
