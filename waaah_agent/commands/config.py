"""`waaah config`: where the config file is and what is set, from where."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from waaah_agent.commands.running import _exit, _masked


def config(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    example: Annotated[
        bool, typer.Option("--example", help="Print a commented config file with every key.")
    ] = False,
) -> None:
    """Show the config file's path and each setting.

    The config file's path and each setting: its value and whether it comes from the
    environment, the config file or the default (a flag wins over all three)."""
    from waaah_agent.core.config import template
    from waaah_agent.core.printable import one_line
    from waaah_agent.runtime import config_file

    def go() -> int:
        if example:
            print(template(), end="")
            return 0
        where = config_file.path(os.environ)
        rows = config_file.shown(os.environ)
        if as_json:
            # Each value masked on its own: the document's own keys ("key": ...) are no secret.
            shown = [{**row, "value": _masked(row["value"])} for row in rows]
            print(
                json.dumps(
                    {"path": _masked(str(where)), "exists": where.exists(), "settings": shown}, indent=2
                )
            )
            return 0
        print(
            _masked(f"config file: {where}")
            + ("" if where.exists() else " (none; waaah config --example shows one)")
        )
        for row in rows:  # values from a file: secrets masked, escapes shown
            print(
                _masked(f"  {row['key']:<17} {one_line(row['value']):<40} {row['from']} ({row['variable']})")
            )
        return 0

    _exit(go)
