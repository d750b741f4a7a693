"""JSON, TOML and YAML that anyone may have written: parsed only when nested at most MAX_DEPTH deep.

Python's parsers recurse once per level of nesting: a line of 100,000 ``[`` is a RecursionError,
not a ValueError, and a traceback in every reader that expects only bad data. Every reader of a
file or a line from outside parses through here (:func:`loads_json`, :func:`loads_toml`) or checks
here first (:func:`check`). Deeper than :data:`MAX_DEPTH` is :class:`TooDeep`, a ValueError, so it
takes the path of any other malformed data: the reader names its file in one line and carries on.
No file of ours or of the CLIs comes near the limit. Pure: text in, data out.

The depth is counted over brackets and braces outside strings (and comments), in linear time: a
text with fewer openers than the limit is passed at once; another is scanned with two regular
expressions and a running sum.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any, Literal

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

#: The deepest nesting any reader takes.
MAX_DEPTH = 100

Kind = Literal["json", "toml", "yaml"]

# What holds brackets that are text, not nesting. An unterminated string runs to the end (the
# parser rejects it anyway), which keeps the scan linear.
_JSON_TEXT = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)', re.DOTALL)
_TOML_TEXT = re.compile(
    r'"""[\s\S]*?(?:"""|\Z)|\'\'\'[\s\S]*?(?:\'\'\'|\Z)|"[^"\\\n]*(?:\\.[^"\\\n]*)*(?:"|$)'
    r"|'[^'\n]*(?:'|$)|#[^\n]*",
    re.MULTILINE,
)
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class TooDeep(ValueError):
    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"nested deeper than {limit} levels")


def depth(text: str, kind: Kind = "json") -> int:
    """The deepest nesting of brackets and braces in ``text`` outside its strings and comments."""
    bare = (_JSON_TEXT if kind == "json" else _TOML_TEXT).sub("", text)
    brackets = bare.encode("utf-8", "replace").translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def check(text: str | bytes, kind: Kind = "json", limit: int = MAX_DEPTH) -> None:
    """:class:`TooDeep` when ``text`` is nested deeper than ``limit``."""
    if isinstance(text, (bytes, bytearray)):
        if text.count(b"[") + text.count(b"{") <= limit:
            return
        text = bytes(text).decode("utf-8", "replace")
    elif text.count("[") + text.count("{") <= limit:
        return
    if depth(text, kind) > limit:
        raise TooDeep(limit)


def loads_json(text: str | bytes) -> Any:
    """``json.loads(text)``, refusing a text nested deeper than :data:`MAX_DEPTH` (:class:`TooDeep`)."""
    check(text, "json")
    try:
        return json.loads(text)
    except RecursionError:  # a deep stack already: still a ValueError, never a traceback
        raise TooDeep() from None


# A JSON string (kept as it is), or a comment (blanked): what strip_json_comments tells apart.
_JSONC_PARTS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)|//[^\n]*|/\*.*?(?:\*/|\Z)', re.DOTALL)


def strip_json_comments(text: str) -> str:
    """``text`` with its ``//`` and ``/* */`` comments outside strings blanked (spaces, the line
    breaks kept, so a parser's line numbers still hold): a settings file a CLI reads as JSON with
    comments (gemini: strip-json-comments, then JSON.parse). Equal to ``text`` when it has none."""

    def blank(match: re.Match[str]) -> str:
        part = match.group()
        return part if part.startswith('"') else re.sub(r"[^\n]", " ", part)

    return _JSONC_PARTS.sub(blank, text) if "/" in text else text


def finite(value: Any) -> Any:
    """``value`` with each NaN or infinite float in it as None. Python's JSON parser takes
    ``NaN``, ``Infinity`` and ``1e999`` as floats, and its encoder writes them back as ``NaN`` and
    ``Infinity``, which no other JSON reader accepts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps_json(value: Any, **options: Any) -> str:
    """``json.dumps(value)`` that is always valid JSON: a non-finite number is written as null."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(finite(value), allow_nan=False, **options)


def loads_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, refusing a text nested deeper than :data:`MAX_DEPTH`: :class:`TooDeep`,
    a ValueError like ``tomllib.TOMLDecodeError``."""
    check(text, "toml")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise TooDeep() from None
