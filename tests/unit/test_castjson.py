"""The .cast's JSON escaping on the bytes: what json reads back is exactly what came, for any bytes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.secrets.secretscan import scanner
from waaah_agent.core.supervise import castjson
from waaah_agent.core.supervise.castjson import FACTS, escaped, json_string, replaced
from waaah_agent.runtime.supervise.logfiles import char_boundary

PIECES = [
    b"plain ",
    b"\x1b[1m\xe2\x9c\xa6 bold\x1b[0m\r\n",
    b'"quoted" back\\slash\ttab bell\x07 bs\x08 del\x7f',
    "ünïcødé ✓ 😀".encode(),
    b"\x00\x01\x0b\x0c\x1f",  # the rarer control characters
    b"\xff\xfe \xc3 \xe2\x9c \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf",  # invalid UTF-8
    b"\xe2\x9c",  # a character cut off
]


def test_the_very_end_with_half_a_character_is_spelled_by_json():
    data = b"ok \xe2\x9c"
    body = escaped(data, None)
    body.decode("utf-8")
    assert json.loads(b'"' + body + b'"').encode("utf-8", "surrogateescape") == data


def facts_of(data: bytes) -> set[int]:
    return scanner([], FACTS).scan(data).patterns


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.binary(max_size=8), max_size=12))
def test_escaped_reads_back_exactly_and_stays_valid_utf8(pieces):
    whole = b"".join(pieces)
    data = whole[: char_boundary(whole, len(whole))]  # as the record cuts it (the rest is held back)
    for facts in (facts_of(whole), None):
        body = escaped(data, facts)
        body.decode("utf-8")  # the file stays valid UTF-8
        assert json.loads(b'"' + body + b'"').encode("utf-8", "surrogateescape") == data


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.binary(max_size=8), max_size=12))
def test_the_replace_path_reads_back_exactly_too(pieces):
    """Where the package was built without a C compiler, the bytes.replace path escapes."""
    whole = b"".join(pieces)
    data = whole[: char_boundary(whole, len(whole))]
    for facts in (facts_of(whole), None):
        body = replaced(data, facts)
        body.decode("utf-8")
        assert json.loads(b'"' + body + b'"').encode("utf-8", "surrogateescape") == data


def test_common_output_takes_the_replace_path_and_matches_orjson():
    data = '\x1b[1m✦ Reading\x1b[0m src/app.py\r\n\t"x" \\ \x07\x08'.encode()
    facts = facts_of(data)
    assert not {len(FACTS) - 2, len(FACTS) - 1} & facts  # no rare control, valid UTF-8
    assert replaced(data, facts) == json_string(data)[1:-1]
    assert escaped(data, facts) == json_string(data)[1:-1]


def test_invalid_utf8_is_seen_by_the_native_pass():
    for bad in (b"a\xffb", b"\xc3(", b"\xed\xa0\x80", b"x\x80", b"\xf4\x90\x80\x80", b"\xe2\x9c("):
        assert len(FACTS) - 1 in facts_of(bad), bad
    for good in (b"", "é✓😀".encode(), b"ascii"):
        assert len(FACTS) - 1 not in facts_of(good), good


def test_a_mask_inside_a_non_ascii_secret_makes_the_record_spell_it_safely():
    r = Redactor(["sécret-κey-0123456789"])
    data, facts = r.record("x ✓ ret-κey-0123 y".encode())
    assert b"[REDACTED]" in data
    body = escaped(data, facts)
    body.decode("utf-8")


def test_without_the_native_escaping_the_record_is_the_same(monkeypatch):
    """Installed without a C compiler: the native pass says what to escape and replace does it,
    to the same bytes (a masked secret, every kind of piece, a cut character at the end)."""
    from waaah_agent.core.secrets import redact

    r = Redactor(["sécret-κey-0123456789", "AIzaSyBench-0123456789abcdefghijklmnopq"])
    chunks = [b"".join(PIECES), "key AIzaSyBench-0123456789abcdefghijklmnopq ✓ ret-κey-0123\r\n".encode()]
    chunks += [p * 3 for p in PIECES]

    def bodies() -> list[bytes]:
        out = []
        for chunk in chunks:
            data, facts = r.record(chunk)
            out.append(escaped(data, facts))
        return out

    native = bodies()
    monkeypatch.setattr(castjson, "_escape_utf8", None)
    monkeypatch.setattr(redact, "NATIVE", False)
    assert bodies() == native
    assert any(b"[REDACTED]" in body for body in native)
