"""The raw stream as a JSON string for the ``.cast``, escaped on the bytes. Pure.

JSON wants only a few bytes escaped: the quote, the backslash and the control characters. The
native pass over each chunk (``core/secrets/secretscan.py``, with the secrets' search) also says which
of them the chunk holds and whether it is valid UTF-8 (``FACTS``). Valid UTF-8 with only the
common ones (ESC, CR, LF, tab, BEL, backspace) is escaped by one ``bytes.replace`` per byte
present: no decoding to ``str`` and back, which cost as much again. Anything else (invalid UTF-8,
a rarer control character) is spelled by :func:`json_string`.

Where the package was built with a C compiler (``setup.py``), ``_jsonbytes.c`` does both in one
pass instead (checks UTF-8 and escapes, a third of the CPU): the same bytes as orjson spells the
decoded text, which is what the ``replace`` path gives too (tested on every recorded stream and
on random bytes). The native pass's ``FACTS`` are then not needed (:data:`NATIVE`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection

import orjson


def _native() -> Callable[[bytes], bytes | None] | None:
    """The native escaping, built from _jsonbytes.c at install where a C compiler was found."""
    try:
        from waaah_agent.core.supervise._jsonbytes import escape_utf8
    except ImportError:  # pragma: no cover - installed without a compiler: the replace path below
        return None
    return escape_utf8


_escape_utf8 = _native()

#: Whether :func:`escaped` checks and escapes in native code (then it needs no ``FACTS``).
NATIVE = _escape_utf8 is not None

# The bytes escaped by replace, in this order (the backslash first: the others add backslashes).
_REPLACE = (
    (b"\\", b"\\\\"),
    (b'"', b'\\"'),
    (b"\x1b", b"\\u001b"),
    (b"\n", b"\\n"),
    (b"\r", b"\\r"),
    (b"\t", b"\\t"),
    (b"\x07", b"\\u0007"),
    (b"\x08", b"\\b"),
)
# A valid UTF-8 character, and what makes a chunk invalid after a valid start: a byte that
# cannot begin a character, or a lead byte with the wrong next byte. A character cut off by the
# end of a chunk is not looked for: the record never writes one (``logs.char_boundary``) but
# at its very end, which :func:`json_string` spells.
_CHAR = (
    rb"(?:[\x00-\x7f]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
    rb"|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}"
    rb"|\xf4[\x80-\x8f][\x80-\xbf]{2})"
)
_C, _N = rb"[\x80-\xbf]", rb"[^\x80-\xbf]"  # a continuation byte; any other
_INVALID = (
    rb"(?:[\x80-\xc1\xf5-\xff]|[\xc2-\xdf]"
    + _N
    + rb"|\xe0(?:[^\xa0-\xbf]|[\xa0-\xbf]"
    + _N
    + rb")"
    + rb"|[\xe1-\xec\xee\xef](?:"
    + _N
    + rb"|"
    + _C
    + _N
    + rb")"
    + rb"|\xed(?:[^\x80-\x9f]|[\x80-\x9f]"
    + _N
    + rb")"
    + rb"|\xf0(?:[^\x90-\xbf]|[\x90-\xbf](?:"
    + _N
    + rb"|"
    + _C
    + _N
    + rb"))"
    + rb"|[\xf1-\xf3](?:"
    + _N
    + rb"|"
    + _C
    + rb"(?:"
    + _N
    + rb"|"
    + _C
    + _N
    + rb"))"
    + rb"|\xf4(?:[^\x80-\x8f]|[\x80-\x8f](?:"
    + _N
    + rb"|"
    + _C
    + _N
    + rb")))"
)
#: For the native pass: (pattern, flags) each reported at most once per chunk. The first
#: len(_REPLACE) are the bytes above; then any other control character; then invalid UTF-8.
FACTS: tuple[tuple[bytes, int], ...] = (
    *((b"\\x%02x" % old[0], 0) for old, _ in _REPLACE),
    (rb"[\x00-\x06\x0b-\x0c\x0e-\x1a\x1c-\x1f]", 0),
    (rb"\A" + _CHAR + rb"*" + _INVALID, 0),
)
SLOW = frozenset(range(len(_REPLACE), len(FACTS)))  # facts that need json_string
UNSURE = len(FACTS) - 1  # "maybe not valid UTF-8" (say it when bytes were changed after the pass)


def json_string(data: bytes) -> bytes:
    """A JSON string (quotes included) holding ``data`` exactly (read back with surrogateescape).

    Valid UTF-8 is escaped by orjson in native code; invalid UTF-8 cannot be a str orjson takes:
    such a chunk is spelled as json does it, its invalid bytes as lone surrogates (escaped as
    ASCII), so that the file stays valid UTF-8.
    """
    try:
        return orjson.dumps(data.decode("utf-8"))
    except UnicodeDecodeError:
        return json.dumps(data.decode("utf-8", "surrogateescape")).encode("ascii")


def escaped(data: bytes, present: Collection[int] | None) -> bytes:
    """The body of the JSON string holding ``data`` (no quotes). ``present``: which ``FACTS`` the
    native pass saw in ``data`` (or in more than it: a superset is fine); None if not known.
    Ignored where the native escaping is built: it checks ``data`` itself."""
    if _escape_utf8 is not None:
        body = _escape_utf8(data)
        return json_string(data)[1:-1] if body is None else body
    return replaced(data, present)


def replaced(data: bytes, present: Collection[int] | None) -> bytes:
    """:func:`escaped` without the native escaping: ``bytes.replace`` per byte ``present``."""
    if present is None or not SLOW.isdisjoint(present):
        return json_string(data)[1:-1]
    for n, (old, new) in enumerate(_REPLACE):
        if n in present:
            data = data.replace(old, new)
    return data
