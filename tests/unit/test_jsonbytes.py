"""The native JSON escaping of the .cast (``_jsonbytes.c``): for valid UTF-8 exactly the bytes
orjson gives for the decoded text, for anything else None, on every recorded stream and screen
of each CLI, on every byte and pair of bytes, on random bytes, and on input that grows the
output far past its first guess."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.native import native_module
from waaah_agent.core.supervise import castjson

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

escape_utf8 = native_module(
    "waaah_agent.core.supervise._jsonbytes", "the .cast is escaped in Python"
).escape_utf8


def expected(data: bytes) -> bytes | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return orjson.dumps(text)[1:-1]


def test_the_package_escapes_natively_here():
    assert castjson.NATIVE


def test_every_byte_and_every_pair_of_bytes():
    for a in range(256):
        assert escape_utf8(bytes([a])) == expected(bytes([a])), a
        for b in range(256):
            data = bytes([a, b])
            assert escape_utf8(data) == expected(data), data


def test_three_and_four_byte_characters_at_their_edges():
    """Overlong forms, surrogates, the last code point and past it, cut at every length."""
    for lead in (0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5):
        for second in (0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0):
            for tail in (b"", b"\x80", b"\xbf", b"\x80\x80", b"\xbf\xbf", b"(", b"\x80("):
                data = bytes([lead, second]) + tail
                for cut in range(len(data) + 1):
                    assert escape_utf8(data[:cut]) == expected(data[:cut]), data[:cut]
                    assert escape_utf8(b"x" * 17 + data[:cut]) == expected(b"x" * 17 + data[:cut])


def _recorded() -> list[bytes]:
    found = [p.read_bytes() for p in sorted((FIXTURES / "screens").glob("*/*.bin"))]
    for stream in sorted((FIXTURES / "streams").glob("*/*.jsonl.gz")):
        lines = gzip.decompress(stream.read_bytes()).decode().splitlines()[1:]
        found.append(b"".join(base64.b64decode(json.loads(line)[1]) for line in lines))
    return found


def test_every_recorded_screen_and_wait_stream_of_each_cli():
    recorded = _recorded()
    assert len(recorded) > 40
    for data in recorded:
        assert escape_utf8(data) == expected(data)
        for size in (1, 7, 16, 4096):  # cut as reads cut it: a character may be cut in two
            for at in range(0, min(len(data), 64 * 1024), size):
                piece = data[at : at + size]
                assert escape_utf8(piece) == expected(piece)


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(
        st.binary(max_size=40)
        | st.sampled_from(
            [b"\x1b[0m", "│ ✦ é 😀".encode(), b'"\\', b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"]
        )
        | st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")),
        max_size=20,
    )
)
def test_random_bytes(pieces):
    data = b"".join(pieces)
    assert escape_utf8(data) == expected(data)


def test_output_far_longer_than_the_input_is_grown_for():
    for data in (b"\x00" * 100_000, b"\x1b" * 1_000_001, (b"\x01a" * 50_000) + "✓".encode() * 3):
        body = escape_utf8(data)
        assert body == expected(data)
        assert json.loads(b'"' + body + b'"').encode() == data


def test_any_buffer_is_taken_and_nothing_else():
    data = "a\x1b✓\n".encode()
    for kind in (bytes, bytearray, memoryview):
        assert escape_utf8(kind(data)) == b"a\\u001b\xe2\x9c\x93\\n"
    assert escape_utf8(memoryview(b"xx\x1byy")[2:4]) == b"\\u001by"
    assert escape_utf8(b"") == b""
    with pytest.raises(TypeError):
        escape_utf8("text")  # type: ignore[arg-type]


def test_escaped_falls_back_to_json_for_what_is_not_valid_utf8():
    for data in (b"ok \xe2\x9c", b"\xff", b"a\xed\xa0\x80b"):
        assert escape_utf8(data) is None
        body = castjson.escaped(data, None)
        assert json.loads(b'"' + body + b'"').encode("utf-8", "surrogateescape") == data
