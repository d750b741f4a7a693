"""The prompts of `waaah send` not typed yet: ``queue.jsonl`` beside session.json.

session.json stays small whatever is queued (it is rewritten and fsynced on every change, and
read under a 1 MiB cap). The queue is an append-only file of its own, one JSON line per change:
``{"add": n, "text": ...}`` when a prompt joins, ``{"done": n}`` when it is submitted. The
prompts waiting are the adds with no done, in order. A burst of sends costs one short append
each, never a rewrite. When the queue empties the file is cut to nothing; when typed
prompts make up most of it, it is rewritten with those still waiting (temp file and rename).
The queue's size is bounded (core/inbox_records.py: MAX_QUEUED, MAX_QUEUED_CHARS), so the file is.

An add also says how far the inbox's sends are taken (``"inbox": [ts, n]``, a
:data:`~waaah_agent.core.mcp.inbox_records.Mark`): a supervisor killed before it read the
sends after that finds them there on --resume. Before the file is emptied, that mark is kept in
session.json (``keep``), so it is never lost with the file.

Known secrets are masked in it, as in session.json. Only the supervisor holding the session's
lock writes it; `waaah send` reads it to refuse a prompt the queue cannot take. A line that is not
one is skipped; a file that cannot be read (a FIFO, a directory, a symlink, too big) is one line
in the log and moved aside, and the queue starts empty. Prompts an older waaah kept in session.json (``queued``) stay there until typed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TypeGuard

from waaah_agent.core.mcp.inbox_records import MAX_PROMPT, Mark, next_mark
from waaah_agent.core.nesting import loads_json
from waaah_agent.core.session_fields import mark_of
from waaah_agent.safe_read import read_capped, why

log = logging.getLogger(__name__)

#: The largest queue file read: twice the most that can wait, escaped, and room to spare.
QUEUE_CAP = 64 * 1024 * 1024
#: Rewritten once the typed prompts in it are more than those waiting plus this.
COMPACT_SLACK = 1024 * 1024


def _line(record: dict[str, object]) -> bytes:
    """One line of the file: UTF-8 as it is (an emoji is 4 bytes, not a 12-byte escape)."""
    try:
        return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, as JSON can
        return (json.dumps(record) + "\n").encode("ascii")


def read_waiting(path: Path) -> list[tuple[int, str]]:
    """The prompts waiting in the queue file ``path`` (numbered, oldest first); none when there is
    no file. An ``OSError`` (an :class:`~waaah_agent.safe_read.UnsafeFile` among them) when
    it cannot be read."""
    return read_queue(path)[0]


def read_queue(path: Path) -> tuple[list[tuple[int, str]], Mark | None]:
    """:func:`read_waiting`, and the newest mark of the inbox's sends its adds hold."""
    try:
        data = read_capped(path, QUEUE_CAP, follow=False)
    except FileNotFoundError:
        return [], None
    waiting: dict[int, str] = {}
    mark: Mark | None = None
    for raw in data.splitlines():
        try:
            record = loads_json(raw)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        add, done, text = record.get("add"), record.get("done"), record.get("text")
        if _number(add) and isinstance(text, str) and 0 < len(text) <= MAX_PROMPT and "\x00" not in text:
            waiting[add] = text
            mark = newest(mark, mark_of(record.get("inbox")))
        elif _number(done):
            waiting.pop(done, None)
    return sorted(waiting.items()), mark


def newest(a: Mark | None, b: Mark | None) -> Mark | None:
    return a if b is None else b if a is None else max(a, b)


