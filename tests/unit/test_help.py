"""`waaah -h` (and each command group's `-h`) shows every command's one-line purpose whole."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from waaah_agent.commands.app import app


def _help(*args: str, columns: int) -> str:
    out = CliRunner().invoke(app, [*args, "-h"], terminal_width=columns)
    assert out.exit_code == 0, out.output
    return out.stdout


def _command_list(text: str) -> list[tuple[str, str]]:
    """The rows of the "Commands:" section: (name, the text printed beside it)."""
    section = text.split("Commands:\n", 1)[1]
    rows = []
    for line in section.splitlines():
        if not line.strip():
            break
        match = re.match(r"^  (\S+)\s{2,}(.*)$", line)
        assert match is not None, f"a command's text wrapped onto a line of its own: {line!r}"
        rows.append((match.group(1), match.group(2)))
    return rows


@pytest.mark.parametrize("group", [(), ("service",), ("mcp",)], ids=["waaah", "service", "mcp"])
def test_each_command_shows_its_purpose_whole_in_80_columns(group: tuple[str, ...]) -> None:
    rows = _command_list(_help(*group, columns=80))
    assert len(rows) >= 3
    for name, text in rows:
        assert text, f"{name} has no help"
        assert not text.endswith("..."), f"{name}'s purpose is cut: {text!r}"
        assert text.endswith("."), f"{name}'s purpose is not a whole sentence: {text!r}"
        # The whole first paragraph of the command's own help, not a shortened one.
        first = _help(*group, name, columns=200).split("\n\n")[1].strip()
        assert " ".join(first.split()) == text, f"{name}: {text!r} is not its help's first line {first!r}"
