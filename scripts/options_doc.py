"""docs/options.md: every command and option, as `waaah <command> -h` prints them.

The page is this script's output, never edited by hand; after a change to a command or an
option, write it again (a test checks that the page is what this prints):

    .venv/bin/python scripts/options_doc.py > docs/options.md
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from waaah_agent.commands.app import app  # noqa: E402

WIDTH = 100  # the help as a terminal this wide shows it: no option text cut, lines still short


def commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's words after `waaah`, in the order `waaah -h` lists them; a group, then its own."""
    found: list[tuple[str, ...]] = []
    ctx = group.context_class(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        found.append((*path, name))
        if hasattr(command, "list_commands"):
            found += commands(command, (*path, name))
    return found


def help_text(words: tuple[str, ...]) -> str:
    out = CliRunner().invoke(app, [*words, "-h"], prog_name="waaah", terminal_width=WIDTH)
    if out.exit_code != 0:
        raise SystemExit(f"waaah {' '.join(words)} -h failed: {out.output}")
    return out.stdout.rstrip() + "\n"


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def page() -> str:
    every = commands(typer.main.get_command(app))
    titles = ["waaah", *(f"waaah {' '.join(words)}" for words in every)]
    lines = [
        "# Every command and option",
        "",
        "What `waaah <command> -h` prints, for every command (written by `scripts/options_doc.py`:",
        "run `.venv/bin/python scripts/options_doc.py > docs/options.md` after changing an option).",
        "The environment variables behind the options: [settings.md](settings.md).",
        "",
        "## Contents",
        "",
        *(f"- [`{title}`](#{anchor(title)})" for title in titles),
    ]
    for title, words in zip(titles, [(), *every], strict=True):
        lines += ["", f"## `{title}`", "", "```text", help_text(words).rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(page())
