"""Whether the relayed output stopped inside one of the agent's sequences (core/supervise/escapes)."""

from __future__ import annotations

import pytest

from waaah_agent.core.supervise.escapes import OpenSequence

PAYLOAD = b"ZWNobyBoYXJtbGVzcyBjbGlwYm9hcmQgdGV4dCA=" * 8  # 320 bytes of base64


def states(*reads: bytes) -> list[bool]:
    """Inside or not after each read."""
    seq = OpenSequence()
    out = []
    for data in reads:
        seq.feed(data)
        out.append(seq.inside)
    return out


def every_split(stream: bytes) -> list[list[bool]]:
    """The stream cut into two reads at every point: the state after each pair."""
    return [states(stream[:cut], stream[cut:]) for cut in range(1, len(stream))]


@pytest.mark.parametrize(
    ("opener", "end"),
    [
        (b"\x1b]52;c;", b"\x07"),  # OSC (the clipboard), BEL
        (b"\x1b]52;c;", b"\x1b\\"),  # ... ST
        (b"\x1b]8;;https://example.com/", b"\x1b\\"),  # a hyperlink
        (b"\x1bPq", b"\x1b\\"),  # DCS (sixel)
        (b"\x1b_Gf=100;", b"\x1b\\"),  # APC (kitty graphics)
        (b"\x1b^", b"\x1b\\"),  # PM
        (b"\x1bX", b"\x1b\\"),  # SOS
    ],
)
def test_a_string_longer_than_any_tail_is_open_until_its_end(opener, end):
    assert states(opener + PAYLOAD, end + b"text") == [True, False]
    assert states(opener, PAYLOAD, PAYLOAD, PAYLOAD, end) == [True, True, True, True, False]
    assert states(opener + PAYLOAD + end) == [False]
    assert states(b"before " + opener + PAYLOAD[:100], PAYLOAD, end[:1], end[1:]) == [
        True,
        True,
        len(end) > 1,
        False,
    ]
    # cut anywhere, the state after both reads is that of the whole
    assert all(both[-1] is False for both in every_split(b"a" + opener + PAYLOAD[:80] + end + b"z"))


@pytest.mark.parametrize("opener", [b"\x1bP", b"\x1bX", b"\x1b^", b"\x1b_"])
def test_only_st_ends_a_dcs_sos_pm_or_apc(opener):
    """xterm ends only an OSC at BEL: in these a BEL is payload, and our bytes keep waiting."""
    assert states(opener + PAYLOAD + b"\x07", b"more", b"\x1b\\") == [True, True, False]


def test_another_escape_aborts_a_string():
    assert states(b"\x1b]0;title", b" more\x1b[0m text") == [True, False]
    assert states(b"\x1bPq" + PAYLOAD, b"\x1b7") == [True, False]
    assert states(b"\x1b]52;c;" + PAYLOAD + b"\x1b", b"[31m") == [True, False]  # not ST: a CSI
    assert states(b"\x1b]52;c;" + PAYLOAD + b"\x1b", b"]0;t") == [True, True]  # a new OSC


@pytest.mark.parametrize(
    "stream",
    [
        b"\x1b[38;2;138;138;138;49mtext",  # CSI
        b"\x1b[?1049h",
        b"\x1b[" + b"1;" * 100 + b"m",  # a CSI of 200 parameter bytes
        b"\x1b(Bx",  # a charset: ESC, an intermediate, a final byte
        b"\x1b7\x1b8",
        "┌─ héllo ✦ 😀".encode(),  # characters of 2, 3 and 4 bytes
    ],
)
def test_a_sequence_or_character_cut_by_the_reads_is_open_until_its_end(stream):
    for cut in range(1, len(stream)):
        head, rest = stream[:cut], stream[cut:]
        seq = OpenSequence()
        seq.feed(head)
        whole = OpenSequence()
        whole.feed(stream)
        assert not whole.inside
        seq.feed(rest)
        assert not seq.inside, (head, rest)
    assert states(b"\x1b[" + b"1;" * 100, b"2", b"m") == [True, True, False]
    assert states(b"\x1b", b"(", b"B") == [True, True, False]
    assert states(b"x\xf0", b"\x9f", b"\x98", b"\x80") == [True, True, True, False]


def test_plain_output_and_finished_sequences_are_outside():
    assert states(b"", b"plain text\r\n", b"\x1b[0m", b"\x1b]0;t\x07", b"\x1b\\") == [False] * 5
    assert states(b"x" * 100_000) == [False]


def test_a_reset_is_the_ground_state():
    seq = OpenSequence()
    seq.feed(b"\x1b]52;c;" + PAYLOAD)
    seq.reset()  # a CAN went to the terminal
    seq.feed(PAYLOAD)  # the payload's rest is text now
    assert not seq.inside
