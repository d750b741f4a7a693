"""The files of the session logs: a file that rolls over and survives a full disk, the .cast's
text, the log folder kept within its count of sessions, and the bytes of a .cast read back."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO

from waaah_agent.core.nesting import loads_json
from waaah_agent.core.supervise.castjson import escaped
from waaah_agent.runtime.locks import is_live
from waaah_agent.runtime.store import CorruptSession, SessionStore
from waaah_agent.runtime.supervise.parts import lines_of, next_part, parts_of

log = logging.getLogger(__name__)

BUFFER = 64 * 1024
RETRY_AFTER = 10.0  # seconds a log file that could not be written waits before trying again


def stamp(now: datetime) -> str:
    return now.strftime("%Y%m%d-%H%M%S")


class RollingFile:
    """An append-only file that rolls over to ``.1``, ``.2``... (oldest first) when it grows too
    big; ``on_roll`` gets each rolled part (to compress it).

    A failed write (disk full, file too large) never reaches the caller: the supervisor's
    job is the agent, not its logs. One warning says why; the file is closed and cut back to
    its last whole line (half a line would break the .cast for every player); what it could
    not take is counted in ``lost``; RETRY_AFTER seconds later it is written again.
    """

    def __init__(
        self,
        path: Path,
        max_bytes: int,
        header: bytes = b"",
        clock: Callable[[], float] = time.monotonic,
        on_roll: Callable[[Path], None] | None = None,
    ) -> None:
        self.path = path
        self._on_roll = on_roll
        self._max = max_bytes
        self._header = header
        self._clock = clock
        self.lost = 0  # bytes that could not be written (reset by whoever reports them)
        self.failing: OSError | None = None  # the error while the file is out of action
        self._retry_at = 0.0
        self._size = 0  # bytes in the file, its buffer included
        self._fh: IO[bytes] | None = self._open()

    def _open(self) -> IO[bytes]:
        fh = self.path.open("ab", buffering=BUFFER)
        os.chmod(self.path, 0o600)
        self._size = os.fstat(fh.fileno()).st_size
        if not self._size and self._header:
            fh.write(self._header)
            self._size = len(self._header)
        return fh

    def write(self, data: bytes, *more: bytes) -> None:
        """Append ``data`` (and ``more``: the pieces of one line, written without joining them)."""
        size = len(data) + sum(map(len, more))
        if self._fh is None and not self._reopen():
            self.lost += size
            return
        try:
            if self._size + size > self._max and self._size > len(self._header):
                self._roll()
            assert self._fh is not None
            self._fh.write(data)
            for piece in more:
                self._fh.write(piece)
            self._size += size
        except OSError as err:
            self.lost += size
            self._fail(err)

    def _roll(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()
        part = next_part(self.path)
        os.replace(self.path, part)
        if self._on_roll is not None:
            self._on_roll(part)
        self._fh = self._open()

    def _fail(self, err: OSError) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()  # closes the file even when the flush of its buffer fails
        try:
            cut_to_last_line(self.path)  # valid as it stands, even if nothing more is written
            kept = self.path.stat().st_size
        except OSError:
            kept = self._size
        self.lost += max(0, self._size - kept)  # what the buffer held, and half a line
        self._size = kept
        if self.failing is None:
            log.warning(
                "cannot write %s (%s); the session goes on, the log misses output meanwhile", self.path, err
            )
        self.failing = err
        self._retry_at = self._clock() + RETRY_AFTER

    def _reopen(self) -> bool:
        """After a failure, at the retry time: open again."""
        if self._clock() < self._retry_at:
            return False
        try:
            self._fh = self._open()
        except OSError as err:
            self._fail(err)
            return False
        log.warning("writing %s again (%d bytes could not be written)", self.path, self.lost)
        self.failing = None
        return True

    def flush(self) -> None:
        if self._fh is None and not self._reopen():
            return
        try:
            assert self._fh is not None
            self._fh.flush()
        except OSError as err:
            self._fail(err)

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError as err:
                self._fail(err)
            self._fh = None


def cut_to_last_line(path: Path, step: int = 65536) -> None:
    """Truncate ``path`` after its last newline (a write cut short leaves half a line)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    with path.open("r+b") as fh:
        end = size
        while end > 0:
            start = max(0, end - step)
            fh.seek(start)
            at = fh.read(end - start).rfind(b"\n")
            if at >= 0:
                end = start + at + 1
                break
            end = start
        if end < size:
            fh.truncate(end)


def char_boundary(data: bytes, cut: int) -> int:
    """``cut``, or less so that ``data[:cut]`` does not end inside a UTF-8 character."""
    for back in range(1, min(4, cut + 1)):
        byte = data[cut - back]
        if byte < 0x80:
            return cut
        if byte >= 0xC0:  # the lead byte of the character that ``cut`` may split
            length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return cut if back >= length else cut - back
    return cut


def json_text(data: bytes) -> bytes:
    """The body of :func:`json_string` (no quotes)."""
    return escaped(data, None)


def live_logs(sessions: Path) -> set[str]:
    """The log names (``<agent>-<stamp>``) of the sessions whose supervisor is alive (holds the
    session lock): never pruned, whatever their age."""
    names: set[str] = set()
    store = SessionStore(sessions)
    for folder in sessions.glob("*/lock") if sessions.is_dir() else []:
        if not is_live(folder.parent):
            continue
        try:
            state = store.open_existing(folder.parent.name).load()
        except (OSError, CorruptSession):
            continue
        names.update(Path(p).name.rsplit(".", 1)[0] for p in (state.log_path, state.cast_path) if p)
    return names


def prune(folder: Path, agent: str, keep: int, live: set[str] | frozenset[str] = frozenset()) -> None:
    """Delete all but the newest ``keep`` sessions' logs of ``agent`` (with their rollovers);
    the logs named in ``live`` (live sessions', see :func:`live_logs`) are always kept."""
    sessions = sorted(p.name[: -len(".log")] for p in folder.glob(f"{agent}-*.log"))
    old = sessions[:-keep] if keep > 0 else sessions
    for name in (n for n in old if n not in live):
        for path in folder.glob(f"{name}.*"):
            try:
                path.unlink()
            except OSError as err:
                log.warning("could not remove old log %s: %s", path, err)


def replay(cast_path: Path) -> bytes:
    """The exact bytes recorded in an asciicast file and its rolled parts, oldest first."""
    out = bytearray()
    for part in [*parts_of(cast_path), cast_path]:
        for n, line in enumerate(lines_of(part)):
            if n == 0:
                continue  # each part starts with the header
            _, kind, data = loads_json(line)
            if kind == "o":
                out += data.encode("utf-8", "surrogateescape")
    return bytes(out)
