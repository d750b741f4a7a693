"""What a codex session file (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``) holds:
token usage, compactions (0.171.0: ``{"type": "compacted", ...}``), whether it holds a
conversation, when its spent usage window resets (pure: the caller reads the file).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from waaah_agent.core.kept_sessions import json_lines
from waaah_agent.core.supervise.compaction import records_with
from waaah_agent.core.tokens import Usage, UsageCounter, count


def codex_entries(record: dict[str, Any]) -> Iterator[tuple[str, Usage, str]]:
    """The usage of each model response: ``token_usage_record`` records, by ``response_id``.
    codex's ``input_tokens`` include the cached ones (OpenAI's usage), as ours do."""
    payload = record.get("payload")
    if record.get("type") != "token_usage_record" or not isinstance(payload, dict):
        return
    usage, key = payload.get("usage"), payload.get("response_id")
    if not isinstance(usage, dict) or not isinstance(key, str) or not key:
        return
    details = usage.get("input_tokens_details")
    cached = usage.get(
        "cached_input_tokens", details.get("cached_tokens") if isinstance(details, dict) else 0
    )
    yield (
        key,
        Usage(
            input=count(usage.get("input_tokens")),
            output=count(usage.get("output_tokens")),
            cached=count(cached),
        ),
        "",  # the model is named once per turn: codex_turn_model
    )


def codex_turn_model(record: dict[str, Any]) -> str:
    """The model a ``turn_context`` record names for the responses after it."""
    payload = record.get("payload")
    if record.get("type") != "turn_context" or not isinstance(payload, dict):
        return ""
    model = payload.get("model")
    return model[:200] if isinstance(model, str) else ""


def codex_counter() -> UsageCounter:
    """A counter for a codex session file."""
    return UsageCounter(codex_entries, codex_turn_model)


def codex_compactions(lines: Iterable[str]) -> set[str]:
    return {
        f"{r.get('timestamp')}/{r.get('ordinal')}"
        for r in records_with(lines, '"compacted"')
        if r.get("type") == "compacted"
    }


def codex_holds(lines: Iterable[str]) -> bool | None:
    """A codex rollout holds a conversation when it has a message (a ``response_item``)."""
    return any(r.get("type") == "response_item" for r in json_lines(lines))


def codex_resets_at(lines: list[str], now: datetime) -> datetime | None:
    """When codex's spent usage window resets, from its session file: the newest record with
    ``rate_limits`` (its ``token_count`` events, written from the ``x-codex-*`` headers of each
    answer, a refused one too) names each window's ``used_percent`` and ``resets_at`` (Unix
    seconds). The latest reset of the windows used up (100 %) that is still ahead; None when no
    window is used up, or none resets later than ``now``."""
    for line in reversed(lines):
        if '"rate_limits"' not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        limits = payload.get("rate_limits") if isinstance(payload, dict) else None
        if not isinstance(limits, dict):
            continue
        found: list[datetime] = []
        for window in (limits.get("primary"), limits.get("secondary")):
            if not isinstance(window, dict):
                continue
            used, resets = window.get("used_percent"), window.get("resets_at")
            if not isinstance(used, (int, float)) or not isinstance(resets, (int, float)) or used < 100:
                continue
            if isinstance(used, bool) or isinstance(resets, bool) or not 0 < resets < 1e11:
                continue
            when = datetime.fromtimestamp(resets, tz=timezone.utc)
            if when > now:
                found.append(when)
        return max(found) if found else None
    return None
