"""Where a CLI compacted its conversation, as its own transcript marks it (pure).

Each adapter's ``compactions`` takes lines of a transcript and returns the keys of the
compactions in them, so the caller can tell a new one from one already seen (a transcript is
read a piece at a time, and a CLI may write its whole message list again after each change).
The markers each CLI writes are in its ``adapters/<cli>/transcript.py``, verified with the real
CLIs against the fake model API; a CLI whose conversation is not in a file read here has none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from waaah_agent.core.kept_sessions import json_lines


def records_with(lines: Iterable[str], needle: str) -> Iterable[dict[str, Any]]:
    """The JSON objects of the lines that hold ``needle`` (the others are not parsed)."""
    return json_lines(line for line in lines if needle in line)
