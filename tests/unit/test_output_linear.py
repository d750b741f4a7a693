"""Every parser of the agent's output is linear in it, whatever the output and its chunking.

The output is untrusted: a run of unterminated ``ESC P`` openers once made the text log's
regex scan to the end of the text once per opener (64 KB: 16 s, 1 MB: far beyond a
minute, the relay frozen meanwhile). Bounds here are generous for a slow shared machine:
1 MB of the worst pattern in under 2 s, and twice the input in under 3 times the time.
"""

from __future__ import annotations

import codecs
import json
import time
from collections.abc import Callable
from typing import AnyStr

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from waaah_agent.core.supervise import escapes
from waaah_agent.core.supervise.escapes import Splitter, for_pyte, split_incomplete
from waaah_agent.core.supervise.screen import Screen
from waaah_agent.core.supervise.textlog import LineCleaner
from waaah_agent.runtime.supervise.logfiles import json_text

MB = 1024 * 1024
SECONDS_PER_MB = 2.0
# pyte draws text at ~1.1 s per MB here: a screen fed random output gets twice this bound.
SCREEN_SECONDS_PER_MB = 2 * SECONDS_PER_MB

# Repeated to any length: what once made a parser rescan, or could.
ADVERSARIAL = {
    "dcs openers": b"\x1bP",
    "apc openers": b"\x1b_",
    "sos/pm openers": b"\x1bX\x1b^",
    "osc openers": b"\x1b]",
    "csi openers": b"\x1b[",
    "dcs with payload": b"\x1bP1;2qpayload",
    "osc with payload": b"\x1b]0;title",
    "nested openers": b"\x1bP\x1b]\x1b[\x1b_",
    "st halves": b"\x1bPx\x1b",
    "huge csi params": b"1;2;3;4;5;6;7;8;9;0",  # after one ESC [
    "lone escs": b"\x1b",
    "charset halves": b"\x1b(",
    "invalid utf-8": b"\xff\xc3\x1b\xe2\x9c",
    "8-bit introducers": b"\xc2\x9b\xc2\x9d1;",
}
FRAGMENTS = [
    *ADVERSARIAL.values(),
    b"\x1b\\",
    b"\x07",
    b"\x1b[31m",
    b"\x1b[?2004h",
    b"\x1b[2K",
    b"\x1b]0;t\x07",
    b"\x1b_Gi=1;AAAA\x1b\\",
    b"\x1b#8",
    b"text ",
    b"\r\n",
    b"\r",
    b"\n",
    "\u280b \u4e2d".encode(),
    b"\x9c",
]


