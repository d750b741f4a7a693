"""Where a CLI compacted its conversation, as its own transcript marks it (pure).

Each adapter's ``compactions`` takes lines of a transcript and returns the keys of the
compactions in them, so the caller can tell a new one from one already seen (a transcript is
read a piece at a time, and a CLI may write its whole message list again after each change).
The markers each CLI writes are in its ``adapters/<cli>/transcript.py``, verified with the real
CLIs against the fake model API; a CLI whose conversation is not in a file read here has none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def records_with(lines: Iterable[str], needle: str) -> Iterable[dict[str, Any]]:
    for line in lines:
        if needle not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record
