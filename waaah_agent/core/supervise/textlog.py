"""Turn a raw terminal byte stream into clean, timestamp-ready text lines.

TUIs redraw: a spinner rewrites its line many times a second, Ink-based CLIs (gemini) move the
cursor up over their live area and write it again on every frame, full-screen ones (claude)
position the cursor on each row they change. A log that kept every frame would be useless for
``grep``/``less``, and one that dropped every line seen lately loses a reply the agent really
says twice. So the cleaner follows the cursor's row (line feeds, cursor movements, clears) and
drops a line only when it is a redraw:

* the same line (spinner glyphs and counters aside) written again on a row that showed it, or
* a line of a repaint (the cursor went back up over written rows, or the screen was cleared)
  that one of the repainted rows showed before the repaint began: a live area moved down by a
  new line above it is the same lines.

Everything else is new output and is kept, a repeat included, stamped when it first appeared
(never again when history is redrawn). The lossless record lives in the asciicast file.
"""

from __future__ import annotations

import codecs
import re

from waaah_agent.core.supervise.escapes import ANY_ESCAPE, Splitter

# Spinner glyphs (braille dots and the star/dot family claude and gemini use) and digits:
# removed from a line's identity so successive frames of one spinner compare equal.
_VOLATILE = re.compile(r"[0-9\u2800-\u28ff·✢✳✶✻✽✦◐◑◒◓⊶]+")
# Escape sequences, and the control characters a text file does not want, in one pass.
_NOISE = re.compile(f"{ANY_ESCAPE.pattern}|[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]", re.DOTALL)
# What ends a visual line: LF, CR (the line is overwritten), a cursor movement, a clear, a
# switch to or from the alternate screen. Groups: CSI parameters and final; J's parameter.
_CONTROL = re.compile(r"\x1b\[([0-9;]*)([ABEFGHKf])|\x1b\[([0-9]*)J|\x1b\[\?(?:1049|1047|47)[hl]|\n|\r")
MAX_LINE = 4000
ROW_MEMORY = 4  # the last lines each row showed (a spinner's rotating phrases included)
ROWS_KEPT = 400  # rows remembered above the lowest one written (the screen and then some)


class LineCleaner:
    """Incremental: feed raw chunks, get back the complete clean lines they finish.

    Linear in the output over any chunking: held-back state (an unfinished escape, a CR,
    the current line, the rows remembered) is bounded and never rescanned, and every pattern
    below stops at the next ESC (see `escapes`).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._splitter = Splitter()
        self._cr = False  # the last chunk ended in CR: maybe the first half of a CRLF
        self._line = ""
        self._row = 0  # the cursor's row (relative until an absolute position sets it)
        self._low = 0  # the lowest row written
        self._rows: dict[int, list[str]] = {}  # row -> the last lines it showed, newest last
        self._repaint_from: int | None = None  # a repaint began at this row, nothing written yet
        self._before: set[str] = set()  # what the repainted rows showed when the repaint began
        self._wrote = False  # a line was written since the repaint began

    def feed(self, data: bytes, now: float) -> list[str]:
        text = self._splitter.feed(self._decoder.decode(data))
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r"):
            # Might be the first half of a CRLF split across reads: decide next time.
            text, self._cr = text[:-1], True
        text = text.replace("\r\n", "\n")
        out: list[str] = []
        at = 0
        for m in _CONTROL.finditer(text):
            if m.start() > at:
                self._text(text[at : m.start()])
            at = m.end()
            self._control(m, out)
        if at < len(text):
            self._text(text[at:])
        return out

    def _text(self, piece: str) -> None:
        piece = _NOISE.sub("", piece)
        if piece:
            self._line = (self._line + piece)[-MAX_LINE:]

    def _control(self, m: re.Match[str], out: list[str]) -> None:
        token = m.group(0)
        if token == "\r":
            self._line = ""  # carriage return: the line is about to be overwritten (spinner redraw)
            return
        self._emit(out)
        if token == "\n":
            self._move(self._row + 1)
            return
        final = m.group(2)
        if final is None:  # a clear or a screen switch: what it erases counts as shown before
            below = m.group(3) in ("", "0")
            self._repaint(self._row if below else min(self._rows, default=self._row))
            self._snapshot()
            if m.group(3) is None or m.group(3) in ("2", "3"):
                self._rows.clear()
            elif below:
                self._rows = {r: keys for r, keys in self._rows.items() if r < self._row}
            return
        params = m.group(1).split(";")
        n = int(params[0]) if params[0].isdigit() and int(params[0]) > 0 else 1
        if final in "AF":
            self._move(self._row - n)
        elif final in "BE":
            self._move(self._row + n)
        elif final in "Hf":
            self._move(n)

    def _move(self, row: int) -> None:
        if row < self._row:
            self._repaint(row)
        self._row = row
        if row > self._low:
            self._low = row
            if len(self._rows) > 2 * ROWS_KEPT:
                self._rows = {r: keys for r, keys in self._rows.items() if r > row - ROWS_KEPT}

    def _repaint(self, row: int) -> None:
        """The cursor went back over written rows: what follows repaints them."""
        if self._wrote:  # a new repaint: what the earlier one compared with is gone
            self._before, self._wrote = set(), False
        # Moved up again (or cleared) before writing: Ink erases its area one row at a time.
        self._repaint_from = row if self._repaint_from is None else min(self._repaint_from, row)

    def _snapshot(self) -> None:
        start = self._repaint_from
        if start is not None:
            self._before.update(keys[-1] for r, keys in self._rows.items() if r >= start and keys)
            self._repaint_from = None

    @property
    def partial(self) -> str:
        """The line being written, not ended yet."""
        return self._line

    def flush(self, now: float) -> list[str]:
        out: list[str] = []
        self._emit(out)
        return out

    def _emit(self, out: list[str]) -> None:
        line, self._line = self._line.rstrip(), ""
        if not line.strip():
            return
        self._snapshot()
        self._wrote = True
        key = _VOLATILE.sub("", line).strip()
        shown = self._rows.setdefault(self._row, [])
        redraw = key in shown or key in self._before
        if key in shown:
            shown.remove(key)
        shown.append(key)
        del shown[:-ROW_MEMORY]
        if not redraw:
            out.append(line)
