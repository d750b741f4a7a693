"""A terminal's answers to the queries in a program's output (core/termanswers.py), on the start
of the real opencode 1.18.33 as recorded (tests/fixtures/screens/opencode-1.18.33/idle.bin)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.unit.night import Night
from waaah_agent.core.supervise.events import Keys, Type
from waaah_agent.core.supervise.termanswers import TerminalAnswers, is_report, palette

IDLE = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "opencode-1.18.33" / "idle.bin"


def replies_to(data: bytes, cols: int = 120, rows: int = 40, step: int = 0) -> bytes:
    answers = TerminalAnswers(cols, rows)
    if not step:
        return answers.feed(data)
    return b"".join(answers.feed(data[i : i + step]) for i in range(0, len(data), step))


def test_opencode_s_start_gets_what_a_dark_xterm_answers():
    replies = replies_to(IDLE.read_bytes())
    # Its first round (colours, where the cursor is, the modes it may use) ...
    assert replies.startswith(b"\x1b]10;rgb:c7c7/c7c7/c7c7\x07\x1b]11;rgb:0000/0000/0000\x07\x1b[1;1R")
    assert b"\x1b[?2004;2$y" in replies and b"\x1b[?2026;0$y" in replies  # known / not recognised
    # ... its text-sizing probes (OSC 66 is not drawn by a terminal that does not know it: the
    # cursor stays put), the window in pixels, then device attributes and the palette.
    assert replies.count(b"\x1b[1;1R") == 3
    assert b"\x1b[4;640;960t" in replies
    assert b"\x1b[?62;22c" in replies
    assert all(f"\x1b]4;{i};rgb:".encode() in replies for i in range(16))
    # Nothing answered that many terminals ignore: kitty keyboard flags, XTVERSION, XTGETTCAP.
    assert not re.search(rb"\x1b\[\?\d*u|\x1bP>\||\x1bP[01]\+r", replies)
    assert is_report(replies)


@pytest.mark.parametrize("step", [1, 3, 7, 4096])
def test_reads_split_anywhere_give_the_same_answers(step):
    raw = IDLE.read_bytes()
    assert replies_to(raw, step=step) == replies_to(raw)


@pytest.mark.parametrize(
    ("output", "reply"),
    [
        (b"abc\x1b[6n", b"\x1b[1;4R"),
        (b"\x1b[5;10H\x1b[6n", b"\x1b[5;10R"),
        (b"\x1b[5;10Hxy\r\n\x1b[6n", b"\x1b[6;1R"),
        (b"\x1b[3;3H\x1b7\x1b[20;20H\x1b8\x1b[6n", b"\x1b[3;3R"),
        (b"\x1b[3;3H\x1b[s\x1b[20;20H\x1b[u\x1b[?6n", b"\x1b[?3;3;1R"),
        (b"\x1b[99;999H\x1b[6n", b"\x1b[40;120R"),  # clamped to the screen
        ("é漢\x1b[6n".encode(), b"\x1b[1;4R"),  # a wide character takes two cells
        (b"x" * 125 + b"\x1b[6n", b"\x1b[2;6R"),  # wrapped at the right edge
        (b"\x1b[10;10H\x1b[?1049h\x1b[H\x1b[?1049l\x1b[6n", b"\x1b[10;10R"),
        (b"\x1b[>c\x1b[c", b"\x1b[>0;276;0c\x1b[?62;22c"),
        (b"\x1b]11;?\x1b\\", b"\x1b]11;rgb:0000/0000/0000\x1b\\"),  # the query's own terminator
        (b"\x1b]4;196;?\x07", b"\x1b]4;196;rgb:ffff/0000/0000\x07"),
        (b"\x1b[18t\x1b[16t", b"\x1b[8;40;120t\x1b[6;16;8t"),
        (b"\x1b[?u\x1b[>0q\x1bP+q4d73\x1b\\\x1b]66;w=1; \x1b\\plain text", b""),
    ],
)
def test_each_query_gets_a_terminal_s_answer(output, reply):
    assert replies_to(output) == reply


def test_a_resize_moves_the_edge():
    answers = TerminalAnswers(120, 40)
    answers.resize(80, 24)
    assert answers.feed(b"\x1b[99;99H\x1b[6n\x1b[18t") == b"\x1b[24;80R\x1b[8;24;80t"


def test_palette_is_xterm_s():
    assert [palette(i) for i in (0, 15, 16, 231, 232, 255)] == [
        "0000/0000/0000",
        "ffff/ffff/ffff",
        "0000/0000/0000",
        "ffff/ffff/ffff",
        "0808/0808/0808",
        "eeee/eeee/eeee",
    ]


@pytest.mark.parametrize(
    "noise",
    [b"\x1b[" * 400_000, b"\x1b]" * 400_000, b"\x1b[" + b"9" * 1_000_000, b"\x1bP" + b"x" * 1_000_000],
)
def test_hostile_output_is_quick_and_asks_nothing(noise):
    answers = TerminalAnswers(120, 40)
    started = time.process_time()
    replies = b"".join(answers.feed(noise[i : i + 4096]) for i in range(0, len(noise), 4096))
    assert time.process_time() - started < 5  # linear: about 0.1 s here
    assert replies == b""
    assert answers.feed(b"\x1b[6n").endswith(b"R")  # and it still answers afterwards


@pytest.mark.parametrize(
    ("data", "report"),
    [
        (b"\x1b[12;1R", True),
        (b"\x1b]11;rgb:0000/0000/0000\x07\x1b[?62;22c", True),
        (b"\x1b[?2004;2$y\x1b[4;640;960t\x1b[I", True),
        (b"\x1bP>|xterm(390)\x1b\\", True),
        (b"hello", False),
        (b"\x1b[A", False),  # an arrow key
        (b"\x1b[12;1Rx", False),  # a report with a key behind it: typing
        (b"", False),
    ],
)
def test_what_a_terminal_reports_is_not_typing(data, report):
    assert is_report(data) is report


def test_the_machine_forwards_a_terminal_s_reports_without_counting_them_as_typing():
    night = Night()
    machine = night.start()
    report = b"\x1b[1;1R\x1b[?62;22c"
    assert night.tell(Keys(report)) == [Type(report)]
    assert machine.seen.last_user_input is None  # no human grace: the nudges are not held for it
    night.tell(Keys(b"\x03"))  # the Ctrl+C menu is open: a report is not a menu key either
    assert night.tell(Keys(b"\x1b]11;rgb:0000/0000/0000\x07")) == [Type(b"\x1b]11;rgb:0000/0000/0000\x07")]
    assert machine.menu.open
    night.tell(Keys(b"c"))
    night.tell(Keys(b"x"))
    assert machine.seen.last_user_input is not None
