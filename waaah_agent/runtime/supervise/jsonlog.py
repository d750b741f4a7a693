"""`waaah agent --log-format json`: headless, every event as one JSON object on stderr.

What journald, Loki or a pod's log collector reads without a file: the records of events.jsonl
(secrets already masked by the session), and the supervisor's own lines as ``message`` events.
One ``write`` per object, so lines from two threads never interleave within a line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from waaah_agent.runtime.store import event_ts


def write(record: dict[str, Any]) -> None:
    line = json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":")) + "\n"
    data = line.encode("utf-8", "replace")
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):
        return
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:
            continue
        except OSError:
            return  # stderr closed: the record is in events.jsonl all the same


def event(record: dict[str, Any]) -> None:
    """A session observer: the record as events.jsonl has it."""
    write(record)


def say(message: str) -> None:
    """A line the supervisor says, as an event of its own."""
    write({"ts": event_ts(), "event": "message", "text": message})
