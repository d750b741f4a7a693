"""The rolled parts of a session's logs: numbered, compressed, kept within a disk budget, and read
back as one record.

A log file rolls over to ``<name>.1``, ``<name>.2``... (oldest first). Each rolled part is
gzip-compressed in a thread of its own (``<name>.<n>.gz``; written beside it as ``.gz.tmp`` and
renamed, so a part is always whole, plain or compressed), off the relay's path. A TUI waiting on a
tool redraws the same frame all night, which compresses 60-70 times. Only when the session's files
together outgrow the budget are the oldest parts dropped, and that is said in the text log.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import queue
import re
import shutil
import threading
import zlib
from collections.abc import Generator
from pathlib import Path
from types import ModuleType
from typing import IO

from waaah_agent.core.oneshot.streams import Lines
from waaah_agent.safe_read import UnsafeFile, open_regular

MB = 1024 * 1024
DEFAULT_BUDGET = 200 * MB  # all of one session's log files together
# ISA-L's deflate (isal): the same gzip files, in a tenth of zlib's CPU at its fastest level
# (0.04 s per 100 MB of .cast against zlib's 0.37, for a part ~1.2x larger); zlib where isal
# is not installed.
GZIP: ModuleType
try:
    from isal import igzip

    GZIP = igzip
except ImportError:  # pragma: no cover - isal is a dependency; a platform without its wheel
    GZIP = gzip
COMPRESS_LEVEL = 1  # zlib: level 6 cost 2-3x the CPU of level 1 for a 1.3-1.6x smaller part


def part_number(path: Path, name: str) -> int | None:
    """``n`` when ``path`` is part ``n`` of the file ``name`` (plain or compressed)."""
    match = re.fullmatch(re.escape(name) + r"\.(\d+)(?:\.gz)?", path.name)
    return int(match.group(1)) if match else None


def parts_of(path: Path) -> list[Path]:
    """The rolled parts of ``path``, oldest first; a part both plain and compressed (the
    compression was cut short after its rename) counts once, compressed."""
    found: dict[int, Path] = {}
    for candidate in path.parent.glob(f"{glob_escape(path.name)}.*"):
        n = part_number(candidate, path.name)
        if n is not None and (n not in found or candidate.suffix == ".gz"):
            found[n] = candidate
    return [found[n] for n in sorted(found)]


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def next_part(path: Path) -> Path:
    numbers = [part_number(p, path.name) or 0 for p in parts_of(path)]
    return path.with_name(f"{path.name}.{max(numbers, default=0) + 1}")


#: The most one part may hold once uncompressed (the reader may allow more for a larger roll
#: size): a part is rolled at the roll size (20 MB by default) and compresses 60-70 times; a
#: "part" that inflates past this is cut there, and that is said.
PART_CAP = 256 * MB
#: A record line longer than this is left out (the relay's reads are far smaller).
LINE_CAP = 16 * MB


def open_part(path: Path) -> IO[bytes]:
    """A part for reading: a regular file only (a FIFO or a device there would block or never
    end), decompressed as it is read when it is a ``.gz``."""
    raw = os.fdopen(open_regular(path), "rb")
    if path.suffix == ".gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]  # binary, as IO[bytes] says
    return raw


def lines_of(
    path: Path, cap: int = PART_CAP, problems: list[str] | None = None
) -> Generator[bytes, None, None]:
    """The lines of one part, read in bounded chunks. A compressed part cut short (a full disk, a
    kill) yields what it holds up to the damage, then raises :class:`DamagedPart`; one that
    inflates past ``cap`` bytes yields that much, then raises :class:`PartCut`. A line longer
    than :data:`LINE_CAP` is left out (and said in ``problems``)."""
    lines, total = Lines(LINE_CAP), 0
    try:
        with open_part(path) as fh:
            while chunk := fh.read(MB):
                total += len(chunk)
                yield from lines.feed(chunk)
                if total > cap:
                    raise PartCut(path, cap)
            if last := lines.end():
                yield last
    except (EOFError, OSError, gzip.BadGzipFile, zlib.error) as err:
        if isinstance(err, (FileNotFoundError, UnsafeFile)):
            raise
        raise DamagedPart(path, str(err) or type(err).__name__) from None
    finally:
        if lines.cut and problems is not None:
            problems.append(
                f"{path.name}: {len(lines.cut)} line(s) longer than {LINE_CAP // MB} MB, left out"
            )


class DamagedPart(Exception):
    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path.name} is damaged ({why})")
        self.path = path
        self.then = "replayed up to the damage"


class PartCut(DamagedPart):
    """A part that inflates past the cap (a gzip bomb, or not a part of ours)."""

    def __init__(self, path: Path, cap: int) -> None:
        Exception.__init__(self, f"{path.name} holds more than {cap // MB} MB once uncompressed")
        self.path = path
        self.then = f"replayed its first {cap // MB} MB, the rest left out"


class Compressor:
    """Compresses rolled parts in the background, then keeps the files within ``budget``.

    ``files``: the live log files of the session (their parts and their own size count).
    What it dropped for the budget waits in :attr:`dropped` for the text log to say so.
    """

    def __init__(self, files: list[Path], budget: int = DEFAULT_BUDGET) -> None:
        self.files = files
        self.budget = budget
        self.dropped: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._todo: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def rolled(self, part: Path) -> None:
        """A part just rolled: compress it (in the background), then mind the budget."""
        self._todo.put(part)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="waaah-log-parts", daemon=True)
            self._thread.start()

    def close(self, wait: float = 10.0) -> None:
        """At the end: let the last part be compressed, for at most ``wait`` seconds (a part
        left plain is read back all the same)."""
        thread, self._thread = self._thread, None
        if thread is not None:  # a later roll starts a thread of its own
            self._todo.put(None)
            thread.join(wait)

    def _run(self) -> None:
        while (part := self._todo.get()) is not None:
            with contextlib.suppress(OSError):  # a part left plain is still a whole part
                compress(part)
            with contextlib.suppress(OSError):  # the next roll tries again
                self.keep_to_budget()

    def keep_to_budget(self) -> None:
        """Drop the oldest parts while the files are over the budget. A file may be renamed (a
        roll) while this runs: one that is gone counts as nothing and is not dropped."""
        parts = [(n, p) for f in self.files for n, p in enumerate(parts_of(f))]
        total = sum(_size(p) for _, p in parts) + sum(_size(f) for f in self.files)
        for _, oldest in sorted(parts, key=lambda part: (_mtime(part[1]), part[0])):
            if total <= self.budget:
                break
            size = _size(oldest)
            with contextlib.suppress(OSError):
                oldest.unlink()
                total -= size
                self.dropped.put(f"{oldest.name} ({size / MB:.1f} MB)")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def compress(part: Path) -> Path:
    """``part`` -> ``part.gz`` (0600), whole or not at all."""
    target = part.with_name(part.name + ".gz")
    tmp = part.with_name(part.name + ".gz.tmp")
    with part.open("rb") as src, GZIP.open(tmp, "wb", compresslevel=COMPRESS_LEVEL) as dst:
        shutil.copyfileobj(src, dst, 1024 * 1024)
    os.chmod(tmp, 0o600)
    os.replace(tmp, target)
    part.unlink()
    return target
