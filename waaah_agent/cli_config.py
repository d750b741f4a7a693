"""`waaah config`: where the config file is and what is set, from where."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from waaah_agent.cli_run import _exit


def config(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    example: Annotated[
        bool, typer.Option("--example", help="Print a commented config file with every key.")
    ] = False,
) -> None:
    """The config file's path and each setting: its value and whether it comes from the
    environment, the config file or the default (a flag wins over all three)."""
    from waaah_agent.core.config import template
    from waaah_agent.runtime import config_file

    def go() -> int:
        if example:
            print(template(), end="")
            return 0
        where = config_file.path(os.environ)
        rows = config_file.shown(os.environ)
        if as_json:
            print(json.dumps({"path": str(where), "exists": where.exists(), "settings": rows}, indent=2))
            return 0
        print(
            f"config file: {where}" + ("" if where.exists() else " (none; waaah config --example shows one)")
        )
        for row in rows:
            print(f"  {row['key']:<17} {row['value']:<40} {row['from']} ({row['variable']})")
        return 0

    _exit(go)
