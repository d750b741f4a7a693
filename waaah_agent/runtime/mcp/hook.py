"""`python -m waaah_agent.runtime.mcp.hook <cli>`: a CLI hook that appends its event to the session inbox.

The CLI runs it with the hook's JSON on stdin; it adds a timestamp and the source, and appends
one line (a :class:`~waaah_agent.core.mcp.inbox_records.HookRecord`) to ``$WAAAH_INBOX``. It must
never disturb the CLI: any failure is silent, exit 0.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from waaah_agent.core.mcp.inbox_records import MAX_TEXT, HookRecord
from waaah_agent.core.nesting import loads_json
from waaah_agent.settings import INBOX


def record_from(payload: Any, cli: str, now: float) -> HookRecord:
    """The inbox record of one hook call: the fields the supervisor reads, texts cut short; a
    field of an unexpected type is left out."""
    fields = payload if isinstance(payload, dict) else {}

    def text(key: str) -> str | None:
        value = fields.get(key)
        return value[:MAX_TEXT] if isinstance(value, str) else None

    active = fields.get("stop_hook_active")
    return HookRecord(
        ts=now,
        cli=cli[:MAX_TEXT],
        hook_event_name=text("hook_event_name"),
        session_id=text("session_id"),
        notification_type=text("notification_type"),
        message=text("message"),
        prompt=text("prompt"),
        stop_hook_active=active if isinstance(active, bool) else None,
    )


def main() -> int:
    inbox = os.environ.get(INBOX)
    if not inbox:
        return 0
    try:
        payload = loads_json(sys.stdin.read() or "{}")
    except ValueError:
        payload = {}
    record = record_from(payload, sys.argv[1] if len(sys.argv) > 1 else "", time.time())
    try:
        # O_NONBLOCK: a FIFO in its place is an error (ENXIO), never a wait
        fd = os.open(inbox, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
        try:
            os.write(fd, (json.dumps(record.to_json()) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
