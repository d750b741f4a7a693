"""Terminal escape handling shared by the screen model, the text log and the overlay.

Pure functions over ``str``, and `OpenSequence` over the relayed bytes. The screen model and
the text log see output in arbitrary chunks, so the filters here are incremental: an escape
sequence split across two reads is held back until it is complete (bounded, so a stray ESC
cannot make us buffer forever).

Everything here is linear in its input, per call and over a stream of chunks: the agent's
output is untrusted, and a parser that rescans (a regex trying ``.*?`` up to a terminator
once per opener, or a held-back sequence rescanned on every read) lets a few hundred KB of
openers stall supervision for minutes.
"""

from __future__ import annotations

import re

ESC = "\x1b"
# Longest escape sequence we hold back waiting for its end; an APC/DCS payload (kitty
# graphics, sixel) can be long, anything bigger than this is passed on as it is.
MAX_PENDING = 8192
# Longest CSI parameter string passed to pyte: pyte turns each number into an int (a number
# of over 4300 digits raises, and the screen is reset); real CSIs have a few dozen at most.
MAX_CSI_PARAMS = 256

# The payload of a string sequence (OSC; DCS, SOS, PM, APC) ends at BEL or ST (ESC \); any
# other ESC aborts it, as in a terminal (payloads are printable text, sixel or base64, and
# never hold an ESC). Stopping at every ESC is also what makes the scan linear: each
# character is looked at from its nearest preceding ESC only.
#
# A string sequence that is not finished (aborted by another ESC, or with no terminator
# within MAX_PENDING characters) loses its two-character opener and its payload is passed
# on as text, to the log and to the screen alike. Dropping the payload instead would let a
# stray ESC P (binary output, a cut-off sequence) hide real output from the log and from
# the detectors; passing it costs at most some visible garbage.
_PAYLOAD = r"[^\x07\x1b]*"
_ST = r"(?:\x07|\x1b\\)"
_STRING_OPENER = r"[P^_X\]]"  # DCS, SOS, PM, APC and OSC

# Every escape sequence: what a plain-text reader does not want (the text log drops them).
ANY_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    rf"|\x1b\]{_PAYLOAD}{_ST}"  # OSC (title, hyperlinks, ...)
    rf"|\x1b[P^_X]{_PAYLOAD}{_ST}"  # DCS, SOS, PM, APC
    r"|\x1b[()*+][0-9A-Za-z]"  # charset designation
    r"|\x1b[ -/]*[0-~]",  # other two-byte escapes (ESC 7, ESC =, ...; an unfinished opener)
    re.DOTALL,
)
# What may still grow into a complete sequence, from the last ESC of the text to its end.
_INCOMPLETE_TAIL = re.compile(
    rf"\x1b(?:\[[0-?]*[ -/]*|{_STRING_OPENER}{_PAYLOAD}|[ -/]*)?\Z",
    re.DOTALL,
)
# A string sequence still open (a lone ESC after it may be the first half of its ST).
_OPEN_STRING = re.compile(rf"\x1b{_STRING_OPENER}{_PAYLOAD}")

# What pyte gets wrong, in one pass: private CSIs (see `_pyte_safe`), CSIs that are not
# finished (pyte takes the next ESC as their final byte, or piles digits up across reads),
# string sequences it would print, unfinished OSCs (pyte would swallow all output up to
# the next BEL), the 8-bit CSI/OSC introducers (U+009B, U+009D) that pyte alone honours,
# and DECALN (ESC # 8, a test pattern: pyte fills every cell, ~1.5 ms a time at 80x24, so
# a flood of them held the screen model ~30 s per 64 KB).
_FOR_PYTE = re.compile(
    r"\x1b\[(?P<params>[0-?]*)[ -/]*(?P<final>[@-~]?)"
    rf"|\x1b\](?P<osc>{_PAYLOAD}{_ST})?"
    rf"|\x1b[P^_X](?:{_PAYLOAD}{_ST})?"
    r"|\x1b#8"
    r"|[\x9b\x9d]",
    re.DOTALL,
)
_PYTE_SPECIAL = re.compile(r"[\x1b\x9b\x9d]")
_PRIVATE = frozenset("<=>?")


