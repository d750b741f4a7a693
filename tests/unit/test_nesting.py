"""core/nesting.py: the depth that readers refuse, counted outside strings and comments."""

from __future__ import annotations

import contextlib
import json
import time

import pytest

from waaah_agent.core.nesting import MAX_DEPTH, TooDeep, depth, dumps_json, loads_json, loads_toml


def test_the_limit_itself_is_taken_one_more_is_refused():
    assert loads_json("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    with pytest.raises(TooDeep, match=f"nested deeper than {MAX_DEPTH} levels"):
        loads_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(ValueError):
        loads_json(b"{" * 100_000)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"prompt": "[" * 5000, "other": "{" * 5000}),
        json.dumps(['a " quoted [[[[ \\\\', "[" * 500]),
        '"' + "[" * 500,  # unterminated: the parser's error, not TooDeep
    ],
)
def test_brackets_in_strings_are_text(text):
    try:
        loads_json(text)
    except TooDeep:
        pytest.fail("brackets inside a string counted as nesting")
    except ValueError:
        assert text.startswith('"[')


def test_toml_strings_and_comments_are_text_arrays_are_not():
    text = 'a = "[[[[["\nb = \'[[[[[\'\n# [[[[[[[[\nc = """\n' + "[" * 300 + '\n"""\n'
    assert loads_toml(text)["b"] == "[[[[["
    assert depth(text, "toml") == 0
    with pytest.raises(TooDeep):
        loads_toml("x = " + "[" * 300 + "]" * 300)


def test_a_large_text_is_checked_in_linear_time():
    text = json.dumps([{"a": "x[y" * 10, "b": [1, 2, [3]]} for _ in range(20_000)])
    hostile = '"' + '\\"' * 500_000  # an unterminated string of escaped quotes
    for sample in (text, hostile):
        start = time.perf_counter()
        with pytest.raises(ValueError) if sample is hostile else contextlib.nullcontext():
            loads_json(sample)
        took = time.perf_counter() - start
        print(f"{len(sample):,} characters checked and parsed in {took * 1000:.0f} ms")
        assert took < 5.0


def test_numbers_no_json_reader_takes_are_written_as_null():
    data = loads_json('{"a": NaN, "b": [Infinity, 1e999, -1e999], "c": {"d": 1.5}, "e": 2}')
    text = dumps_json(data, ensure_ascii=False)
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} written")) == {
        "a": None,
        "b": [None, None, None],
        "c": {"d": 1.5},
        "e": 2,
    }
    assert dumps_json({"a": 1}, indent=2) == json.dumps({"a": 1}, indent=2)
