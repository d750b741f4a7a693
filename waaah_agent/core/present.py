"""How a `waaah run` result is shown: the JSON envelope, plain text, or a form for another model.

Also the context block prepended to a prompt. Pure: the caller saves files and prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

ENVELOPE_VERSION = 1

#: Context files are cut to this many bytes (UTF-8), with a visible marker (`waaah run
#: --context-max`'s default).
CONTEXT_CAP = 50 * 1024
#: `--format llm`: longer answers are cut to a head and a tail.
LLM_HEAD = 6000
LLM_TAIL = 3000


def with_context(
    prompt: str, context: str, source: str, cap: int = CONTEXT_CAP, total: int | None = None
) -> str:
    """``prompt`` with ``context`` (from ``source``, ``total`` bytes when only its head was
    read) in front, cut to ``cap`` bytes."""
    if not context.strip():
        return prompt
    data = context.encode("utf-8")
    size = max(total or 0, len(data))
    if size > cap:
        kept = data[:cap].decode("utf-8", "ignore")
        context = f"{kept}\n[... context truncated: {cap:,} of {size:,} bytes of {source} shown ...]"
    return f'<context source="{source}">\n{context.rstrip()}\n</context>\n\n{prompt}'


def is_binary(text: str) -> bool:
    """Output that is not text: NUL bytes, or mostly control characters."""
    if "\x00" in text:
        return True
    sample = text[:4096]
    if not sample:
        return False
    controls = sum(1 for c in sample if (ord(c) < 32 and c not in "\n\r\t\x1b") or c == "\ufffd")
    return controls / len(sample) > 0.1


def llm_text(
    envelope: dict[str, Any],
    stderr: str,
    save: Callable[[str], str],
    head: int = LLM_HEAD,
    tail: int = LLM_TAIL,
) -> str:
    """The envelope for another model to read: the answer (long ones cut to a head and a tail,
    the full text saved through ``save``, which returns its path), non-text described, stderr on
    failure, and a footer ``[exit:N | 1.2s]``."""
    parts: list[str] = []
    response = str(envelope.get("response") or "")
    if response and is_binary(response):
        path = save(response)
        parts.append(
            f"[binary output: {len(response.encode('utf-8', 'replace')):,} bytes, not shown; saved to {path}]"
        )
    elif len(response) > head + tail:
        path = save(response)
        cut = len(response) - head - tail
        lines = response[head : len(response) - tail].count("\n")
        parts.append(
            f"{response[:head]}\n[... {cut:,} characters ({lines:,} lines) cut; full output: {path} ...]\n"
            f"{response[len(response) - tail :]}"
        )
    elif response:
        parts.append(response)
    if envelope.get("error"):
        parts.append(f"[error: {envelope.get('error_type')}: {envelope['error']}]")
        if stderr.strip():
            parts.append("[stderr]\n" + stderr.strip()[-2000:])
    seconds = (envelope.get("duration_ms") or 0) / 1000
    parts.append(f"[exit:{envelope.get('exit_code', 0)} | {seconds:.1f}s]")
    return "\n".join(parts)


def plain_text(envelope: dict[str, Any]) -> str:
    return str(envelope.get("response") or "")


def json_text(envelope: dict[str, Any]) -> str:
    return json.dumps(envelope, indent=2, ensure_ascii=False)