def split_incomplete(text: str) -> tuple[str, str]:
    """Split ``text`` into (complete part, trailing unfinished escape sequence).

    Linear in ``text``; across reads use `Splitter`, which does not rescan what it holds.
    """
    low = max(0, len(text) - MAX_PENDING)
    start = text.rfind(ESC, low)
    if start < 0:
        return text, ""
    if start == len(text) - 1:
        # A lone ESC at the end may be the first half of the ST closing an open string.
        opener = text.rfind(ESC, low, start)
        if opener >= 0 and _OPEN_STRING.fullmatch(text, opener, start):
            start = opener
    elif _INCOMPLETE_TAIL.match(text, start) is None:
        return text, ""
    return text[:start], text[start:]


class Splitter:
    """`split_incomplete` over a stream: feed text, get back what is complete.

    The unfinished sequence held between reads is never rescanned: all that matters for
    what may follow it is its first two characters (its kind) and its last one (a CSI
    parameter or intermediate, a payload character, or the ESC that may start an ST), so
    each read is split as ``head + last + text`` and the held characters are only joined
    once, when released. A held sequence growing past MAX_PENDING is released as text.
    """

    def __init__(self) -> None:
        self._held: list[str] = []
        self._size = 0
        self._stand_in = ""  # the held sequence's first two and last characters

    def feed(self, text: str) -> str:
        if not self._held:
            done, tail = split_incomplete(text)
            self._hold(tail)
            return done
        stand_in = self._stand_in
        done, tail = split_incomplete(stand_in + text)
        if not done:  # still unfinished
            self._held.append(text)
            self._size += len(text)
            if self._size > MAX_PENDING:
                return self.release()
            self._stand_in = _stand_in(stand_in + text)
            return ""
        start = len(done)  # where the new unfinished sequence begins in stand_in + text
        if start >= len(stand_in):
            done = self.release() + text[: start - len(stand_in)]
        else:  # the held sequence was a string aborted by its own last character, an ESC
            held = self.release()
            keep = len(stand_in) - start
            done, tail = held[:-keep], held[-keep:] + text
        self._hold(tail)
        return done

    def release(self) -> str:
        """Give up the held sequence (returned as it is) and start afresh."""
        held = "".join(self._held)
        self._held, self._size, self._stand_in = [], 0, ""
        return held

    def _hold(self, tail: str) -> None:
        if tail:
            self._held, self._size, self._stand_in = [tail], len(tail), _stand_in(tail)


def _stand_in(held: str) -> str:
    return held if len(held) <= 3 else held[:2] + held[-1]


def for_pyte(text: str) -> str:
    """Remove the sequences pyte mishandles, and colours; keep everything else for the screen
    model."""
    if _PYTE_SPECIAL.search(text) is None:
        return text
    return _FOR_PYTE.sub(_pyte_safe, text)


def _pyte_safe(match: re.Match[str]) -> str:
    """Keep a CSI unless it is private in a way pyte 0.8.2 mishandles, or sets colours and
    styles (the screen is read as text); keep finished OSCs.

    `CSI ? ... m` raises TypeError inside pyte, `CSI > 4;?m` (xterm modifyOtherKeys query,
    sent by gemini 0.61) too, and `CSI < u` / `CSI > 1 u` (kitty keyboard protocol) confuse
    it. `CSI ? n h/l` (private modes: bracketed paste, alternate screen) are fine.
    """
    sequence = match.group(0)
    kind = sequence[1:2]
    if kind == "]":
        return sequence if match.group("osc") else ""
    if kind != "[":
        return ""  # DCS, SOS, PM, APC (or their unfinished openers), DECALN, an 8-bit introducer
    params, final = match.group("params"), match.group("final")
    if not final or final == "m" or len(params) > MAX_CSI_PARAMS:
        # Colours and styles (SGR) too: the model is read as text only, and pyte parses a
        # sequence a character at a time in Python (most of a spinner tick's bytes are colours).
        return ""
    private = [c for c in params if c in _PRIVATE]
    if not private:
        return sequence
    if params.startswith("?") and private == ["?"] and final in "hl":
        return sequence
    return ""


