"""The .cast's JSON escaping on the bytes: what json reads back is exactly what came, for any bytes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from waaah_agent.core.redact import Redactor
from waaah_agent.core.secretscan import scanner
from waaah_agent.core.supervise.castjson import FACTS, escaped, json_string
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


def test_common_output_takes_the_replace_path_and_matches_orjson():
    data = '\x1b[1m✦ Reading\x1b[0m src/app.py\r\n\t"x" \\ \x07\x08'.encode()
    facts = facts_of(data)
    assert not {len(FACTS) - 2, len(FACTS) - 1} & facts  # no rare control, valid UTF-8
    assert json.loads(b'"' + escaped(data, facts) + b'"') == json.loads(json_string(data))


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
