"""`waaah run --max-tokens/--max-cost` over the real claude and gemini, offline: the attempt in
hand finishes, no retry or fallback starts once the run's budget is spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doubles.fake_model import FakeModel, HttpError, Rule, Text, ToolCall, Usage
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import both_env, records, waaah_run
from tests.envelope_schema import check

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def rules() -> list[Rule]:
    return [
        # claude: one model message (its tokens counted), then the provider fails for good.
        Rule(ToolCall("no_such_tool", {}, server=None), marker="SPEND-MARKER", api="anthropic"),
        Rule(HttpError(500, retryable=False), tool_result="no_such_tool", api="anthropic"),
        Rule(Text("gemini would have answered"), marker="SPEND-MARKER", api="gemini"),
        Rule(Text("a long answer"), marker="OVER-MARKER"),
    ]


def test_a_spent_token_budget_starts_no_fallback(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules(), usage=Usage(1200, 34)) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(
            ws, env, "SPEND-MARKER go", "--agent", "claude", "--fallback", "gemini", "--max-tokens", "1000"
        )
        assert code == 17, err
        # One of the older wrappers' eight (a retry spends more: not recoverable), the precise beside.
        assert (out["error_type"], out["error_kind"], out["recoverable"]) == ("unknown", "budget", False)
        check(out)
        assert [a["agent"] for a in out["attempts"]] == ["claude"]
        assert out["budget"]["spent"] is True and out["budget"]["max_tokens"] == 1000
        assert out["budget"]["tokens"] >= 1000 and "--max-tokens 1,000" in out["error"]
        assert not [r for r in fake.main_requests() if r["api"] == "gemini"]
        assert "budget: the run's budget is spent" in err
        stops = [r for r in records(out["log_path"], "decision") if r["action"] == "stop"]
        assert stops and stops[0]["reason"].startswith("budget spent")
        # The same run without a budget goes on to gemini.
        code, out, err = waaah_run(ws, env, "SPEND-MARKER go", "--agent", "claude", "--fallback", "gemini")
        assert code == 0 and out["agent"] == "gemini" and "budget" not in out, err


@pytest.mark.parametrize("cli", ["claude", "gemini"])
def test_an_answer_over_the_budget_is_kept_with_a_warning(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    prices = tmp_path / "prices.toml"
    prices.write_text('["*"]\ninput = 1000.0\noutput = 1000.0\n')  # $1 per thousand tokens
    with FakeModel(rules(), usage=Usage(1200, 34)) as fake:
        env = both_env(tmp_path, ws, fake.url)
        env["WAAAH_PRICES"] = str(prices)
        limit = "0.5" if cli == "gemini" else "0.000001"  # claude's own figure is cents at most
        code, out, err = waaah_run(ws, env, "OVER-MARKER go", "--agent", cli, "--max-cost", limit)
        assert code == 0 and out["response"] == "a long answer", err
        budget = out["budget"]
        assert budget["spent"] is True and budget["max_cost"] == float(limit)
        assert budget["cost_usd"] > float(limit)
        if cli == "gemini":  # gemini reports no cost: the table's price, 1,234 tokens at $1/1000
            assert budget["cost_usd"] == pytest.approx(1.234)
        else:  # claude's own figure wins over the table
            assert budget["cost_usd"] == pytest.approx(out["tokens"]["cost_usd"])
        assert any("went over the run's budget" in w for w in out["warnings"])
        assert "waaah: warning: the answer went over the run's budget" in err


def test_a_cost_budget_without_prices_is_one_line_before_any_cli_starts(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "OVER-MARKER go", "--agent", "gemini", "--max-cost", "1")
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "--max-cost needs the prices of the models" in err and "prices.toml" in err
        assert fake.main_requests() == []
        # claude reports its own cost: no table needed.
        code, out, err = waaah_run(ws, env, "OVER-MARKER go", "--agent", "claude", "--max-cost", "100")
        assert code == 0 and out["budget"]["spent"] is False, err
