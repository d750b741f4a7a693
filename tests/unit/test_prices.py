"""The price table (--max-cost), the tokens per model from the CLIs' real transcripts, and the
cost budgets of a session and of a `waaah run`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_control import started
from waaah_agent.adapters import registry
from waaah_agent.adapters.claude.transcript import claude_counter
from waaah_agent.adapters.codex import codex_counter
from waaah_agent.adapters.gemini.transcript import gemini_counter
from waaah_agent.core.oneshot.run_budget import RunBudget, attempt_cost, needs_prices
from waaah_agent.core.oneshot.streams import Tokens
from waaah_agent.core.prices import Price, PriceProblem, cost_of, parse
from waaah_agent.core.supervise import events as ev
from waaah_agent.core.tokens import model_totals, record_models

#: The CLIs whose stream reports what a run cost.
COSTED = {name for name, adapter in registry().items() if adapter.reports_cost}

TRANSCRIPTS = Path(__file__).parent.parent / "fixtures" / "transcripts"
TABLE = """
["gemini-2.5-pro"]
input = 1.25
cached = 0.31
output = 10.0

["claude-opus-*"]
input = 5.0
output = 25.0

["claude-opus-5-*"]
input = 6.0
output = 30.0
"""


def test_a_model_gets_its_own_price_else_the_most_specific_pattern():
    prices = parse(TABLE)
    assert prices.find("gemini-2.5-pro") == Price(1.25, 10.0, 0.31)
    assert prices.find("claude-opus-5-5") == Price(6.0, 30.0)  # the longer pattern wins
    assert prices.find("claude-opus-4-1") == Price(5.0, 25.0)
    assert prices.find("gemini-2.5-flash") is None


def test_cost_counts_cached_tokens_at_their_price_and_unpriced_models_at_the_highest():
    prices = parse(TABLE)
    # 1M input of which 400k cached: 600k x 1.25 + 400k x 0.31 + 100k x 10.
    found = cost_of({"gemini-2.5-pro": {"input": 1_000_000, "cached": 400_000, "output": 100_000}}, prices)
    assert found.usd == pytest.approx(0.75 + 0.124 + 1.0) and found.unpriced == ()
    # No cached price: cached tokens cost the input price.
    assert (
        cost_of({"claude-opus-4": {"input": 1_000_000, "cached": 1_000_000, "output": 0}}, prices).usd == 5.0
    )
    unknown = cost_of(
        {"gpt-9": {"input": 1_000_000, "output": 1_000_000, "cached": 0}, "": {"input": 5}}, prices
    )
    assert unknown.usd == pytest.approx(6.0 + 30.0 + 5 * 6.0 / 1e6)  # the dearest input and output
    assert unknown.unpriced == ("(unknown model)", "gpt-9")
    # Counts beyond reason never make a negative or a cached share above the input.
    assert cost_of({"gemini-2.5-pro": {"input": 10, "cached": 99, "output": -5}}, prices).usd >= 0


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[x", "not TOML"),
        ('"gemini" = 3', "expected a table"),
        ('["m"]\ninput = 1', "no output price"),
        ('["m"]\ninput = "1"\noutput = 2', "expected US dollars per million tokens"),
        ('["m"]\ninput = -1\noutput = 2', "expected US dollars per million tokens"),
        ('["m"]\ninput = true\noutput = 2', "expected US dollars per million tokens"),
        ('["m"]\ninput = 1\noutput = 2\nouput = 3', "unknown key 'ouput'"),
        ('[""]\ninput = 1\noutput = 2', "an empty model name"),
        ("\n".join(f'["m{i}"]\ninput = 1\noutput = 1' for i in range(2001)), "more than 2000"),
    ],
)
def test_a_wrong_table_is_one_line(text, said):
    with pytest.raises(PriceProblem) as err:
        parse(text)
    assert said in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("name", "counter", "model"),
    [
        ("claude-2.1.332.jsonl", claude_counter, "claude-opus-5-5"),
        ("gemini-0.61.0.jsonl", gemini_counter, "gemini-2.5-pro"),
        ("gemini-0.34.0.json", gemini_counter, "gemini-2.5-pro"),
        ("codex-0.171.0.jsonl", codex_counter, "gpt-fake"),  # named once per turn (turn_context)
    ],
)
def test_the_real_transcripts_give_their_tokens_per_model(name, counter, model):
    count = counter()
    with (TRANSCRIPTS / name).open() as fh:
        total = count.feed(fh)
    by_model = count.by_model()
    assert list(by_model) == [model]
    assert by_model[model] == {"input": total.input, "output": total.output, "cached": total.cached}
    assert total.input > 0 and total.output > 0


def test_per_model_counts_of_a_file_never_go_down_and_files_add():
    files = record_models({}, "a", {"m": {"input": 10, "output": 5, "cached": 0}})
    files = record_models(files, "a", {"m": {"input": 4, "output": 9, "cached": 1}})  # rewritten file
    files = record_models(files, "b", {"m": {"input": 1, "output": 1, "cached": 0}, "n": {"input": 2}})
    assert model_totals(files) == {
        "m": {"input": 11, "output": 10, "cached": 1},
        "n": {"input": 2, "output": 0, "cached": 0},
    }


def test_a_spent_cost_budget_stops_the_session_once_the_task_is_done():
    night = started()
    night.cli.task_for = 600
    night.wait_ends("task")
    night.run_until(night.t + 10)
    night.tell(ev.TokensCounted(900, None, 4.99, 5.0))
    night.run_until(night.t + 10)
    assert night.records("budget") == []
    night.tell(ev.TokensCounted(1000, None, 5.01, 5.0))
    night.run_until(night.t + 300)
    assert night.outcome is None  # the task in hand goes on
    assert night.records("budget") == [{"cost_usd": 5.01, "cost_limit": 5.0, "tokens": 1000}]
    night.run_until(night.t + 600)
    assert night.outcome is not None and night.outcome.reason is ev.StopReason.BUDGET
    assert "--max-cost $5.00" in night.outcome.detail and night.records("nudge") == []


def test_a_run_budget_says_when_no_more_attempts_may_start():
    budget = RunBudget(max_tokens=1000, max_cost=0.5)
    assert not RunBudget() and budget
    assert budget.spent(Tokens(400, 500), 0.1) == ""
    assert budget.spent(Tokens(900, 100), 0.1) == "1,000 tokens used, --max-tokens 1,000"
    assert budget.spent(Tokens(1, 1), 0.5).startswith("$0.5000 spent")
    assert budget.spent(Tokens(1, 1), None) == ""  # an unknown cost spends nothing
    assert needs_prices(budget, ["claude", "gemini", "opencode", "codex"], COSTED) == ["gemini", "codex"]
    assert needs_prices(RunBudget(max_tokens=5), ["gemini"], COSTED) == []
    prices = parse(TABLE)
    assert attempt_cost(Tokens(10, 10, cost_usd=0.02), "gemini-2.5-pro", prices) == (0.02, ())
    usd, unpriced = attempt_cost(Tokens(1_000_000, 0), "gemini-2.5-pro", prices)
    assert usd == 1.25 and unpriced == ()
    assert attempt_cost(Tokens(1_000_000, 0), "x", parse(""))[0] is None


def test_a_model_that_spent_nothing_is_never_an_unpriced_model():
    """claude writes its API-error messages as model "<synthetic>" with all-zero usage."""
    found = cost_of(
        {"<synthetic>": {"input": 0, "output": 0, "cached": 0}, "gemini-2.5-pro": {"input": 10**6}},
        parse(TABLE),
    )
    assert found.unpriced == () and found.usd == 1.25


def test_a_run_budget_counts_claude_s_cache_reads_as_the_session_budget_does():
    """claude's stream `input` leaves out cache reads (the other CLIs' holds them): the budget
    counts the CLI's total, every token read or produced."""
    claude = Tokens(input=10, output=5, cached=1000, total=1015)
    assert RunBudget(max_tokens=1000).spent(claude, None) == "1,015 tokens used, --max-tokens 1,000"
    assert RunBudget(max_tokens=1000).to_json(claude, None, "")["tokens"] == 1015
