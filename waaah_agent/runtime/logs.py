"""Session logs: clean timestamped text for grep/less, and a lossless asciicast v2 record.

Writes are buffered (an unbuffered write per chunk costs real CPU at high output rates)
and flushed by the loop's timer and at close. Each file rolls over at ``max_bytes`` and
only the newest ``keep`` sessions per agent are kept, so a chatty night cannot fill the disk.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import time
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import IO

from waaah_agent.core.redact import Redactor
from waaah_agent.core.textlog import LineCleaner

log = logging.getLogger(__name__)

BUFFER = 64 * 1024
# Bytes per second turned into clean text lines (~60 ms of CPU per MB, so at most ~3 % of a
# core). A flood beyond this (a dumped file, a build log) goes only to the lossless .cast,
# and the .log says how much it left out.
CLEAN_PER_SECOND = 512 * 1024
ROLLOVERS = 3  # <name>.log.1 .. .3 kept per session


def stamp(now: datetime) -> str:
    return now.strftime("%Y%m%d-%H%M%S")


class RollingFile:
    """An append-only file that rolls over to ``.1``, ``.2``... when it grows too big."""

    def __init__(self, path: Path, max_bytes: int, header: str = "") -> None:
        self.path = path
        self._max = max_bytes
        self._header = header
        self._fh: IO[str] = self._open()
        self._size = self.path.stat().st_size

    def _open(self) -> IO[str]:
        fresh = not self.path.exists()
        fh = self.path.open("a", encoding="utf-8", errors="surrogateescape", buffering=BUFFER)
        os.chmod(self.path, 0o600)
        if fresh and self._header:
            fh.write(self._header)
        return fh

    def write(self, text: str) -> None:
        if self._size + len(text) > self._max and self._size > len(self._header):
            self._roll()
        self._fh.write(text)
        self._size += len(text)

    def _roll(self) -> None:
        self._fh.close()
        for n in range(ROLLOVERS, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            newer = self.path.with_name(f"{self.path.name}.{n - 1}") if n > 1 else self.path
            if newer.exists():
                os.replace(newer, older)
        self._fh = self._open()
        self._size = len(self._header)

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class SessionLogs:
    """The two log files of one supervised run."""

    def __init__(
        self,
        folder: Path,
        agent: str,
        size: tuple[int, int],
        redactor: Redactor,
        *,
        keep: int = 10,
        max_bytes: int = 20 * 1024 * 1024,
        now: datetime | None = None,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        started = now or datetime.now()
        base = folder / f"{agent}-{stamp(started)}"
        n = 1
        while base.with_suffix(".log").exists():  # two starts within one second
            n += 1
            base = folder / f"{agent}-{stamp(started)}-{n}"
        self.text_path = base.with_suffix(".log")
        self.cast_path = base.with_suffix(".cast")
        self._redact = redactor
        self._cleaner = LineCleaner()
        self.recent: deque[str] = deque(maxlen=40)  # the clean tail kept in session.json
        self._t0 = time.monotonic()
        self._window_end = self._t0 + 1.0  # the current second of the cleaning budget
        self._cleaned = 0
        self._skipped = 0
        self._cast_hold = ""
        self._cast_decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        cols, rows = size
        header = {
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": int(started.timestamp()),
            "env": {"TERM": "xterm-256color"},
            "title": f"waaah agent --start={agent}",
        }
        self._text = RollingFile(self.text_path, max_bytes)
        self._cast = RollingFile(self.cast_path, max_bytes, json.dumps(header) + "\n")
        prune(folder, agent, keep)

    def output(self, data: bytes) -> None:
        """Record agent output (called on the relay path: cheap, buffered)."""
        now = time.monotonic()
        self._cast_out(now, self._cast_decoder.decode(data))
        if now >= self._window_end:
            self._next_window(now)
        if self._cleaned + len(data) > CLEAN_PER_SECOND:
            self._skipped += len(data)
            return
        self._cleaned += len(data)
        for line in self._cleaner.feed(data, now):
            self.recent.append(self._redact(line))
            self._line(line)

    def _next_window(self, now: float) -> None:
        if self._skipped:
            self._cleaner = LineCleaner()  # its half line and escape state are stale now
            self.notice(f"{self._skipped} bytes of fast output are only in {self.cast_path.name}")
        self._window_end, self._cleaned, self._skipped = now + 1.0, 0, 0

    def _cast_out(self, now: float, text: str, final: bool = False) -> None:
        # A secret can straddle two reads: hold back a tail shorter than the longest one.
        text = self._redact.exact(self._cast_hold + text)
        hold = 0 if final else max(0, self._redact.longest - 1)
        cut = max(0, len(text) - hold)
        text, self._cast_hold = text[:cut], text[cut:]
        if text:
            self._cast.write(json.dumps([round(now - self._t0, 6), "o", text]) + "\n")

    def resize(self, cols: int, rows: int) -> None:
        self._cast.write(json.dumps([round(time.monotonic() - self._t0, 6), "r", f"{cols}x{rows}"]) + "\n")

    def notice(self, message: str) -> None:
        """A supervisor line (marked ``[waaah]``) in the text log."""
        self._line(f"[waaah] {message}")

    def _line(self, text: str) -> None:
        ts = datetime.now().isoformat(timespec="milliseconds")
        self._text.write(f"{ts} {self._redact(text)}\n")

    def flush(self) -> None:
        now = time.monotonic()
        if self._skipped and now >= self._window_end:
            self._next_window(now)
        for f in (self._text, self._cast):
            try:
                f.flush()
            except OSError as err:  # disk full: keep supervising, say so once per flush
                log.warning("could not write the session log: %s", err)

    def close(self) -> None:
        self._cast_out(time.monotonic(), self._cast_decoder.decode(b"", final=True), final=True)
        if self._skipped:
            self._next_window(time.monotonic())
        for line in self._cleaner.flush(time.monotonic()):
            self._line(line)
        self.flush()
        self._text.close()
        self._cast.close()


def prune(folder: Path, agent: str, keep: int) -> None:
    """Delete all but the newest ``keep`` sessions' logs of ``agent`` (with their rollovers)."""
    sessions = sorted(p.name[: -len(".log")] for p in folder.glob(f"{agent}-*.log"))
    for name in sessions[:-keep] if keep > 0 else sessions:
        for path in folder.glob(f"{name}.*"):
            try:
                path.unlink()
            except OSError as err:
                log.warning("could not remove old log %s: %s", path, err)


def replay(cast_path: Path) -> bytes:
    """The exact bytes recorded in an asciicast file (its rollovers are not included)."""
    out = bytearray()
    with cast_path.open(encoding="utf-8") as fh:
        next(fh)  # header
        for line in fh:
            _, kind, data = json.loads(line)
            if kind == "o":
                out += data.encode("utf-8", "surrogateescape")
    return bytes(out)
