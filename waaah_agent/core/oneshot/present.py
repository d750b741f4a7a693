"""How a `waaah run` result is shown: the JSON envelope, plain text, or a form for another model.

Also the context block prepended to a prompt. Pure: the caller saves files and prints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from waaah_agent.core.nesting import dumps_json
from waaah_agent.core.printable import one_line, printable

ENVELOPE_VERSION = 1

#: Context files are cut to this many bytes (UTF-8), with a visible marker (`waaah run
#: --context-max`'s default).
CONTEXT_CAP = 50 * 1024
#: `--format llm`: longer answers are cut to a head and a tail, by characters and by lines
#: (`--llm-max-lines`: two thirds of them from the head, the rest from the tail).
LLM_HEAD = 6000
LLM_TAIL = 3000
LLM_MAX_LINES = 200


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


def cut_answer(response: str, head: int, tail: int, max_lines: int) -> tuple[str, str, int, int] | None:
    """(head, tail, characters cut, lines cut) of an answer over ``max_lines`` lines (two thirds
    of them kept from its head, the rest from its tail) or ``head + tail`` characters, each
    part then held to ``head`` / ``tail`` characters; None when it fits."""
    lines = response.splitlines(keepends=True)
    if len(lines) > max_lines:
        first = max(1, max_lines * 2 // 3)
        last = max(0, max_lines - first)
        start, end = "".join(lines[:first]), "".join(lines[len(lines) - last :]) if last else ""
    elif len(response) > head + tail:
        start, end = response, response
    else:
        return None
    start = start[:head]
    end = end[len(end) - tail :] if len(end) > tail else end
    cut_lines = len(lines) - len(start.splitlines()) - len(end.splitlines())
    return start, end, len(response) - len(start) - len(end), max(0, cut_lines)


def llm_text(
    envelope: dict[str, Any],
    stderr: str,
    save: Callable[[str], str],
    head: int = LLM_HEAD,
    tail: int = LLM_TAIL,
    max_lines: int = LLM_MAX_LINES,
) -> str:
    """The envelope for another model to read: the answer (one over ``max_lines`` lines or
    ``head + tail`` characters cut to a head and a tail, the full text saved through ``save``,
    which returns its path), non-text described, the warnings, stderr on failure, and a footer
    ``[exit:N | 1.2s]``."""
    parts: list[str] = []
    response = str(envelope.get("response") or "")
    cut = cut_answer(response, head, tail, max_lines) if response and not is_binary(response) else None
    if response and is_binary(response):
        path = save(response)
        parts.append(
            f"[binary output: {len(response.encode('utf-8', 'replace')):,} bytes, not shown; saved to {path}]"
        )
    elif cut is not None:
        path = save(response)
        start, end, chars, lines = cut
        parts.append(
            f"{start.rstrip(chr(10))}\n[... {chars:,} characters ({lines:,} lines) cut; full output: {path} ...]"
            + (f"\n{end.rstrip(chr(10))}" if end else "")
        )
    elif response:
        parts.append(response)
    for warning in envelope.get("warnings") or []:
        parts.append(f"[warning: {one_line(warning)}]")
    if envelope.get("error"):
        kind, precise = envelope.get("error_type"), envelope.get("error_kind")
        label = kind if precise in (None, kind) else f"{kind} ({precise})"
        parts.append(f"[error: {label}: {one_line(envelope['error'])}]")
        if stderr.strip():  # the CLI's own lines: what a terminal would act on shown as escapes
            parts.append("[stderr]\n" + printable(stderr.strip()[-2000:]))
    seconds = (envelope.get("duration_ms") or 0) / 1000
    parts.append(f"[exit:{envelope.get('exit_code', 0)} | {seconds:.1f}s]")
    return "\n".join(parts)


def plain_text(envelope: dict[str, Any]) -> str:
    return str(envelope.get("response") or "")


def json_text(envelope: dict[str, Any]) -> str:
    return dumps_json(envelope, indent=2, ensure_ascii=False)