# -- where the terminal is, in bytes, at the relay -------------------------------------------
# `Splitter` works on decoded text for the screen model and the text log, which see the output
# later and in batches (and give up on a sequence past MAX_PENDING); bytes of ours written to
# the terminal need to know, as each read goes out, where the terminal itself is.
_CSI_REST = re.compile(rb"[0-?]*[ -/]*")  # parameters, then intermediates
_ESC_REST = re.compile(rb"[ -/]*")  # the intermediates of ESC ( B, ESC # 8...
_STRINGS = (b"P", b"X", b"^", b"_")  # DCS, SOS, PM, APC: ended by ST (any ESC) only
CSI_KIND, OSC_KIND, ESC_KIND = b"[", b"]", b"\x1b"


class OpenSequence:
    """Whether the terminal, given all the output so far, is inside an escape sequence, a
    string (OSC, DCS, SOS, PM, APC) or a UTF-8 character: whatever their length, across reads.

    Each read is looked at from its end: its last ESC (one ``rfind``, memrchr) says what is
    open after it, and a read with no ESC only ends what was open (a BEL an OSC, a final byte a
    CSI). Nothing is scanned byte by byte in Python and nothing is held but a few bytes.

    Where terminals differ it errs towards "open" (our bytes wait longer, never inside): an
    OSC ends at BEL or ST, a DCS, SOS, PM or APC only at ST (xterm takes BEL as the end of an
    OSC alone); CAN and SUB, which abort a sequence in a terminal, are not looked for.
    """

    __slots__ = ("end", "kind", "stand_in")

    def __init__(self) -> None:
        self.kind = b""  # what is open: "" nothing, ESC_KIND, CSI_KIND, OSC_KIND or one of _STRINGS
        self.stand_in = b""  # an open ESC or CSI's first two and last bytes (all its end depends on)
        self.end = b""  # the output's last 4 bytes (a UTF-8 character cut short?)

    def feed(self, data: bytes) -> None:
        """``data`` went to the terminal after what was fed before."""
        if not data:
            return
        self.end = data[-4:] if len(data) >= 4 else (self.end + data)[-4:]
        esc = data.rfind(b"\x1b")
        if esc < 0:
            kind = self.kind
            if not kind or kind in _STRINGS:
                return  # nothing open, or a string that only an ESC ends
            if kind == OSC_KIND:
                if b"\x07" in data:
                    self.kind = b""
                return
            data, esc = self.stand_in + data, 0  # a few bytes: an ESC or a CSI cut by the reads
        self._from_esc(data, esc)

    def _from_esc(self, data: bytes, esc: int) -> None:
        intro = data[esc + 1 : esc + 2]
        size = len(data)
        if not intro:
            kind = ESC_KIND  # a lone ESC (after a string: maybe the first half of its ST)
        elif intro == b"]":
            kind = OSC_KIND if data.find(b"\x07", esc + 2) < 0 else b""
        elif intro in _STRINGS:
            kind = intro  # no ESC after it in this read: no ST either
        elif intro == b"[":
            kind = CSI_KIND if _runs_to_end(_CSI_REST, data, esc + 2) else b""
        else:  # ESC 7, ESC \ (an ST), ESC ( B: intermediates up to a final byte
            kind = ESC_KIND if _runs_to_end(_ESC_REST, data, esc + 1) else b""
        self.kind = kind
        if kind in (ESC_KIND, CSI_KIND):
            self.stand_in = data[esc:] if size - esc <= 3 else data[esc : esc + 2] + data[-1:]

    @property
    def inside(self) -> bool:
        """Whether bytes written now would land inside the agent's sequence or character."""
        return bool(self.kind) or utf8_cut(self.end)

    def reset(self) -> None:
        """The terminal was put back to its ground state (a CAN of ours ended what was open)."""
        self.kind = self.stand_in = self.end = b""


def _runs_to_end(run: re.Pattern[bytes], data: bytes, start: int) -> bool:
    """Whether ``data`` from ``start`` on is all ``run`` (a sequence with no final byte yet)."""
    found = run.match(data, start)
    return found is not None and found.end() == len(data)


def utf8_cut(end: bytes) -> bool:
    """Whether output ending in ``end`` stopped inside a multi-byte UTF-8 character."""
    for back in range(1, min(4, len(end)) + 1):
        byte = end[-back]
        if byte < 0x80:
            return False
        if byte >= 0xC0:
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return back < need
    return False