def _number(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class SendQueue:
    """The session's queue file, as the supervisor changes it: :meth:`add`, :meth:`pop`."""

    def __init__(
        self, path: Path, mask: Callable[[str], str] = str, keep: Callable[[Mark], bool] | None = None
    ) -> None:
        self.path = path
        self.mask = mask  # known secrets out of what is written (as in session.json)
        self.mark: Mark | None = None  # how far the inbox's sends are taken (None: not known)
        self.keep = keep  # keeps the mark elsewhere before the file is emptied; False: it could not
        self.legacy: list[str] = []  # prompts session.json holds (an older waaah's), typed first
        self._waiting: deque[tuple[int, str, int]] | None = None  # (number, text, bytes in the file)
        self._next = 1
        self._size = 0  # the file's length as we wrote it
        self._live = 0  # bytes of the adds still waiting
        self._fd: int | None = None  # the file, open for appending

    def texts(self) -> list[str]:
        """The prompts waiting, oldest first (for session.json's readers; nothing is changed)."""
        try:
            return [*self.legacy, *(text for _, text in read_waiting(self.path))]
        except OSError:
            return list(self.legacy)

    def add(self, text: str, sent: float = 0.0) -> None:
        """Keep ``text`` at the end of the queue (a failed write: one line in the log; it is then
        typed only if this supervisor lives that long); ``sent``: its record's ts in the inbox."""
        waiting = self._load()
        number = self._next
        self._next += 1
        record: dict[str, object] = {"add": number, "text": self.mask(text)}
        if sent > 0:
            self.mark = next_mark(self.mark, sent)
            record["inbox"] = list(self.mark)
        line = _line(record)
        size = len(line) if self._append(line) else 0
        waiting.append((number, text, size))
        self._live += size

    def pop(self) -> bool:
        """The oldest prompt is typed: dropped. True when it was one of session.json's."""
        if self.legacy:
            self.legacy.pop(0)
            return True
        waiting = self._load()
        if not waiting:
            return False
        number, _, size = waiting.popleft()
        self._live -= size
        if not waiting:
            if self._kept():
                self._truncate()
            else:  # the mark stays in the file
                self._append(_line({"done": number}))
        elif not (self._size - self._live > self._live + COMPACT_SLACK and self._rewrite(waiting)):
            self._append(_line({"done": number}))
        return False

    # -- the file ----------------------------------------------------------------------------
    def _load(self) -> deque[tuple[int, str, int]]:
        if self._waiting is not None:
            return self._waiting
        try:
            found, mark = read_queue(self.path)
            self.mark = newest(self.mark, mark)
            self._size = os.lstat(self.path).st_size if found else 0
        except OSError as err:
            found = []
            self.close()
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            with contextlib.suppress(OSError):
                os.replace(self.path, aside)
            log.warning(
                "the send queue %s cannot be read (%s): moved to %s; it starts empty",
                self.path,
                why(err),
                aside,
            )
        self._waiting = deque((n, text, len(_line({"add": n, "text": text}))) for n, text in found)
        self._live = sum(size for _, _, size in self._waiting)
        self._next = max((n for n, _ in found), default=0) + 1
        if not found and self._kept():
            self._truncate()  # done lines or damage only: start the file anew
        return self._waiting

    def _kept(self) -> bool:
        """Whether the file may be emptied: its mark is kept elsewhere (or there is none)."""
        return self.mark is None or self.keep is None or self.keep(self.mark)

    def _append(self, data: bytes) -> bool:
        try:
            if self._fd is None:  # kept open: a burst of sends is one write each
                flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                self._fd = os.open(self.path, flags, 0o600)
        except OSError as err:
            log.warning("cannot write the send queue %s: %s", self.path, why(err))
            return False
        try:
            written = os.write(self._fd, data)
            if written == len(data):
                self._size += written
                return True
            os.ftruncate(self._fd, self._size)  # half a line would spoil the next one
            log.warning("cannot write the send queue %s: the disk is full", self.path)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            log.warning("cannot write the send queue %s: %s", self.path, why(err))
        return False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _truncate(self) -> None:
        if self._size == 0 and not self.path.exists():
            return
        try:
            fd = os.open(
                self.path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600
            )
            os.close(fd)
            self._size = self._live = 0
        except OSError as err:
            log.warning("cannot empty the send queue %s: %s", self.path, why(err))

    def _rewrite(self, waiting: deque[tuple[int, str, int]]) -> bool:
        """Only the prompts still waiting, replacing the file in one rename."""
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        lines = [{"add": n, "text": self.mask(text)} for n, text, _ in waiting]
        if self.mark is not None:  # the newest add is waiting still: it holds the mark
            lines[-1]["inbox"] = list(self.mark)
        data = b"".join(map(_line, lines))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            self.close()  # the old file
        except OSError as err:
            with contextlib.suppress(OSError):
                tmp.unlink()
            log.warning(
                "cannot rewrite the send queue %s (it keeps its typed prompts): %s", self.path, why(err)
            )
            return False
        self._size = self._live = len(data)
        return True
