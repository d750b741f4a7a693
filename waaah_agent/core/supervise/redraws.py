"""Redraws that repeat the previous one: a TUI waiting on a tool draws its live area again many
times a second (gemini: ~20 frames of ~3.5 KB a second, each "erase the lines above, draw them
again"), and only its spinner, a colour and a seconds counter change.

Such a frame is idempotent: drawn again over itself it leaves the same screen, and the same state
in anything that follows the cursor. Whatever models the screen (pyte, the text log's cleaner)
can skip a frame that is the previous one but for those ticking glyphs, and stays where it was.
Pure: bytes in, a yes or no out.
"""

from __future__ import annotations

from waaah_agent.core.secrets.secretscan import PatternRemover

REDRAW = b"\x1b[2K\x1b[1A"  # a frame that starts by erasing the lines above it draws them anew
# What changes between two frames: colours (gemini's spinner cycles through a gradient; the
# models keep text only), spinner glyphs (braille, gemini's ⊶/⊷ tool-box mark, claude's
# ✢✳✶✻✽· and ✦◐◑◒◓), a "12s" counter. Digits, ";" and ":" go first (one C-speed pass takes
# every colour parameter and counter with them), then the glyphs, each a literal UTF-8 sequence.
_NUMBERS = b"0123456789;:"
GLYPHS = rb"\xe2(?:[\xa0-\xa3][\x80-\xbf]|\x8a[\xb6\xb7]|\x9c[\xa2\xb3\xb6\xbb\xbd]|\x9c\xa6|\x97[\x90-\x93])|\xc2\xb7"
# In native code: a frame of box drawing holds hundreds of \xe2 leads, and re.sub tried the
# alternation at each (~40 us a gemini frame, twice a frame: a fifth of the CPU while it waits).
_GLYPHS = PatternRemover(GLYPHS)


def ticking_removed(data: bytes) -> bytes:
    """``data`` without what ticks from one frame to the next."""
    return _GLYPHS.removed(data.translate(None, _NUMBERS))


HEAD_WITHIN = 32  # the erase may follow a cursor move to the bottom of the live area
SIZE_SLACK = 64  # a counter going from 9s to 10s makes a frame a byte longer


class RepeatedFrames:
    """Remembers the last redraw processed whole; says whether new output only repeats it."""

    def __init__(self) -> None:
        self.last: bytes | None = None  # that redraw, its ticking glyphs removed
        self.head = b""  # how it began (cursor moves, the first erase): where frames split
        self.size = 0  # its length as it came
        self.repeats_seen = 0

    def repeats(self, data: bytes) -> bool:
        """``data`` is one or more whole redraws, each the remembered one but for ticking glyphs."""
        last, head = self.last, self.head
        if last is None or not data.startswith(head):
            return False
        for body in data.split(head)[1:]:
            frame = head + body
            if abs(len(frame) - self.size) > SIZE_SLACK or ticking_removed(frame) != last:
                return False
        self.repeats_seen += 1
        return True

    def begins(self, data: bytes) -> bool:
        """``data`` is the first part of a redraw like the remembered one, its rest still to come:
        a frame cut in two by the reads (gemini's ~3.5 KB frames come now and then as ~2 KB and
        ~1.5 KB, 10 ms apart). Taken alone, that part is no repeat, and once processed it leaves
        nothing to compare the next frames with: each model would take three frames or more in
        full. Its caller holds it back a moment instead, until its rest came."""
        last, head = self.last, self.head
        if last is None or not data.startswith(head) or len(data) >= self.size - SIZE_SLACK:
            return False
        if data.find(head, len(head)) >= 0:  # a whole frame, then part of the next
            return False
        # The end of the part may cut a glyph in two (then not removed): that much is not compared.
        return last.startswith(ticking_removed(data)[:-3])

    def saw(self, data: bytes) -> None:
        """``data`` was processed whole: remember its last redraw, if it ends with one."""
        self.last = None
        at = data.find(REDRAW, 0, HEAD_WITHIN)
        if at < 0:
            return
        head = data[: at + len(REDRAW)]
        frame = head + data.rsplit(head, 1)[-1]
        self.head, self.size, self.last = head, len(frame), ticking_removed(frame)

    def forget(self) -> None:
        """The model started afresh (reset, resize, output skipped): nothing to compare with."""
        self.last = None
