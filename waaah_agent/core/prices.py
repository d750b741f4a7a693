"""What tokens cost: the user's price table, and the cost of a session's or a run's tokens.

No CLI writes a price into its transcript, and list prices change more often than a release of
waaah, so none are bundled: the user keeps a table (``prices`` in the config file, or the file
named by ``WAAAH_PRICES``), in US dollars per million tokens::

    ["gemini-2.5-pro"]
    input = 1.25      # every prompt token read...
    cached = 0.31     # ...except those read from a cache (default: the input price)
    output = 10.0     # every token produced (thinking included)

    ["claude-opus-*"] # a glob: the most specific pattern that matches a model wins
    input = 5.0
    output = 25.0

A model the table has no price for is charged at the table's highest prices, and named, so a
cost budget is never underestimated. A CLI that reports its own cost (claude's and opencode's
headless streams) is believed over the table. Pure: the file's text in, numbers out.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from waaah_agent.core.nesting import TooDeep, loads_toml

MILLION = 1_000_000
#: More rows than any real table; a bigger file is a mistake, said rather than read.
MAX_ROWS = 2000


class PriceProblem(ValueError):
    """One line: the table's entry and what is wrong with it."""


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cached: float | None = None  # None: cached tokens cost the input price

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float:
        cached = min(max(0, cached_tokens), max(0, input_tokens))
        cached_price = self.input if self.cached is None else self.cached
        return (
            (max(0, input_tokens) - cached) * self.input
            + cached * cached_price
            + max(0, output_tokens) * self.output
        ) / MILLION


@dataclass(frozen=True)
class Prices:
    rows: Mapping[str, Price]

    def __bool__(self) -> bool:
        return bool(self.rows)

    def find(self, model: str) -> Price | None:
        """The price of ``model``: its own row, else the most specific pattern matching it."""
        if model in self.rows:
            return self.rows[model]
        matches = [p for p in self.rows if _is_pattern(p) and fnmatch.fnmatchcase(model, p)]
        if not matches:
            return None
        return self.rows[max(matches, key=lambda p: (len(p.replace("*", "")), p))]

    def dearest(self) -> Price:
        """The highest prices of the table (each kind on its own), for a model it does not name."""
        rows = list(self.rows.values())
        return Price(
            max(r.input for r in rows),
            max(r.output for r in rows),
            max(r.input if r.cached is None else r.cached for r in rows),
        )


@dataclass(frozen=True)
class Cost:
    usd: float
    unpriced: tuple[str, ...] = ()  # models charged at the table's highest prices


def parse(text: str) -> Prices:
    """The table in a TOML text (see the module's doc)."""
    try:
        data = loads_toml(text)
    except TooDeep as err:
        raise PriceProblem(str(err)) from None
    except ValueError as err:  # tomllib.TOMLDecodeError
        raise PriceProblem(f"not TOML ({err})") from None
    if len(data) > MAX_ROWS:
        raise PriceProblem(f"{len(data)} models: more than {MAX_ROWS}, which no real table has")
    rows: dict[str, Price] = {}
    for model, row in data.items():
        if not model.strip():
            raise PriceProblem("an empty model name")
        if not isinstance(row, dict):
            raise PriceProblem(
                f"{model!r} = {row!r:.40}: expected a table, e.g. [{_quoted(model)}] input = 1.25 output = 10.0"
            )
        unknown = sorted(set(row) - {"input", "output", "cached"})
        if unknown:
            raise PriceProblem(
                f"[{_quoted(model)}]: unknown key {unknown[0]!r} (known: input, output, cached)"
            )
        for needed in ("input", "output"):
            if needed not in row:
                raise PriceProblem(f"[{_quoted(model)}]: no {needed} price (US dollars per million tokens)")
        rows[model] = Price(
            _dollars(model, "input", row["input"]),
            _dollars(model, "output", row["output"]),
            _dollars(model, "cached", row["cached"]) if "cached" in row else None,
        )
    return Prices(rows)


def _dollars(model: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e6:
        raise PriceProblem(
            f"[{_quoted(model)}] {key} = {value!r:.40}: expected US dollars per million tokens, e.g. 1.25"
        )
    return float(value)


def _quoted(model: str) -> str:
    return f'"{model}"'


def _is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


def cost_of(usage_by_model: Mapping[str, Mapping[str, int]], prices: Prices) -> Cost:
    """What these tokens (per model: input, output, cached) cost at these prices.

    A model with no price (or an unknown one, "") is charged at the table's highest prices and
    named in ``unpriced``."""
    if not prices:
        raise PriceProblem("the price table is empty")
    usd, unpriced = 0.0, []
    for model, counts in usage_by_model.items():
        if not any(int(counts.get(k, 0)) for k in ("input", "output", "cached")):
            continue  # e.g. claude's "<synthetic>" error messages: nothing spent, nothing to price
        price = prices.find(model) if model else None
        if price is None:
            price = prices.dearest()
            unpriced.append(model or "(unknown model)")
        usd += price.cost(
            int(counts.get("input", 0)), int(counts.get("output", 0)), int(counts.get("cached", 0))
        )
    return Cost(round(usd, 6), tuple(sorted(set(unpriced))))


def example() -> str:
    """The table's shape, for error messages and `waaah config --example`."""
    return '["gemini-2.5-pro"]\ninput = 1.25\ncached = 0.31\noutput = 10.0\n'


def example_line() -> str:
    """The same entry on one line (a TOML inline table), so a message shows it as it can be pasted."""
    return '"gemini-2.5-pro" = {input = 1.25, cached = 0.31, output = 10.0}'
