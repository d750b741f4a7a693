"""Text from files, made safe to print: control characters shown, never acted on. Pure.

Task ids, prompts, reasons, paths and anything else read from a file (session.json, events,
run logs, a routes table) may hold what a terminal acts on: an OSC 52 sequence writes the
user's clipboard, others retitle the window, move the cursor, hide or overwrite lines; bidi
controls reorder what is shown. Every printer of such data passes it through :func:`printable`
(``waaah`` commands through ``cli_run._masked``; the report's page cell by cell): each C0 and C1
control, DEL and each bidi or line-separator character becomes its visible escape (``\\x1b``,
``\\x9b``, ``\\u202e``), so the user sees what the data holds and the terminal does nothing.
"""

from __future__ import annotations

import re

# C0 (but tab and newline, kept apart below), DEL, C1, the bidi embeddings, overrides, isolates
# and marks, and the Unicode line and paragraph separators.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
_IN_TEXT = re.compile(f"[{_CONTROLS}]")
_IN_LINE = re.compile(f"[{_CONTROLS}\t\n]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, lines: bool = True) -> str:
    """``text`` with every control character shown as its escape; with ``lines`` (several lines
    of output) newlines and tabs are kept, else (one field, one line) shown too."""
    return (_IN_TEXT if lines else _IN_LINE).sub(_shown, text)


def one_line(text: object) -> str:
    """A field from a file, for one line of output: ``printable`` with newlines shown too."""
    return printable(str(text), lines=False)
