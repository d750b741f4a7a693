"""What stands between two characters a terminal shows side by side, and the text without it. Pure.

A *separator* is what a terminal shows nothing of: an escape sequence (CSI, a string sequence:
OSC, DCS, SOS, PM, APC; a charset designation, a two-byte escape), a carriage return, a
backspace, an ignored control (NUL, BEL, DEL, ...), a character that takes no cell (a zero width,
a combining mark: a key with marks on its characters is still the key to a reader). A TUI redrawing a line or writing a character at a time puts
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

# What may stand between two characters a terminal shows side by side: CSI; a string sequence
# (OSC, DCS, SOS, PM, APC) of at most 256 bytes ended by BEL or ST, whole (an unended DCS, SOS,
# PM or APC is a two-byte escape, as before); a charset designation; the other two-byte escapes
# (not "[" or "]": those open a CSI or an OSC); CR, BS and the C0 controls a terminal ignores
# (NUL, BEL, SO to SUB but ESC, FS to US, DEL: not TAB, LF, VT or FF, which move the cursor);
# and, in UTF-8, what takes no cell (``INVISIBLE``).
INVISIBLE = (
    rb"\xc2\xad"  # U+00AD soft hyphen
    rb"|\xcc[\x80-\xbf]|\xcd[\x80-\xaf]"  # U+0300-U+036F combining diacritical marks
    rb"|\xe1\xaa[\xb0-\xbf]|\xe1\xab[\x80-\xbf]"  # U+1AB0-U+1AFF combining marks, extended
    rb"|\xe1\xb7[\x80-\xbf]"  # U+1DC0-U+1DFF combining marks, supplement
    rb"|\xe2\x80[\x8b-\x8f\xaa-\xae]"  # U+200B-U+200F zero widths and marks, U+202A-U+202E embeddings
    rb"|\xe2\x81[\xa0-\xa4\xa6-\xaf]"  # U+2060-U+2064 word joiner, invisible operators; U+2066-U+206F
    rb"|\xe2\x83[\x90-\xbf]"  # U+20D0-U+20FF combining marks for symbols
    rb"|\xef\xb8[\x80-\x8f\xa0-\xaf]"  # U+FE00-U+FE0F variation selectors, U+FE20-U+FE2F half marks
    rb"|\xef\xbb\xbf"  # U+FEFF zero-width no-break space
)
SEPARATOR = (
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_][^\x07\x1b]{0,256}(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]"
    rb"|\x1b[0-Z\\^-~]|[\x00-\x08\r\x0e-\x1a\x1c-\x1f\x7f]|" + INVISIBLE
)
SEPARATOR_RE = re.compile(SEPARATOR)
# A sequence still open at the very end of a chunk (it stands between what came and what comes).
OPEN_AT_END = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|[\]PX^_][^\x07\x1b]{0,256}|[()])?\Z")
# The separators of one to three bytes that no ESC, CR or BS begins (a control, a character
# that takes no cell): a chunk's end is looked at through them (``quiet_start``, ``QUIET_RE``).
QUIET_RE = re.compile(rb"[\x00-\x07\x0e-\x1a\x1c-\x1f\x7f]|" + INVISIBLE)
# A byte where a separator may begin (for a look without the native pass: a superset is fine).
_LEAD = re.compile(rb"[\x00-\x08\r\x0e-\x1f\x7f\xc2\xcc\xcd\xe1\xe2\xef]")


def may_hold(data: bytes) -> bool:
    """Whether ``data`` may hold a separator (a byte where one may begin)."""
    return _LEAD.search(data) is not None


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


def character_start(data: bytes, at: int) -> int:
    """``at``, or the start of the UTF-8 character that ``at`` falls inside."""
    lead = at
    while lead > max(0, at - 3) and lead < len(data) and 0x80 <= data[lead] < 0xC0:
        lead -= 1
    return lead if lead < at and data[lead] >= 0xC0 else at


def complete_end(data: bytes) -> int:
    """Where a UTF-8 character cut off at the end of ``data`` begins (it may be a character that
    takes no cell); ``len(data)`` if none is."""
    n = len(data)
    for back in range(1, min(3, n) + 1):
        b = data[n - back]
        if b < 0x80:
            return n
        if b >= 0xC0:
            return n - back if (2 if b < 0xE0 else 3 if b < 0xF0 else 4) > back else n
    return n


def open_start(data: bytes) -> int:
    """Where a sequence left open at the end of ``data`` begins (``OPEN_AT_END`` from the last ESC;
    an ESC alone at the very end after a string sequence's payload is the first half of its ST:
    from the string's ESC); ``len(data)`` if none is."""
    n = len(data)
    esc = data.rfind(b"\x1b", max(0, n - 300))
    if esc < 0 or not OPEN_AT_END.match(data, esc):
        return n
    before = data.rfind(b"\x1b", max(0, esc - 260), esc) if esc == n - 1 else -1
    if before >= 0 and data[before + 1 : before + 2] in b"]PX^_" and OPEN_AT_END.match(data, before, esc):
        return before
    return esc


def quiet_start(data: bytes, at: int) -> int:
    """The start of a separator of ``QUIET_RE`` that ends at ``at``; ``at`` if none does."""
    for size in (1, 2, 3):
        if at >= size and QUIET_RE.fullmatch(data, at - size, at):
            return at - size
    return at
