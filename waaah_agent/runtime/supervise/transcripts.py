"""Evidence from the CLIs' own transcripts, read defensively (capped, regular files only)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from waaah_agent.core.tokens import Usage, UsageCounter
from waaah_agent.safe_read import open_regular

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
    try:  # a FIFO, a device or a directory is no transcript
        with os.fdopen(open_regular(path), "rb") as fh:
            head = fh.read(TRANSCRIPT_CAP)
    except OSError:
        return None
    return all(marker in head for marker in wanted)


def usage_of(path: Path, counter: UsageCounter) -> Usage:
    """The token totals of the transcript at ``path``, the whole file read by ``counter`` line by
    line (a long night's file is never held whole). A FIFO, a device or a directory is an
    OSError at once, never a read that blocks the supervisor."""
    with os.fdopen(open_regular(path), encoding="utf-8", errors="replace") as fh:
        return counter.feed(fh)


#: What one look at a transcript reads at most (the rest waits for the next look).
COMPACTION_READ = 8 * 1024 * 1024


@dataclass
class CompactionWatch:
    """Compactions the CLI marks in its transcript (Adapter.compactions), found as the file
    grows: each look reads only what was added since the last one, in whole lines."""

    finder: Callable[[Iterable[str]], set[str]]
    path: Path | None = None
    offset: int = 0
    known: set[str] = field(default_factory=set)

    @classmethod
    def begin(cls, finder: Callable[[Iterable[str]], set[str]], path: Path | None) -> CompactionWatch:
        """A watch from now on: compactions already in ``path`` are history, not news."""
        watch = cls(finder)
        watch.news(path)
        return watch

    def news(self, path: Path | None) -> set[str]:
        """Compactions added to ``path`` since the last look (a FIFO, a device or an unreadable
        file: none, and no error)."""
        if path is None:
            return set()
        if path != self.path:
            self.path, self.offset = path, 0
        try:
            with os.fdopen(open_regular(path), "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size < self.offset:  # rewritten: read it again (what was seen stays known)
                    self.offset = 0
                fh.seek(self.offset)
                data = fh.read(COMPACTION_READ)
        except OSError:
            return set()
        end = data.rfind(b"\n") + 1 if len(data) < COMPACTION_READ else len(data)
        self.offset += end
        found = self.finder(data[:end].decode("utf-8", "replace").splitlines()) - self.known
        self.known |= found
        return found
