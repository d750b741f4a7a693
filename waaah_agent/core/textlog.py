"""Turn a raw terminal byte stream into clean, timestamp-ready text lines.

TUIs redraw: a spinner rewrites its line many times a second and Ink-based CLIs redraw
their whole live area on every frame. A log that kept every frame would be useless for
``grep``/``less``, so a line is dropped when the same line (ignoring spinner glyphs and
counters) was written moments ago. The lossless record lives in the asciicast file.
"""

from __future__ import annotations

import codecs
import re
from collections import OrderedDict

from waaah_agent.core.escapes import ANY_ESCAPE, Splitter

# Spinner glyphs (braille dots and the star/dot family claude and gemini use) and digits:
# removed from a line's identity so successive frames of one spinner compare equal.
_VOLATILE = re.compile(r"[0-9\u2800-\u28ff·✢✳✶✻✽✦◐◑◒◓⊶]+")
# Escape sequences, and the control characters a text file does not want (CR and LF stay:
# they end and overwrite lines), in one pass.
_NOISE = re.compile(f"{ANY_ESCAPE.pattern}|[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]", re.DOTALL)
_CURSOR_MOVES = re.compile(r"\x1b\[[0-9;]*[ABEFGHJKf]")
_LINE_ENDS = re.compile(r"(\n|\r)")
MAX_LINE = 4000


class LineCleaner:
    """Incremental: feed raw chunks, get back the complete clean lines they finish.

    Linear in the output over any chunking: held-back state (an unfinished escape, a CR,
    the current line) is bounded and never rescanned, and every pattern below stops at the
    next ESC (see `escapes`).
    """

    def __init__(self, dedupe_window: float = 30.0, memory: int = 256) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._splitter = Splitter()
        self._cr = False  # the last chunk ended in CR: maybe the first half of a CRLF
        self._line = ""
        self._recent: OrderedDict[str, float] = OrderedDict()
        self._window = dedupe_window
        self._memory = memory

    def feed(self, data: bytes, now: float) -> list[str]:
        text = self._splitter.feed(self._decoder.decode(data))
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r"):
            # Might be the first half of a CRLF split across reads: decide next time.
            text, self._cr = text[:-1], True
        # A cursor movement ends the visual line the same way a newline does.
        text = _CURSOR_MOVES.sub("\n", text.replace("\r\n", "\n"))
        out: list[str] = []
        for piece in _LINE_ENDS.split(_NOISE.sub("", text)):
            if piece == "\n":
                self._emit(out, now)
            elif piece == "\r":
                # Carriage return: the line is about to be overwritten (spinner redraw).
                self._line = ""
            elif piece:
                self._line = (self._line + piece)[-MAX_LINE:]
        return out

    @property
    def partial(self) -> str:
        """The line being written, not ended yet."""
        return self._line

    def flush(self, now: float) -> list[str]:
        out: list[str] = []
        self._emit(out, now)
        return out

    def _emit(self, out: list[str], now: float) -> None:
        line, self._line = self._line.rstrip(), ""
        if not line.strip():
            return
        key = _VOLATILE.sub("", line).strip()
        seen = self._recent.get(key)
        self._recent[key] = now
        self._recent.move_to_end(key)
        if len(self._recent) > self._memory:
            self._recent.popitem(last=False)
        if seen is not None and now - seen < self._window:
            return
        out.append(line)
