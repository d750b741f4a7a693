"""`python -m waaah_agent.hook <cli>`: a CLI hook that appends its event to the session inbox.

The CLI runs it with the hook's JSON on stdin; it adds a timestamp and the source, and appends
one line to ``$WAAAH_INBOX``. It must never disturb the CLI: any failure is silent, exit 0.
"""

from __future__ import annotations

import json
import os
import sys
import time

KEEP = ("hook_event_name", "session_id", "notification_type", "message", "prompt", "stop_hook_active")
MAX_FIELD = 2000  # a prompt can be long; the supervisor needs only a glimpse


def main() -> int:
    inbox = os.environ.get("WAAAH_INBOX")
    if not inbox:
        return 0
    try:
        payload = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        payload = {}
    record = {"ts": time.time(), "source": "hook", "cli": sys.argv[1] if len(sys.argv) > 1 else ""}
    for key in KEEP:
        if key in payload:
            value = payload[key]
            record[key] = value[:MAX_FIELD] if isinstance(value, str) else value
    try:
        fd = os.open(inbox, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
