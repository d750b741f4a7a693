"""The session inbox: JSON lines appended by our MCP proxy (and CLI hooks), read by the loop.

watchdog's observer thread only posts a wake-up to the loop's mailbox; the loop itself
reads the new complete lines from its own offset, so a line is never read twice or half.
Each line becomes a typed record (core/inbox_records.py); a line that is not one is skipped.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from waaah_agent.core.inbox_records import InboxRecord, parse
from waaah_agent.runtime.background import Mailbox

log = logging.getLogger(__name__)
MAX_READ = 1024 * 1024
#: How long a stop waits for watchdog's threads to end.
STOP_JOIN = 2.0


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
            self._mailbox.post("inbox")


class Inbox:
    """Tails ``inbox.jsonl`` from where it left off."""

    def __init__(self, path: Path, mailbox: Mailbox) -> None:
        self.path = path
        self._offset = path.stat().st_size if path.exists() else 0  # older runs' lines are history
        self._observer = Observer()
        self._observer.schedule(_Wake(path, mailbox), str(path.parent), recursive=False)

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

    def read_new(self) -> list[InboxRecord]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read(MAX_READ)
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n") + 1  # only complete lines; the rest is read next time
        self._offset += end
        records = []
        for line in chunk[:end].splitlines():
            try:
                record = parse(json.loads(line))
            except ValueError:
                record = None
            if record is None:
                log.warning("ignoring a malformed inbox line in %s", self.path)
                continue
            records.append(record)
        return records
