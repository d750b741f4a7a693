"""What a terminal answers to the queries a program writes: pure, bytes in, replies out.

Some TUIs (opencode's) ask the terminal about itself before they draw anything: where the
cursor is (CPR), what the terminal is (device attributes), its colours (OSC 10/11, OSC 4),
which modes it knows (DECRQM), its size in pixels. A real terminal, or tmux, answers on the
program's input. With no terminal attached (headless, a test), nobody would, and the TUI waits
forever: :class:`TerminalAnswers` plays that terminal, a dark xterm of the given size.

It follows the cursor (text, CR/LF/BS/TAB, cursor movements, absolute positions, save and
restore, the alternate screen) so that a position report says where the cursor really is.
Queries it does not answer are those many terminals ignore too (kitty keyboard flags,
XTVERSION, XTGETTCAP, iTerm and kitty extensions): a TUI asks them with a timeout or with a
device-attributes query behind them. Linear in its input; a sequence split across two reads
is held back (bounded) until its end arrives.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from wcwidth import wcwidth

#: The longest unfinished sequence held back for the next read.
MAX_PENDING = 4096
#: A dark theme, like most terminals' default (foreground, background, cursor).
FOREGROUND = "c7c7/c7c7/c7c7"
BACKGROUND = "0000/0000/0000"
#: Pixel size of a cell, for the window-size-in-pixels reports.
CELL_W, CELL_H = 8, 16
#: DEC private modes an xterm knows (DECRQM answers "reset", 2); any other: "not recognised", 0.
KNOWN_MODES = frozenset({1, 7, 25, 47, 1000, 1002, 1003, 1004, 1006, 1016, 1047, 1048, 1049, 2004})

_TOKEN = re.compile(
    rb"(?P<csi>\x1b\[(?P<params>[0-?]*)(?P<inter>[ -/]*)(?P<final>[@-~]))"
    rb"|(?P<osc>\x1b\](?P<payload>[^\x07\x1b]*)(?P<st>\x07|\x1b\\))"
    rb"|\x1b[P^_X][^\x07\x1b]*(?:\x07|\x1b\\)"  # DCS, SOS, PM, APC: never answered here
    rb"|(?P<esc>\x1b[()*+#%]?[ -~]?)"
    rb"|(?P<ctl>[\x00-\x1f\x7f])"
    rb"|(?P<text>[^\x00-\x1f\x7f]+)",
    re.DOTALL,
)
# What may still grow into a whole sequence, from an ESC to the end of the read.
_INCOMPLETE = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|[P^_X\]][^\x07\x1b]*\x1b?|[()*+#%]?)?\Z", re.DOTALL)


# What a terminal sends on its own or in answer to a query, never a person typing: position
# reports, device attributes, mode reports, window reports, kitty keyboard flags, focus in/out,
# colour answers (OSC), XTVERSION / XTGETTCAP (DCS) and kitty graphics (APC) replies.
_REPORT = re.compile(
    rb"(?:\x1b\[\??[0-9;]*R"
    rb"|\x1b\[[?>][0-9;]*c"
    rb"|\x1b\[\??[0-9;]*\$y"
    rb"|\x1b\[[0-9;]*t"
    rb"|\x1b\[\?[0-9;]*u"
    rb"|\x1b\[[IO]"
    rb"|\x1b\[0n"
    rb"|\x1b\][0-9]+;[^\x07\x1b]*(?:\x07|\x1b\\)"
    rb"|\x1b[P_][^\x07\x1b]*(?:\x07|\x1b\\))+"
)


def is_report(data: bytes) -> bool:
    """Whether input from the terminal is only its reports (answers to the agent's queries, focus
    changes): they go to the agent like any input, but nobody typed them."""
    return _REPORT.fullmatch(data) is not None


_OPEN_STRING = re.compile(rb"\x1b[P^_X\]][^\x07\x1b]*")


@dataclass
class _Cursor:
    row: int = 0
    col: int = 0  # may equal the width: the next character wraps


class TerminalAnswers:
    """Feed it a program's output; it returns what a terminal of ``cols`` x ``rows`` answers."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = max(1, cols), max(1, rows)
        self.cursor = _Cursor()
        self._saved = _Cursor()
        self._alt_saved = _Cursor()
        self._pending = b""
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def resize(self, cols: int, rows: int) -> None:
        self.cols, self.rows = max(1, cols), max(1, rows)
        self._clamp()

    def feed(self, data: bytes) -> bytes:
        """The replies to the queries in ``data`` (b"" when it asks nothing), in order."""
        data, self._pending = self._pending + data, b""
        low = max(0, len(data) - MAX_PENDING)
        start = data.rfind(b"\x1b", low)
        if start >= 0 and _INCOMPLETE.match(data, start):
            opener = data.rfind(b"\x1b", low, start)
            if start == len(data) - 1 and opener >= 0 and _OPEN_STRING.fullmatch(data, opener, start):
                start = opener  # a string sequence whose ST (ESC \) is cut in two
            data, self._pending = data[:start], data[start:]
        replies: list[bytes] = []
        for token in _TOKEN.finditer(data):
            kind = token.lastgroup
            if kind == "text":
                self._advance(token.group("text"))
            elif kind == "csi":
                reply = self._csi(token.group("params"), token.group("inter"), token.group("final"))
                if reply:
                    replies.append(reply)
            elif kind == "osc":
                replies.append(self._osc(token.group("payload"), token.group("st")))
            elif kind == "ctl":
                self._control(token.group("ctl"))
            elif kind == "esc":
                self._escape(token.group("esc"))
        return b"".join(replies)

    # ---- the cursor ----------------------------------------------------------------------

    def _advance(self, raw: bytes) -> None:
        text = raw.decode("ascii") if raw.isascii() else self._text.decode(raw)
        width = len(text) if raw.isascii() else sum(max(0, wcwidth(ch)) for ch in text)
        cur = self.cursor
        cur.col += width
        while cur.col > self.cols:
            cur.col -= self.cols
            cur.row = min(cur.row + 1, self.rows - 1)

    def _control(self, byte: bytes) -> None:
        cur = self.cursor
        if byte == b"\r":
            cur.col = 0
        elif byte in (b"\n", b"\x0b", b"\x0c"):
            cur.row = min(cur.row + 1, self.rows - 1)
        elif byte == b"\b":
            cur.col = max(0, min(cur.col, self.cols - 1) - 1)
        elif byte == b"\t":
            cur.col = min(self.cols - 1, (cur.col // 8 + 1) * 8)

    def _escape(self, seq: bytes) -> None:
        cur = self.cursor
        if seq == b"\x1b7":
            self._saved = _Cursor(cur.row, cur.col)
        elif seq == b"\x1b8":
            self.cursor = _Cursor(self._saved.row, self._saved.col)
        elif seq == b"\x1bD":
            cur.row = min(cur.row + 1, self.rows - 1)
        elif seq == b"\x1bE":
            cur.row, cur.col = min(cur.row + 1, self.rows - 1), 0
        elif seq == b"\x1bM":
            cur.row = max(0, cur.row - 1)
        elif seq == b"\x1bc":
            self.cursor = _Cursor()

    def _clamp(self) -> None:
        cur = self.cursor
        cur.row = max(0, min(cur.row, self.rows - 1))
        cur.col = max(0, min(cur.col, self.cols))

    # ---- control sequences ---------------------------------------------------------------

    def _csi(self, params: bytes, inter: bytes, final: bytes) -> bytes:
        private = params[:1] if params[:1] in (b"?", b">", b"<", b"=") else b""
        numbers = _numbers(params[len(private) :])
        if not inter and not private:
            return self._move(final, numbers)
        if final == b"c" and private == b">" and not inter and numbers in ([], [0]):
            return b"\x1b[>0;276;0c"  # DA2: an xterm
        if final == b"n" and private == b"?" and numbers == [6]:
            return f"\x1b[?{self.cursor.row + 1};{self._col() + 1};1R".encode()
        if final == b"p" and inter == b"$" and numbers:
            mode = numbers[0]
            if private == b"?":
                return f"\x1b[?{mode};{2 if mode in KNOWN_MODES else 0}$y".encode()
            return f"\x1b[{mode};0$y".encode()
        if final in (b"h", b"l") and private == b"?" and 1049 in numbers:
            if final == b"h":
                self._alt_saved = _Cursor(self.cursor.row, self.cursor.col)
            else:
                self.cursor = _Cursor(self._alt_saved.row, self._alt_saved.col)
        return b""

    def _move(self, final: bytes, numbers: list[int]) -> bytes:
        cur = self.cursor
        first = numbers[0] if numbers and numbers[0] else 1
        if final in (b"H", b"f"):
            second = numbers[1] if len(numbers) > 1 and numbers[1] else 1
            cur.row, cur.col = first - 1, second - 1
        elif final == b"A":
            cur.row -= first
        elif final in (b"B", b"e"):
            cur.row += first
        elif final in (b"C", b"a"):
            cur.col = min(cur.col, self.cols - 1) + first
        elif final == b"D":
            cur.col = min(cur.col, self.cols - 1) - first
        elif final in (b"E", b"F"):
            cur.row, cur.col = cur.row + (first if final == b"E" else -first), 0
        elif final in (b"G", b"`"):
            cur.col = first - 1
        elif final == b"d":
            cur.row = first - 1
        elif final == b"r":
            cur.row, cur.col = 0, 0
        elif final == b"s" and not numbers:
            self._saved = _Cursor(cur.row, cur.col)
        elif final == b"u" and not numbers:
            self.cursor = _Cursor(self._saved.row, self._saved.col)
        else:
            return self._report(final, numbers)
        self._clamp()
        if cur.col >= self.cols:
            cur.col = self.cols - 1
        return b""

    def _report(self, final: bytes, numbers: list[int]) -> bytes:
        if final == b"n" and numbers == [6]:
            return f"\x1b[{self.cursor.row + 1};{self._col() + 1}R".encode()
        if final == b"n" and numbers == [5]:
            return b"\x1b[0n"
        if final == b"c" and numbers in ([], [0]):
            return b"\x1b[?62;22c"  # DA1: a VT220 with ANSI colour
        if final == b"t" and numbers[:1] == [14]:
            return f"\x1b[4;{self.rows * CELL_H};{self.cols * CELL_W}t".encode()
        if final == b"t" and numbers[:1] == [16]:
            return f"\x1b[6;{CELL_H};{CELL_W}t".encode()
        if final == b"t" and numbers[:1] == [18]:
            return f"\x1b[8;{self.rows};{self.cols}t".encode()
        return b""

    def _col(self) -> int:
        return min(self.cursor.col, self.cols - 1)

    # ---- colours -------------------------------------------------------------------------

    def _osc(self, payload: bytes, st: bytes) -> bytes:
        parts = payload.split(b";")
        if parts[0] in (b"10", b"11", b"12") and parts[1:] == [b"?"]:
            colour = BACKGROUND if parts[0] == b"11" else FOREGROUND
            return b"\x1b]" + parts[0] + b";rgb:" + colour.encode() + st
        if parts[0] == b"4" and len(parts) >= 3:
            replies = []
            for index, ask in zip(parts[1::2], parts[2::2], strict=False):
                if ask == b"?" and index.isdigit() and int(index) < 256:
                    rgb = palette(int(index))
                    replies.append(b"\x1b]4;" + index + b";rgb:" + rgb.encode() + st)
            return b"".join(replies)
        return b""


def _numbers(params: bytes) -> list[int]:
    out = []
    for part in params.split(b";") if params else []:
        digits = part.split(b":")[0]
        out.append(int(digits) if digits.isdigit() and len(digits) < 6 else 0)
    return out


_BASE16 = (
    (0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205), (0, 205, 205),
    (229, 229, 229), (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0), (92, 92, 255),
    (255, 0, 255), (0, 255, 255), (255, 255, 255),
)  # fmt: skip


def palette(index: int) -> str:
    """xterm's default colour ``index`` (0-255) as ``rrrr/gggg/bbbb``."""
    if index < 16:
        r, g, b = _BASE16[index]
    elif index < 232:
        steps = (0, 95, 135, 175, 215, 255)
        n = index - 16
        r, g, b = steps[n // 36], steps[(n // 6) % 6], steps[n % 6]
    else:
        r = g = b = 8 + 10 * (index - 232)
    return "/".join(f"{v:02x}{v:02x}" for v in (r, g, b))
