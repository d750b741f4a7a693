"""Retry / fallback / budget decisions, the circuit breaker (fake clock), and the presenters."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from waaah_agent.core import failures as F
from waaah_agent.core.failures import Failure
from waaah_agent.core.oneshot import present
from waaah_agent.core.oneshot.breaker import shaped
from waaah_agent.core.oneshot.resilience import (
    SHARE_FLOOR,
    Breaker,
    BreakerConfig,
    RetryConfig,
    backoff,
    cli_share,
    next_step,
)


def fail(kind: str, reset: datetime | None = None) -> Failure:
    return Failure(kind, f"{kind} happened", F.RECOVERABLE.get(kind, False), 1, reset)


def test_backoff_doubles_is_capped_and_jittered() -> None:
    assert [backoff(n, 1.0, 30.0, 0.0, 0.5) for n in (1, 2, 3, 4, 6, 9)] == [1, 2, 4, 8, 30, 30]
    assert backoff(1, 1.0, 30.0, 0.25, 0.0) == pytest.approx(0.75)
    assert backoff(1, 1.0, 30.0, 0.25, 0.999999) == pytest.approx(1.25, abs=1e-4)


def test_transient_retries_then_falls_back_then_stops() -> None:
    config = RetryConfig(transient_retries=2)
    steps = [next_step(fail(F.TRANSIENT), n, 100.0, True, 0.0, 0.5, config) for n in range(3)]
    assert [s.action for s in steps] == ["retry", "retry", "fallback"]
    assert [s.delay for s in steps[:2]] == [1.0, 2.0]
    assert next_step(fail(F.TRANSIENT), 2, 100.0, False, 0.0, 0.5, config).action == "stop"


def test_a_retry_the_budget_cannot_cover_is_not_made() -> None:
    step = next_step(fail(F.TRANSIENT), 0, 0.5, True, 0.0, 0.5)
    assert step.action == "fallback"
    # no time left for this CLI: the next one (the run itself stops when the whole budget is spent)
    assert next_step(fail(F.TRANSIENT), 0, 0.0, True, 0.0, 0.5).action == "fallback"
    assert next_step(fail(F.TRANSIENT), 0, 0.0, False, 0.0, 0.5).action == "stop"


@pytest.mark.parametrize("kind", [F.AUTH, F.CRASH, F.TIMEOUT, F.INVALID_MODEL])
def test_never_retried_on_the_same_cli(kind: str) -> None:
    assert next_step(fail(kind), 0, 100.0, True, 0.0, 0.5).action == "fallback"
    assert next_step(fail(kind), 0, 100.0, False, 0.0, 0.5).action == "stop"


@pytest.mark.parametrize("kind", [F.INVALID_INPUT, F.INVALID_SESSION])
def test_bad_input_stops_everything(kind: str) -> None:
    assert next_step(fail(kind), 0, 100.0, True, 0.0, 0.5).action == "stop"


def test_rate_limit_waits_until_a_reset_within_the_budget() -> None:
    now = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
    reset = datetime(2026, 11, 22, 12, 1, tzinfo=timezone.utc)
    step = next_step(fail(F.RATE_LIMIT, reset), 0, 300.0, True, now.timestamp(), 0.5)
    assert step.action == "retry" and step.delay == pytest.approx(62.0)
    # A reset past the budget: the next CLI (another provider's limits) gets the prompt at once.
    assert next_step(fail(F.RATE_LIMIT, reset), 0, 30.0, True, now.timestamp(), 0.5).action == "fallback"
    assert next_step(fail(F.RATE_LIMIT, reset), 0, 30.0, False, now.timestamp(), 0.5).action == "stop"


def test_rate_limit_without_a_reset_waits_longer_than_a_transient_error() -> None:
    step = next_step(fail(F.RATE_LIMIT), 0, 300.0, True, 0.0, 0.5)
    assert step.action == "retry" and step.delay == 10.0
    assert next_step(fail(F.RATE_LIMIT), 1, 300.0, True, 0.0, 0.5).action == "fallback"


def test_breaker_opens_half_opens_and_closes() -> None:
    breaker = Breaker(config=BreakerConfig(threshold=3, cooldown=60.0))
    for t in (0.0, 1.0):
        breaker.record(False, t, fail(F.TRANSIENT))
    assert breaker.state(2.0) == "closed"
    breaker.record(False, 2.0, fail(F.CRASH))
    assert breaker.state(3.0) == "open" and not breaker.allows(3.0)
    assert breaker.state(62.0) == "half-open" and breaker.allows(62.0)
    breaker.record(False, 62.0, fail(F.TIMEOUT))  # the probe failed: a new cooldown
    assert breaker.state(100.0) == "open" and breaker.state(122.0) == "half-open"
    breaker.record(True, 122.0)
    assert breaker.state(123.0) == "closed" and breaker.failures == 0 and breaker.timeouts == 0


def test_the_default_cooldown_is_a_minute() -> None:
    breaker = Breaker()
    for t in range(3):
        breaker.record(False, float(t), fail(F.AUTH))
    assert breaker.state(61.9) == "open" and breaker.state(62.0) == "half-open"


def test_slow_is_not_broken_timeouts_count_apart() -> None:
    breaker = Breaker()
    for t in range(4):
        breaker.record(False, float(t), fail(F.TIMEOUT))
    breaker.record(False, 4.0, fail(F.CRASH))
    breaker.record(False, 5.0, fail(F.CRASH))
    # four timeouts and two failures: neither count is at its threshold
    assert breaker.state(6.0) == "closed" and (breaker.timeouts, breaker.failures) == (4, 2)
    assert "2 failure(s) and 4 timeout(s)" in breaker.why()
    breaker.record(False, 7.0, fail(F.TIMEOUT))
    assert breaker.state(8.0) == "open"  # the fifth timeout opens it
    other = Breaker()
    for t in range(3):
        other.record(False, float(t), fail(F.TRANSIENT))
    assert other.state(3.0) == "open"  # three failures do


def test_half_open_lets_exactly_one_probe_through() -> None:
    breaker = Breaker(config=BreakerConfig(threshold=1, cooldown=10.0))
    breaker.record(False, 0.0, fail(F.CRASH))
    assert not breaker.admit(5.0, lease=30.0)  # open
    assert breaker.admit(10.0, lease=30.0)  # half-open: this run probes
    assert breaker.probing(11.0) and not breaker.allows(11.0) and not breaker.admit(11.0, lease=30.0)
    assert breaker.admit(40.5, lease=30.0)  # the probe's run vanished: its lease ended
    breaker.record(False, 41.0, fail(F.INTERRUPTED))  # an interrupted probe frees it, nothing counted
    assert breaker.state(42.0) == "half-open" and breaker.allows(42.0) and breaker.failures == 1
    assert breaker.admit(42.0, lease=30.0)
    breaker.record(False, 43.0, fail(F.CRASH))  # a failed probe: open again, no probe in flight
    assert breaker.state(44.0) == "open" and breaker.probe_until is None
    assert breaker.admit(53.0, lease=30.0)
    breaker.record(True, 54.0)
    assert breaker.state(54.0) == "closed" and breaker.admit(54.0, lease=30.0)
    assert breaker.probe_until is None  # a closed breaker is claimed by nobody


def test_breaker_ignores_the_callers_mistakes_and_survives_json() -> None:
    breaker = Breaker(config=BreakerConfig(threshold=1))
    breaker.record(False, 0.0, fail(F.INVALID_INPUT))
    assert breaker.state(0.0) == "closed"
    breaker.record(False, 5.0, fail(F.TRANSIENT))
    again = Breaker.from_json(breaker.to_json(), breaker.config)
    assert again.state(6.0) == "open" and "transient" in again.last_error
    for garbage in (
        "garbage",
        {"failures": -1},
        {"failures": True},
        {"opened_at": "x"},
        {"timeouts": 10**9},
        {"opened_at": float("nan")},
        {"probe_until": float("inf")},
        {"last_error": 3},
    ):
        assert not shaped(garbage)
        assert Breaker.from_json(garbage, BreakerConfig()).state(0.0) == "closed"
    assert shaped({"failures": 1, "opened_at": 5})  # a file of the older shape still reads


def test_each_cli_gets_a_share_that_leaves_the_fallbacks_time() -> None:
    assert cli_share(4.0, 2) == 2.0  # --timeout 4 --fallback claude: both get their turn
    assert cli_share(600.0, 3) == 200.0
    assert cli_share(580.0, 2) == 290.0  # the first ended early: its rest goes to the others
    assert cli_share(580.0, 1) == 580.0  # the last CLI has all that is left
    assert cli_share(3.0, 3) == SHARE_FLOOR  # never less than the floor ...
    assert cli_share(1.5, 3) == 1.5  # ... unless less is left
    assert cli_share(0.0, 2) == 0.0 and cli_share(-1.0, 2) == 0.0 and cli_share(10.0, 0) == 10.0


def test_a_cli_whose_share_is_spent_hands_over_to_the_next() -> None:
    assert next_step(fail(F.TIMEOUT), 0, 0.0, True, 0.0, 0.5).action == "fallback"
    assert next_step(fail(F.TIMEOUT), 0, 0.0, False, 0.0, 0.5).action == "stop"
    # a retry is made only when it fits in the CLI's own share
    assert next_step(fail(F.TRANSIENT), 0, 0.9, True, 0.0, 0.5).action == "fallback"
    assert next_step(fail(F.INVALID_INPUT), 0, 0.0, True, 0.0, 0.5).action == "stop"


def test_context_is_prepended_and_cut_with_a_marker() -> None:
    assert present.with_context("do it", "   ", "CONTEXT.md") == "do it"
    small = present.with_context("do it", "facts", "CONTEXT.md")
    assert small.startswith('<context source="CONTEXT.md">\nfacts\n</context>') and small.endswith("do it")
    big = present.with_context("do it", "é" * 40_000, "CONTEXT.md", cap=1000)
    assert "[... context truncated: 1,000 of 80,000 bytes of CONTEXT.md shown ...]" in big
    assert len(big.encode()) < 1300 and big.endswith("do it")


def envelope(response: str, **extra: object) -> dict[str, object]:
    return {"response": response, "exit_code": 0, "duration_ms": 1234, **extra}


def test_llm_format_short_answer_and_footer() -> None:
    saved: list[str] = []
    text = present.llm_text(envelope("All good."), "", lambda full: saved.append(full) or "/x")
    assert text == "All good.\n[exit:0 | 1.2s]" and saved == []


def test_llm_format_cuts_long_output_and_saves_it_whole() -> None:
    body = "".join(f"line {i}\n" for i in range(5000))
    saved: list[str] = []
    text = present.llm_text(
        envelope(body), "", lambda full: saved.append(full) or "/runs/full.txt", head=100, tail=50
    )
    assert saved == [body]
    assert text.startswith(body[:100]) and body[-50:] in text
    assert "characters" in text and "full output: /runs/full.txt" in text and len(text) < 400


def test_llm_format_describes_binary_and_attaches_stderr_on_failure() -> None:
    text = present.llm_text(envelope("\x00\x01\x02PNG" * 10), "", lambda full: "/runs/blob.txt")
    assert text.startswith("[binary output: 60 bytes, not shown; saved to /runs/blob.txt]")
    failed = envelope("", error="API Error: 500", error_type="transient", exit_code=16)
    text = present.llm_text(failed, "Traceback: boom\n", lambda full: "")
    assert "[error: transient: API Error: 500]" in text and "[stderr]\nTraceback: boom" in text
    assert text.endswith("[exit:16 | 1.2s]")
