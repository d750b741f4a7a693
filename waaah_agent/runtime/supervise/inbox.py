"""The session inbox: JSON lines appended by our MCP proxy (and CLI hooks), read by the loop.

watchdog's observer thread only posts a wake-up to the loop's mailbox; the loop itself
reads the new complete lines from its own offset, so a line is never read twice or half.
Each line becomes a typed record (core/inbox_records.py); a line that is not one is skipped.

The file is anyone's to get wrong, and the loop must never wait on it: it is opened without
blocking and only as a regular file (a FIFO, a directory or a symlink there is one line in the
log, then ignored until it is a file again); a line over :data:`MAX_LINE` is skipped to its end
and one nested too deep is malformed. The file stays open between reads, so a removed and
re-created inbox is a new inode (the old one cannot be reused while it is held): what the old
one still had is read, then the new one from its start, as is a file cut shorter than the offset.
A line is handled once, whatever file it comes back in (``sed -i`` rewrites the inbox into a new
inode, a copy put back after the path was briefly a folder): the lines handled are remembered
(a hash each, the newest :data:`REMEMBERED`) and skipped in a file read from its start, as are
the lines written before this supervisor started (their ``ts`` is older). A record that is new
in the new file is read.
The loop takes a few records per wake-up (:meth:`Inbox.read_new` with a limit, :attr:`more`).

What the inbox held before the supervisor started is history, but for the prompts of `waaah send`
a killed supervisor never read: the sends after the session's mark (how far the send queue took
them, core/inbox_records.py: Mark) are handed to the loop first, so --resume types them once.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, deque
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from waaah_agent.core.mcp.inbox_records import (
    NO_SENDS,
    ControlCommand,
    ControlRecord,
    InboxRecord,
    Mark,
    marks_of,
    parse,
)
from waaah_agent.core.nesting import loads_json
from waaah_agent.runtime.supervise.background import INBOX, Mailbox
from waaah_agent.safe_read import open_regular, why

log = logging.getLogger(__name__)
MAX_READ = 1024 * 1024  # bytes read at a time
MAX_LINE = MAX_READ  # a longer line is no record of ours: skipped
_HEAD = b'{"ts": '  # how every writer's line begins (core/inbox_records.py: to_json)
#: How long a stop waits for watchdog's threads to end.
STOP_JOIN = 2.0
#: How much of the inbox's end is read at the start for the sends a killed supervisor left.
HISTORY = 64 * 1024 * 1024
#: How many handled lines are remembered, so that none is handled again from a re-created file.
REMEMBERED = 100_000


class Handled:
    """The lines handled, by a hash each (in this process: Python's own), the oldest forgotten
    past ``limit``; a line twice in the file (two records in one instant) is counted twice."""

    def __init__(self, limit: int = REMEMBERED) -> None:
        self.limit = limit
        self._counts: Counter[int] = Counter()
        self._order: deque[int] = deque()

    def add(self, key: int) -> None:
        self._counts[key] += 1
        self._order.append(key)
        if len(self._order) > self.limit:
            old = self._order.popleft()
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]

    def copy(self) -> Counter[int]:
        """What a file read from its start may hold again: each is skipped once."""
        return Counter(self._counts)


class _StoppedByUs(logging.Filter):
    """watchdog 7.x: an emitter stopped while its thread is between two reads logs an error
    ("InotifyEmitter.queue_events() called when the thread is inactive") from that thread, after
    our stop returned: printed on the terminal after the session ended (Ctrl+C, then s). It says
    only that we stopped it; the observer is joined at the stop, and this record dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(
            "InotifyEmitter.queue_events() called when the thread is inactive"
        )


_WATCHDOG_INOTIFY = logging.getLogger("watchdog.observers.inotify")


class _Wake(FileSystemEventHandler):
    def __init__(self, path: Path, mailbox: Mailbox) -> None:
        self._name = path.name
        self._mailbox = mailbox

    # Only writes count: reacting to open/close events would wake us for our own reads,
    # in an endless loop.
    def on_modified(self, event: FileSystemEvent) -> None:
        self._wake(event.src_path)

    def on_created(self, event: FileSystemEvent) -> None:
        self._wake(event.src_path)

    def on_moved(self, event: FileSystemEvent) -> None:
        self._wake(event.dest_path)

    def _wake(self, path: bytes | str) -> None:
        if Path(os.fsdecode(path)).name == self._name:
            self._mailbox.post(INBOX)


class Inbox:
    """Tails ``inbox.jsonl`` from where it left off."""

    def __init__(self, path: Path, mailbox: Mailbox, carry: Mark | None = None) -> None:
        """``carry``: how far the session's sends were taken (None: not known, all is history)."""
        self.path = path
        self.more = False  # read_new left lines for the next call
        self.mark = carry or NO_SENDS  # how far the sends are taken once those carried over are
        self.carried = 0  # sends an earlier supervisor never read, handed out first
        self._fd: int | None = None
        self._offset = 0
        self._skipping = False  # inside a line over MAX_LINE: up to its end is dropped
        self._lines: deque[bytes] = deque()
        self._trouble = ""  # what is wrong with the path, logged once
        self._handled = Handled()
        self._again: Counter[int] | None = None  # reading a file from its start: lines handled before
        self._since: float | None = None  # lines older than this are an earlier supervisor's
        if self._open():  # older runs' lines are history
            assert self._fd is not None
            self._offset = os.fstat(self._fd).st_size
            if self._offset:
                self._since = time.time()
                self._take_over(carry, mailbox)
        self._observer = Observer()
        # Writes, creations and moves only: inotify then leaves out the opens and closes of every
        # file in the folder (events.jsonl is opened for each event), work the thread never sees.
        wanted: list[type[FileSystemEvent]] = [
            FileModifiedEvent,
            FileCreatedEvent,
            FileMovedEvent,
            DirCreatedEvent,  # a folder made in its place: said once, then ignored
            DirMovedEvent,
        ]
        self._observer.schedule(_Wake(path, mailbox), str(path.parent), recursive=False, event_filter=wanted)

    def start(self) -> None:
        self._observer.daemon = True
        self._observer.start()

    def stop(self) -> None:
        """Stop watching, and wait (briefly) for watchdog's threads to end: nothing of them runs,
        or prints, after the session's own output is done."""
        if not any(isinstance(f, _StoppedByUs) for f in _WATCHDOG_INOTIFY.filters):
            _WATCHDOG_INOTIFY.addFilter(_StoppedByUs())
        self._observer.stop()
        if self._observer.is_alive():
            self._observer.join(STOP_JOIN)
        self._close()

    def read_new(self, limit: int = 1 << 30) -> list[InboxRecord]:
        """The records of the new complete lines, at most ``limit`` (:attr:`more`: others wait)."""
        if not self._lines:
            self._fill()
        records: list[InboxRecord] = []
        while self._lines and len(records) < limit:
            line = self._lines.popleft()
            key = hash(line.strip())
            if self._again is not None and self._again[key] > 0:
                self._again[key] -= 1  # handled already, from the file this one replaced
                continue
            self._handled.add(key)
            record = self._record(line)
            if record is None:
                continue
            if self._again is not None and self._since is not None and record.ts < self._since:
                continue  # an earlier supervisor's, in a copy of the file it read
            records.append(record)
        self.more = bool(self._lines) or self.more
        return records

    # -- the file ----------------------------------------------------------------------------
    def _open(self) -> bool:
        try:
            self._fd = open_regular(self.path, follow=False)
        except FileNotFoundError:
            return False
        except (OSError, ValueError) as err:
            self._say(
                f"cannot read the inbox {self.path} ({why(err)}): its commands are ignored until it is a file"
            )
            return False
        self._trouble = ""
        return True

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _say(self, trouble: str) -> None:
        if trouble != self._trouble:
            self._trouble = trouble
            log.warning("%s", trouble)

    def _replaced(self) -> bool:
        """Whether the path is no longer the file held open (removed, re-created, moved)."""
        assert self._fd is not None
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return True
        held = os.fstat(self._fd)
        return (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino)

    def _fill(self) -> None:
        """Read the next chunk of complete lines into ``_lines``."""
        self.more = False
        if self._fd is None:
            if not self._open():
                return
            self._from_start()  # a new file
        assert self._fd is not None
        if os.fstat(self._fd).st_size < self._offset:  # cut shorter in place
            log.warning("the inbox %s was truncated: read from its start", self.path)
            self._from_start()
        chunk = self._read()
        if not chunk and self._replaced():  # the old file is read to its end: on to the new one
            self._close()
            self.more = True
            return
        end = chunk.rfind(b"\n") + 1  # only complete lines; the rest is read next time
        if self._skipping:
            if end == 0:
                self._offset += len(chunk)
                self.more = len(chunk) == MAX_READ
                return
            cut = chunk.index(b"\n") + 1
            self._offset += cut
            chunk, end, self._skipping = chunk[cut:], end - cut, False
        if end == 0 and len(chunk) >= MAX_LINE:
            log.warning("skipping an inbox line over %d bytes in %s", MAX_LINE, self.path)
            self._offset += len(chunk)
            self._skipping = self.more = True
            return
        self._offset += end
        self._lines.extend(chunk[:end].splitlines())
        self.more = len(chunk) == MAX_READ

    def _take_over(self, carry: Mark | None, mailbox: Mailbox) -> None:
        """The sends in the file as it is now that come after ``carry`` wait in ``_lines``."""
        sends: list[tuple[float, bytes]] = []
        for line in self._history().splitlines():
            try:
                record = parse(loads_json(line))
            except ValueError:
                continue
            if isinstance(record, ControlRecord) and record.command is ControlCommand.SEND:
                sends.append((record.ts, line))
        marks = marks_of([ts for ts, _ in sends])
        if carry is None:  # an older waaah's session: what it left is history
            self.mark = max(marks, default=NO_SENDS)
            return
        late = [line for (_, line), mark in zip(sends, marks, strict=True) if mark > carry]
        if late:
            self._lines.extend(late)
            self.carried = len(late)
            self.more = True
            mailbox.post(INBOX)

    def _history(self) -> bytes:
        """The whole lines before the offset (the last :data:`HISTORY` bytes of them)."""
        start = max(0, self._offset - HISTORY)
        chunks, at = [], start
        while at < self._offset:
            chunk = self._read_at(at, min(MAX_READ, self._offset - at))
            if not chunk:
                break
            chunks.append(chunk)
            at += len(chunk)
        data = b"".join(chunks)
        if start:
            data = data[data.find(b"\n") + 1 :]  # a line cut by the cap is no record
        return data[: data.rfind(b"\n") + 1]

    def _from_start(self) -> None:
        """Read the file from its start, skipping what was handled already."""
        self._offset, self._skipping = 0, False
        self._again = self._handled.copy()

    def _read(self) -> bytes:
        return self._read_at(self._offset, MAX_READ)

    def _read_at(self, offset: int, size: int) -> bytes:
        assert self._fd is not None
        try:
            return os.pread(self._fd, size, offset)
        except OSError as err:
            self._say(f"cannot read the inbox {self.path} ({why(err)})")
            return b""

    # -- a line ------------------------------------------------------------------------------
    def _record(self, line: bytes) -> InboxRecord | None:
        if not line.strip():
            return None
        try:
            record = parse(loads_json(line))
        except ValueError as err:
            # Half a line left by a failed write, then a whole one: the whole one is kept.
            start = line.rfind(_HEAD)
            if start > 0:
                return self._record(line[start:])
            log.warning("ignoring a malformed inbox line in %s (%s)", self.path, str(err)[:100])
            return None
        if record is None:
            log.warning("ignoring a malformed inbox line in %s", self.path)
        return record
