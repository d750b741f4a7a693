"""The user's price table (core/prices.py says what it holds), read safely.

``$WAAAH_PRICES`` (the config file's ``prices``), else ``prices.toml`` in waaah's config folder
(``~/.config/waaah-agent/prices.toml``). A named file that is missing, and any file that is not a
regular UTF-8 TOML file of at most 256 KB in the table's shape, is one line naming the file and
the entry (exit code 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from waaah_agent import settings
from waaah_agent.core.prices import PriceProblem, Prices, example_line, parse
from waaah_agent.errors import UsageError
from waaah_agent.runtime import config_file, key_file
from waaah_agent.safe_read import read_capped, why

CAP = 256 * 1024


def where(env: Mapping[str, str]) -> tuple[Path, bool]:
    """The table's path, and whether it was named (a named one must exist)."""
    given = env.get(settings.PRICES)
    if given:
        return Path(given).expanduser(), True
    return key_file.folder(env) / "prices.toml", False


def load(env: Mapping[str, str]) -> tuple[Prices, Path | None]:
    """The table and its file; an empty table and None when there is none."""
    path, named = where(env)
    try:
        raw = read_capped(path, CAP)
    except FileNotFoundError:
        if named:
            raise UsageError(
                f"{config_file.origin(settings.PRICES)} names {path}, which does not exist"
            ) from None
        return Prices({}), None
    except OSError as err:
        raise UsageError(f"the price table {path} cannot be read ({why(err)}); fix or move it") from None
    try:
        return parse(raw.decode("utf-8")), path
    except UnicodeDecodeError as err:
        raise UsageError(
            f"the price table {path} is not UTF-8 text (byte {err.start}); fix or move it"
        ) from None
    except PriceProblem as err:
        raise UsageError(f"the price table {path}: {err}") from None


def required(env: Mapping[str, str], option: str) -> Prices:
    """The table a cost budget needs: none is a one-line error saying how to make one."""
    prices, _ = load(env)
    if not prices:
        path, _ = where(env)
        shape = example_line()
        raise UsageError(
            f"{option} needs the prices of the models, which no CLI writes down: put them in {path} "
            f"(US dollars per million tokens, e.g. {shape}) or name a file with {settings.PRICES}"
        )
    return prices
