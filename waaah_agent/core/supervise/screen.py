"""The terminal model: pyte fed with the agent's output, read back by region.

Detectors must never search the whole scrollback (the agent's own words contain every
phrase one might look for), so this exposes small regions: the bottom lines where the
input box and footer live, and the window title the CLI sets with OSC 0/2.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

import pyte
from wcwidth import wcwidth

from waaah_agent.core.supervise.escapes import Splitter, for_pyte


@dataclass(frozen=True)
class ScreenView:
    """An immutable snapshot of the screen for detectors (cheap to build, easy to test)."""

    lines: tuple[str, ...]
    title: str
    cursor_row: int

    def bottom(self, count: int) -> tuple[str, ...]:
        """The last ``count`` rows that hold any text (trailing blank rows dropped)."""
        end = len(self.lines)
        while end > 0 and not self.lines[end - 1].strip():
            end -= 1
        return self.lines[max(0, end - count) : end]

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.lines)


class Screen:
    """A pyte screen fed incrementally with raw bytes from the PTY."""

    def __init__(self, cols: int, rows: int) -> None:
        self._screen = pyte.Screen(cols, rows)
        self._stream = pyte.Stream(self._screen)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._splitter = Splitter()
        self._lines: list[str] = [""] * rows  # rendered rows, refreshed only where pyte marks them dirty
        self._screen.dirty.update(range(rows))
        self.errors = 0  # pyte failures survived (each one reset the screen)

    def feed(self, data: bytes) -> None:
        text = self._splitter.feed(self._decoder.decode(data))
        if not text:
            return
        try:
            self._stream.feed(for_pyte(text))
        except Exception:  # noqa: BLE001 - a sequence pyte cannot parse must not stop supervision
            # The screen is a model for detection only; start it afresh, TUIs redraw often.
            self.errors += 1
            self._screen.reset()

    def resize(self, cols: int, rows: int) -> None:
        self._screen.resize(rows, cols)
        self._lines = [""] * rows
        self._screen.dirty.update(range(rows))

    def reset(self) -> None:
        """Forget the cells (used after output was dropped under load).

        The window title is kept: CLIs set it only when their state changes, and it is the
        cleanest busy/idle signal there is.
        """
        title = self._screen.title
        self._screen.reset()
        self._screen.title = title
        self._screen.dirty.update(range(self._screen.lines))
        self._splitter.release()

    @property
    def size(self) -> tuple[int, int]:
        return self._screen.columns, self._screen.lines

    def render(self, rows: int) -> bool:
        """Render up to ``rows`` of the rows changed since the last time; True once none is left
        (rendering all rows, as pyte's ``display``, costs ~1-2 ms: done a few at a time, the
        loop can serve a keystroke in between)."""
        dirty = self._screen.dirty
        for _ in range(min(rows, len(dirty))):
            y = dirty.pop()
            if 0 <= y < len(self._lines):
                self._lines[y] = self._render(y)
        return not dirty

    def view(self) -> ScreenView:
        # Most updates touch a few rows: only those are rendered again.
        self.render(len(self._screen.dirty))
        return ScreenView(
            lines=tuple(self._lines),
            title=str(self._screen.title or ""),
            cursor_row=int(self._screen.cursor.y),
        )

    def _render(self, y: int) -> str:
        """Row ``y`` as text, exactly as pyte's ``display`` renders it (wide chars once)."""
        line = self._screen.buffer[y]
        columns = self._screen.columns
        cells = [" "] * columns
        for x, char in line.items():
            if x < columns:
                cells[x] = char.data
        text = "".join(cells)
        if text.isascii():
            return text
        out: list[str] = []
        skip_stub = False
        for x in range(columns):
            if skip_stub:
                skip_stub = False
                continue
            data = line[x].data
            if not data.isascii():
                skip_stub = wcwidth(data[0]) == 2
            out.append(data)
        return "".join(out)
