"""Redraws that repeat the previous one, on gemini's recorded wait_for_prompt stream."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

from waaah_agent.core.supervise.detect import fingerprint
from waaah_agent.core.supervise.redraws import RepeatedFrames, ticking_removed
from waaah_agent.core.supervise.screen import Screen

STREAM = Path(__file__).resolve().parents[1] / "fixtures" / "streams" / "gemini-0.61.0" / "wait-loop.jsonl.gz"


def reads() -> list[bytes]:
    lines = gzip.decompress(STREAM.read_bytes()).decode().splitlines()[1:]
    return [base64.b64decode(json.loads(line)[1]) for line in lines]


def test_most_of_gemini_s_waiting_redraws_are_repeats():
    frames, repeated = RepeatedFrames(), 0
    recorded = reads()
    for data in recorded:
        if frames.repeats(data):
            repeated += 1
        else:
            frames.saw(data)
    assert repeated >= 0.8 * len(recorded), (repeated, len(recorded))


def test_a_screen_that_skips_repeats_reads_the_same_as_one_fed_everything():
    whole, skipping, frames = Screen(120, 40), Screen(120, 40), RepeatedFrames()
    for n, data in enumerate(reads()):
        whole.feed(data)
        if not frames.repeats(data):
            skipping.feed(data)
            frames.saw(data)
        if n % 50 == 0:  # what every detector reads: text without spinners and counters
            assert fingerprint(whole.view().text()) == fingerprint(skipping.view().text())
            assert whole.view().cursor_row == skipping.view().cursor_row


def test_only_a_redraw_that_changes_nothing_but_ticking_glyphs_is_a_repeat():
    frame = "\x1b[4B\x1b[2K\x1b[1A\x1b[2K\x1b[G⠼ \x1b[38;2;1;2;3mThinking...\x1b[39m (esc to cancel, 5s)\r\n".encode()
    frames = RepeatedFrames()
    frames.saw(frame)
    assert frames.repeats(frame.replace("⠼".encode(), "⠴".encode()).replace(b"5s", b"12s"))
    assert frames.repeats(frame.replace(b"1;2;3", b"9;9;9") * 2)  # two frames in one read
    assert not frames.repeats(frame.replace(b"Thinking", b"Thanking"))
    assert not frames.repeats(frame + b"more")
    assert not frames.repeats(frame[:40])  # half a frame
    lines = RepeatedFrames()  # plain output scrolls: the same line twice is two lines
    lines.saw(b"the same line\r\n")
    assert not lines.repeats(b"the same line\r\n")
    assert ticking_removed("✓ done │".encode()) == "✓ done │".encode()  # a finished tool's mark stays


def test_the_native_removal_of_ticking_glyphs_is_python_s_on_every_frame_and_on_noise():
    from random import Random

    from waaah_agent.core.secrets.secretscan import PatternRemover, native_available
    from waaah_agent.core.supervise.redraws import GLYPHS

    native, python = PatternRemover(GLYPHS), PatternRemover(GLYPHS, native=False)
    for data in reads():
        assert native.removed(data) == python.removed(data)
    # Glyph bytes cut, doubled and mixed (invalid UTF-8 included): never a match the other lacks.
    pieces = [
        b"\xe2",
        b"\xa0",
        b"\x80",
        b"\xc2",
        b"\xb7",
        b"\x9c",
        b"\xa6",
        b"\x97",
        b"\x90",
        b"\x8a",
        b"\xb6",
        b"a",
    ]
    rnd = Random(26)
    for _ in range(5000):
        data = b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(40)))
        assert native.removed(data) == python.removed(data), data
    assert native.removed("⠼ a ⊶ b · c ◓".encode()) == b" a  b  c "
    assert native_available() == (native._db is not None)


def test_the_first_part_of_a_redraw_cut_by_the_reads_is_told_from_other_output():
    frames = [r for r in reads() if len(r) > 3000]
    seen = RepeatedFrames()
    seen.saw(frames[0])
    cut = frames[5][:2057]  # as gemini's frames come now and then
    assert seen.begins(cut)
    assert not seen.begins(frames[5])  # whole: a repeat, not a part
    assert not seen.begins(frames[5] + cut)  # a whole frame first
    assert not seen.begins(cut.replace(b"esc to cancel", b"esc to CANCEL"))  # not like the last
    assert not seen.begins(b"plain output\r\n")
    assert not RepeatedFrames().begins(cut)  # nothing remembered to compare with
