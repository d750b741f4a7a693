"""What stands between two characters a terminal shows side by side, and the text without it. Pure.

A *separator* is an escape sequence (CSI, OSC, a charset designation, a two-byte escape), a
carriage return or a backspace: a TUI redrawing a line or writing a character at a time puts
them between the characters of what it shows. :func:`visible` removes them (and a sequence left
open at the end) and says where each kept byte was; the secrets' search (``core/secrets/secretscan.py``)
looks for a secret's runs in that text. Where the package was built with a C compiler this is
one pass in C (``_visible.c``, ~1 GB/s); elsewhere the same result in Python, ~100 times slower.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

_native_visible: Callable[[bytes], tuple[bytes, bytes]] | None
_native_text: Callable[[bytes], bytes] | None
try:  # the separators removed in C; absent where the package was built without a compiler
    from waaah_agent.core.secrets._visible import visible as _native_visible
    from waaah_agent.core.secrets._visible import visible_text as _native_text
except ImportError:  # pragma: no cover - exercised by monkeypatching it away
    _native_visible = _native_text = None
NATIVE_VISIBLE = _native_visible is not None  # as installed (the tests may take it away)

# What may stand between two characters a terminal shows side by side: CSI, OSC, a charset
# designation, the other two-byte escapes (not "[" or "]": those open a CSI or an OSC), CR, BS.
SEPARATOR = (
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]"
    rb"|\x1b[0-Z\\^-~]|[\r\x08]"
)
SEPARATOR_RE = re.compile(SEPARATOR)
# A sequence still open at the very end of a chunk (it stands between what came and what comes).
OPEN_AT_END = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]{0,256}|[()])?\Z")
SEP_BYTES = (b"\x1b", b"\r", b"\x08")


def native() -> bool:
    """Whether the separators are removed in C (looked up at each call: the tests take it away)."""
    return _native_visible is not None


def visible(data: bytes) -> tuple[bytes, Sequence[int]]:
    """``data`` without separators (and without a sequence left open at its end), and for each
    byte kept its offset in ``data``. In C where it was built (the same result)."""
    if _native_visible is not None and len(data) < 1 << 32:
        text, offsets = _native_visible(data)
        return text, memoryview(offsets).cast("I")
    return visible_python(data)


def visible_python(data: bytes) -> tuple[bytes, list[int]]:
    """:func:`visible`, spelled in Python (where the C build is missing, and the reference for it)."""
    end = len(data)
    if (esc := data.rfind(b"\x1b", max(0, end - 300))) >= 0 and OPEN_AT_END.match(data, esc):
        end = esc
    out = bytearray()
    where: list[int] = []
    at = 0
    for m in SEPARATOR_RE.finditer(data, 0, end):
        if m.start() > at:
            out += data[at : m.start()]
            where.extend(range(at, m.start()))
        at = m.end()
    if end > at:
        out += data[at:end]
        where.extend(range(at, end))
    return bytes(out), where


def visible_text(data: bytes) -> bytes | None:
    """The text of :func:`visible` alone, without the offsets; None where there is no C build."""
    if _native_text is not None and len(data) < 1 << 32:
        return _native_text(data)
    return None


def sequence_start(data: bytes, at: int) -> int:
    """``at``, or the start of the escape sequence that ``at`` falls inside (its bytes would
    otherwise read as text)."""
    esc = data.rfind(b"\x1b", max(0, at - 300), at)
    if esc >= 0 and (m := SEPARATOR_RE.match(data, esc)) is not None and m.end() > at:
        return esc
    return at
