"""A `waaah run`'s own budget (``--max-tokens``, ``--max-cost``): what its attempts spent, and
whether another may start.

The attempt in hand always finishes (cutting a CLI off mid-answer would leave half-made edits
and spend the tokens all the same); once the budget is spent no retry and no fallback starts,
and the run ends with ``error_kind: budget`` (exit 17). An answer that went over the budget is
still the answer: it is printed, with the budget marked spent and a warning. Pure.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from waaah_agent.core.oneshot.streams import Tokens
from waaah_agent.core.prices import Prices, cost_of


@dataclass(frozen=True)
class RunBudget:
    max_tokens: int | None = None
    max_cost: float | None = None

    def __bool__(self) -> bool:
        return self.max_tokens is not None or self.max_cost is not None

    def spent(self, used: Tokens, cost: float | None) -> str:
        """Why no more attempts may start ("" while they may)."""
        tokens = counted(used)
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"{tokens:,} tokens used, --max-tokens {self.max_tokens:,}"
        if self.max_cost is not None and cost is not None and cost >= self.max_cost:
            return f"${cost:,.4f} spent, --max-cost ${self.max_cost:,.4f}"
        return ""

    def to_json(self, used: Tokens, cost: float | None, spent: str) -> dict[str, Any]:
        out: dict[str, Any] = {"tokens": counted(used), "spent": bool(spent)}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.max_cost is not None:
            out["max_cost"] = self.max_cost
            out["cost_usd"] = None if cost is None else round(cost, 6)
        if spent:
            out["why"] = spent
        return out


def counted(used: Tokens) -> int:
    """The tokens a budget counts: every prompt token read (from a cache too) and every token
    produced: the CLI's ``total``. (claude's ``input`` leaves out cache reads, the others' holds
    them; the totals agree.)"""
    return used.total or used.input + used.output


def needs_prices(budget: RunBudget, chain: list[str], reports_cost: Container[str]) -> list[str]:
    """The CLIs of ``chain`` whose cost only a price table can tell (for --max-cost): those not
    in ``reports_cost`` (``Adapter.reports_cost``: their stream says what a run cost)."""
    if budget.max_cost is None:
        return []
    return [name for name in chain if name not in reports_cost]


def attempt_cost(tokens: Tokens, model: str, prices: Prices) -> tuple[float | None, tuple[str, ...]]:
    """What one attempt cost: the CLI's own figure, else its tokens at the table's prices
    (None: neither is known); and the models the table had no price for."""
    if tokens.cost_usd is not None:
        return tokens.cost_usd, ()
    if not prices:
        return None, ()
    found = cost_of(
        {model: {"input": tokens.input, "output": tokens.output, "cached": tokens.cached}}, prices
    )
    return found.usd, found.unpriced
