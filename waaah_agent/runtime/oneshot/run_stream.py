"""`waaah run --stream`: JSON lines on stdout as the run goes, so a parent can link its children
while they run.

1. ``{"record": "start", "log_id", "agent", "parent_id", "fallback", "log_path", ...}`` at once;
2. ``{"record": "session", "session_id", "agent", "attempt"}`` as soon as an attempt's CLI
   names its session (one per attempt: a retry or a fallback CLI gives a new line);
3. the envelope, on one line, last (it has no ``record`` key).

Each line is flushed when written; secrets are masked as in the run log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

from waaah_agent.core.nesting import dumps_json
from waaah_agent.core.oneshot.streams import StreamParser
from waaah_agent.core.secrets.redact import Redactor


class LineOut:
    """Writes the stream's lines to ``out`` (nothing at all when ``out`` is None)."""

    def __init__(self, out: IO[str] | None, redact: Redactor) -> None:
        self.out, self.redact = out, redact

    def put(self, record: dict[str, Any]) -> None:
        if self.out is None:
            return
        self.out.write(self.redact(dumps_json(record, ensure_ascii=False)) + "\n")
        self.out.flush()

    def start(self, **fields: Any) -> None:
        self.put({"record": "start", **fields})

    def watching(
        self, agent: str, attempt: int, parser: StreamParser, then: Callable[[str], None]
    ) -> Callable[[str], None]:
        """``then``, as the callback for each stream line ``parser`` took, followed by the
        session line, written once: when the parser first knows the attempt's session id."""
        said = False

        def on_line(line: str) -> None:
            nonlocal said
            then(line)
            sid = parser.summary.session_id
            if self.out is not None and sid and not said:
                said = True
                self.put({"record": "session", "session_id": sid, "agent": agent, "attempt": attempt})

        return on_line

    def envelope(self, envelope: dict[str, Any]) -> None:
        self.put(envelope)
