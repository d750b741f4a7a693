"""Terminal escape handling shared by the screen model and the text log.

Pure functions over ``str``. Both consumers see output in arbitrary chunks, so the
filters here are incremental: an escape sequence split across two reads is held back
until it is complete (bounded, so a stray ESC cannot make us buffer forever).
"""

from __future__ import annotations

import re

ESC = "\x1b"
# Longest escape sequence we hold back waiting for its end; an APC/DCS payload (kitty
# graphics, sixel) can be long, anything bigger than this is passed on as it is.
MAX_PENDING = 8192

# Any CSI; the private ones are judged by `_pyte_safe`.
_CSI = re.compile(r"\x1b\[([0-?]*)[ -/]*([@-~])")
_PRIVATE = frozenset("<=>?")
# String sequences whose payload pyte would otherwise print as text: DCS, SOS, PM, APC.
_STRING_SEQ = re.compile(r"\x1b[P^_X].*?(?:\x1b\\|\x07)", re.DOTALL)
# Every escape sequence: what a plain-text reader does not want (the text log drops them).
ANY_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC (title, hyperlinks, ...)
    r"|\x1b[P^_X].*?(?:\x1b\\|\x07)"  # DCS, SOS, PM, APC
    r"|\x1b[()*+][0-9A-Za-z]"  # charset designation
    r"|\x1b[ -/]*[0-~]",  # other two-byte escapes (ESC 7, ESC =, ...)
    re.DOTALL,
)
_INCOMPLETE_TAIL = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*|[P^_X].*|[()*+]|[ -/]*)?\Z",
    re.DOTALL,
)


def split_incomplete(text: str) -> tuple[str, str]:
    """Split ``text`` into (complete part, trailing unfinished escape sequence)."""
    start = text.rfind(ESC, max(0, len(text) - MAX_PENDING))
    if start < 0:
        return text, ""
    match = _INCOMPLETE_TAIL.match(text, start)
    if match is None:
        return text, ""
    return text[:start], text[start:]


def for_pyte(text: str) -> str:
    """Remove the sequences pyte mishandles; keep everything else for the screen model."""
    if ESC not in text:
        return text
    return _CSI.sub(_pyte_safe, _STRING_SEQ.sub("", text))


def _pyte_safe(match: re.Match[str]) -> str:
    """Keep a CSI unless it is private in a way pyte 0.8.2 mishandles.

    `CSI ? ... m` raises TypeError inside pyte, `CSI > 4;?m` (xterm modifyOtherKeys query,
    sent by gemini 0.61) too, and `CSI < u` / `CSI > 1 u` (kitty keyboard protocol) confuse
    it. `CSI ? n h/l` (private modes: bracketed paste, alternate screen) are fine.
    """
    params, final = match.group(1), match.group(2)
    private = [c for c in params if c in _PRIVATE]
    if not private:
        return match.group(0)
    if params.startswith("?") and private == ["?"] and final in "hl":
        return match.group(0)
    return ""
