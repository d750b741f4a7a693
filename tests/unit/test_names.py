"""core/names.py: a name a user gives is a name, never a path."""

from __future__ import annotations

import pytest

from waaah_agent.core.names import MAX_NAME, problem, refusal


@pytest.mark.parametrize("name", ["waaah-orc", "gemini-20261126-121424-932923", "a.b_c:d", "Ünïcode-名前"])
def test_names_that_are_names(name):
    assert problem(name) is None and refusal("--as", name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "is empty"),
        ("x" * (MAX_NAME + 1), "longer than"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("a\u202eb", "control character"),  # right-to-left override
        ("../x", "path separator"),
        ("a\\b", "path separator"),
        ("..", "'..'"),
        ("a..b", "'..'"),
        ("-x", "starts with '-'"),
        (".x", "starts with '.'"),
        (" x", "space"),
    ],
)
def test_names_that_are_not(name, why):
    assert why in (problem(name) or "")


def test_the_refusal_is_one_line_that_shows_no_control_character():
    line = refusal("--as", "a\x1b]52;c;aGk=\x07b" + "y" * 200) or ""
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    assert line.startswith("--as 'a\\u001b]52") and "..." in line and len(line) < 200