def _pattern(name: str, size: int) -> bytes:
    unit = ADVERSARIAL[name]
    body = unit * (size // len(unit))
    return b"\x1b[" + body if name == "huge csi params" else body


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def _text_log(chunks: list[bytes]) -> None:
    cleaner = LineCleaner()
    for chunk in chunks:
        cleaner.feed(chunk, 0.0)
    cleaner.flush(0.0)


def _screen(chunks: list[bytes]) -> None:
    screen = Screen(80, 24)
    for chunk in chunks:
        screen.feed(chunk)
    screen.view()


def _splitter(chunks: list[bytes]) -> None:
    splitter = Splitter()
    for chunk in chunks:
        for_pyte(splitter.feed(chunk.decode("utf-8", "replace")))
    split_incomplete(splitter.release())


def _cast(chunks: list[bytes]) -> None:
    for chunk in chunks:
        json_text(chunk)


PARSERS: dict[str, Callable[[list[bytes]], None]] = {
    "text log": _text_log,
    "screen": _screen,
    "escape filters": _splitter,
    "cast json": _cast,
}


def _seconds(parse: Callable[[list[bytes]], None], chunks: list[bytes], runs: int = 1) -> float:
    """The CPU seconds of the best of ``runs``: what other processes of a shared machine take
    from this one does not count against a parser."""
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        parse(chunks)
        best = min(best, time.process_time() - start)
    return best


# -- the regression: ESC P openers in the text log ------------------------------------------


@pytest.mark.parametrize("size", [64 * 1024, MB], ids=["64KB", "1MB"])
@pytest.mark.parametrize("chunk", [None, 4096], ids=["one chunk", "4KB chunks"])
def test_text_log_digests_unterminated_dcs_openers_quickly(size: int, chunk: int | None) -> None:
    data = b"\x1bP" * (size // 2)
    cleaner = LineCleaner()
    start = time.perf_counter()
    lines = [line for part in _chunks(data, chunk or size) for line in cleaner.feed(part, 0.0)]
    lines += cleaner.feed(b"\x1b[0mafter\n", 0.0)  # any ESC but ST aborts the last one
    elapsed = time.perf_counter() - start
    assert elapsed < SECONDS_PER_MB * max(size / MB, 0.25), f"{elapsed:.2f} s"
    assert lines == ["after"]  # every opener is dropped, and the log goes on


# -- the worst patterns, for every parser -----------------------------------------------------


# How each parser is timed on a pattern: (size, chunk sizes; None: one chunk). The screen is
# fed in small pieces in production (and pyte is slow whatever the input): a quarter MB.
TIMED = {
    "text log": (MB, [None, 4096]),
    "screen": (MB // 4, [4096]),
    "escape filters": (MB, [None]),
    "cast json": (MB, [None]),
}


@pytest.mark.parametrize("parser", PARSERS)
def test_a_megabyte_of_each_adversarial_pattern_is_quick(parser: str) -> None:
    parse, (size, chunkings) = PARSERS[parser], TIMED[parser]
    # What pyte draws (a huge CSI it was spared, invalid UTF-8) costs it its text rate.
    budget = (SCREEN_SECONDS_PER_MB if parser == "screen" else SECONDS_PER_MB) * size / MB
    slow = {}
    for name in ADVERSARIAL:
        data = _pattern(name, size)
        for chunk in chunkings:
            elapsed = _seconds(parse, _chunks(data, chunk or size))
            if elapsed > budget:
                elapsed = _seconds(parse, _chunks(data, chunk or size), runs=2)  # a busy machine?
            if elapsed > budget:
                slow[f"{name} in {chunk or size} B chunks"] = round(elapsed, 2)
    assert not slow


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("name", ["dcs openers", "nested openers", "huge csi params", "st halves"])
def test_twice_the_output_takes_about_twice_the_time(parser: str, name: str) -> None:
    parse, (size, chunkings) = PARSERS[parser], TIMED[parser]
    small, large = _pattern(name, size // 4), _pattern(name, size // 2)
    for chunk in chunkings:
        for runs in (3, 7):  # a busy machine: measure again, longer, before calling it quadratic
            t_small = _seconds(parse, _chunks(small, chunk or len(small)), runs=runs)
            t_large = _seconds(parse, _chunks(large, chunk or len(large)), runs=runs)
            if t_large < 3 * t_small + 0.01:
                break
        assert t_large < 3 * t_small + 0.01, f"{t_small:.3f} s -> {t_large:.3f} s"


@pytest.mark.parametrize("parser", ["text log", "screen", "escape filters"])
def test_a_held_sequence_is_not_rescanned_on_every_read(parser: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One byte at a time into a sequence that never ends: linear even when nothing bounds it.

    With the bound lifted, rescanning what is held on every read is quadratic, which a
    MAX_PENDING-sized bound only hides behind a large constant.
    """
    monkeypatch.setattr(escapes, "MAX_PENDING", 1 << 30)
    parse = PARSERS[parser]
    for opener in (b"\x1bP", b"\x1b]0;", b"\x1b[1;"):
        filler = b"1" if opener == b"\x1b[1;" else b"x"
        small = [opener, *[filler] * 20_000]
        large = [opener, *[filler] * 40_000]
        for runs in (2, 5):  # a busy machine: measure again, longer, before calling it quadratic
            t_small = _seconds(parse, small, runs=runs)
            t_large = _seconds(parse, large, runs=runs)
            if t_large < 3 * t_small + 0.01:
                break
        assert t_large < 3 * t_small + 0.01, f"{opener!r}: {t_small:.3f} s -> {t_large:.3f} s"


def test_pyte_gets_none_of_what_it_chokes_on() -> None:
    """DECALN makes pyte fill every cell (~30 s per 64 KB); giant CSI numbers make it raise."""
    screen = Screen(80, 24)
    start = time.perf_counter()
    for part in _chunks(b"\x1b#8" * 100_000, 4096):
        screen.feed(part)
    screen.feed(b"\x1b[" + b"9" * 5_000 + b"mok")
    assert time.perf_counter() - start < 1.0
    assert screen.errors == 0
    assert screen.view().lines[0].rstrip() == "ok"


# -- random streams ---------------------------------------------------------------------------

streams = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=16)),
    min_size=1,
    max_size=40,
).map(b"".join)
cuts = st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=16)


def _cut(data: AnyStr, sizes: list[int]) -> list[AnyStr]:
    out: list[AnyStr] = []
    at, i = 0, 0
    while at < len(data):
        out.append(data[at : at + sizes[i % len(sizes)]])
        at += sizes[i % len(sizes)]
        i += 1
    return out


@settings(
    max_examples=12,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # shrinking would time it again and again
    suppress_health_check=[HealthCheck.too_slow],
)
@given(unit=streams, chunk=st.sampled_from([1, 7, 4096, None]))
def test_random_streams_repeated_are_quick_for_every_parser(unit: bytes, chunk: int | None) -> None:
    # Small chunks cost a call each whatever the parser does: time fewer bytes for those.
    size = 8 * 1024 if chunk in (1, 7) else 64 * 1024
    data = (unit * (size // max(len(unit), 1) + 1))[:size]
    chunks = _chunks(data, chunk or size)
    per_call = 50e-6 * len(chunks)  # a generous allowance for the calls themselves
    for name, parse in PARSERS.items():
        # pyte's own costs are per operation: O(rows) to scroll a line, O(columns) to delete a
        # character; a screen fed a flood of line feeds takes ~4 s per MB, linear all the same.
        per_mb = 2 * SCREEN_SECONDS_PER_MB if name == "screen" else SECONDS_PER_MB
        bound = per_mb * size / MB + per_call
        for runs in (1, 3, 7):  # a busy machine: the best of more runs before calling it slow
            elapsed = _seconds(parse, chunks, runs=runs)
            if elapsed < bound:
                break
        assert elapsed < bound, f"{name}: {elapsed:.3f} s for {size} B in {len(chunks)} reads"


@settings(max_examples=200, deadline=None)
@given(data=streams, sizes=cuts)
def test_chunking_changes_nothing(data: bytes, sizes: list[int]) -> None:
    """Cut anywhere (short of MAX_PENDING), the log and what pyte is fed come out the same.

    (pyte itself is not quite chunking-proof: it draws a C0 control with the next text.)
    """
    whole, cut = LineCleaner(), LineCleaner()
    expected = whole.feed(data, 0.0) + whole.flush(0.0)
    got = [line for part in _cut(data, sizes) for line in cut.feed(part, 0.0)] + cut.flush(0.0)
    assert got == expected

    assert "".join(_fed_to_pyte(_cut(data, sizes))) == "".join(_fed_to_pyte([data]))


def _fed_to_pyte(chunks: list[bytes]) -> list[str]:
    """What `Screen.feed` passes to pyte, read by read."""
    decoder, splitter = codecs.getincrementaldecoder("utf-8")(errors="replace"), Splitter()
    return [for_pyte(splitter.feed(decoder.decode(chunk))) for chunk in chunks]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=streams, sizes=cuts, bound=st.sampled_from([4, 16, escapes.MAX_PENDING]))
def test_the_splitter_loses_nothing_and_holds_at_most_max_pending(
    data: bytes, sizes: list[int], bound: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(escapes, "MAX_PENDING", bound)
    text = data.decode("utf-8", "replace")
    plain, probed = Splitter(), Splitter()
    out: list[str] = []
    for part in _cut(text, sizes):
        out.append(plain.feed(part))
        assert probed.feed(part) == out[-1]
        held = probed.release()
        assert len(held) <= bound
        assert not held or held.startswith("\x1b")
        assert probed.feed(held) == ""  # held back again, as it was
    assert "".join(out) + plain.release() == text


@settings(max_examples=100, deadline=None)
@given(data=streams)
def test_cast_text_is_the_output_exactly(data: bytes) -> None:
    body = json_text(data)
    assert json.loads(b'"' + body + b'"').encode("utf-8", "surrogateescape") == data
