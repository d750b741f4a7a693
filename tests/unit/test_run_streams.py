"""Stream parsers and error classes on real headless streams (tests/fixtures/streams, recorded by
scripts/record_streams.py from the pinned CLIs against the fake model: 1200 input / 34 output
tokens per model call)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from waaah_agent import adapters
from waaah_agent.core import failures as F
from waaah_agent.core.failures import classify
from waaah_agent.core.oneshot.streams import StreamParser, StreamSummary

STREAMS = Path(__file__).resolve().parents[1] / "fixtures" / "streams"
#: The recorded streams of each pinned CLI (codex and opencode: tests/unit/test_run_streams_openai.py).
RECORDED = {
    "gemini": "gemini-0.61.0",
    "claude": "claude-2.1.332",
    "codex": "codex-0.171.0",
    "opencode": "opencode-1.18.33",
}
CLIS = ("gemini", "claude")


def parser_for(cli: str) -> StreamParser:
    """A new parser of the CLI's stream, as its adapter makes it."""
    headless = adapters.registry()[cli].headless
    assert headless is not None
    return headless.parser()


def recorded(cli: str, scenario: str) -> tuple[StreamSummary, int | None, str]:
    """The parsed stdout, the exit code (None when the recording was cut off) and the stderr."""
    folder = STREAMS / RECORDED[cli]
    summary = parser_for(cli).feed_all(
        (folder / f"{scenario}.stdout").read_text(encoding="utf-8").splitlines()
    )
    code = (folder / f"{scenario}.exit").read_text().strip()
    return summary, None if code == "timeout" else int(code), (folder / f"{scenario}.stderr").read_text()


def failure_of(cli: str, scenario: str) -> F.Failure | None:
    summary, code, stderr = recorded(cli, scenario)
    now = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
    refused = adapters.registry()[cli].refused_login()
    return classify(code, stderr, summary, timed_out=code is None, now=now, tz=timezone.utc, refused=refused)


@pytest.mark.parametrize("cli", CLIS)
def test_answer_has_session_model_response_and_tokens(cli: str) -> None:
    summary, code, _ = recorded(cli, "answer")
    assert code == 0 and summary.finished
    assert summary.response == "Hello from the fake model."
    assert len(summary.session_id) == 36 and summary.model
    assert (summary.tokens.input, summary.tokens.output, summary.tokens.total) == (1200, 34, 1234)
    assert summary.tools.call_count == 0 and summary.tools.activity_class == "none"
    assert failure_of(cli, "answer") is None


def test_claude_reports_cost_and_gemini_does_not() -> None:
    assert recorded("claude", "answer")[0].tokens.cost_usd == pytest.approx(0.00548)
    assert recorded("gemini", "answer")[0].tokens.cost_usd is None


@pytest.mark.parametrize("cli", CLIS)
def test_tool_turn_counts_the_mcp_call_and_keeps_the_final_answer(cli: str) -> None:
    summary, code, _ = recorded(cli, "tool")
    assert code == 0
    assert summary.response == "Back from wait_for_prompt."
    assert summary.tools.call_count == 1 and summary.tools.error_count == 0
    assert summary.tools.tool_names[0].endswith("wait_for_prompt")
    assert summary.tools.activity_class == "mcp"
    assert (summary.tokens.input, summary.tokens.output) == (2400, 68)  # two model calls


@pytest.mark.parametrize("cli", CLIS)
def test_resume_keeps_the_session_id(cli: str) -> None:
    first, _, _ = recorded(cli, "answer")
    again, code, _ = recorded(cli, "resume")
    assert code == 0 and again.session_id == first.session_id


@pytest.mark.parametrize(
    ("cli", "scenario", "kind", "recoverable"),
    [
        ("gemini", "rate_limit", F.QUOTA, True),  # "You have exhausted your daily quota"
        ("claude", "rate_limit", F.RATE_LIMIT, True),
        ("gemini", "auth", F.AUTH, True),
        ("claude", "auth", F.AUTH, True),
        ("gemini", "no_key", F.AUTH, True),
        ("claude", "no_key", F.AUTH, True),
        # "Sign in with Google" chosen, no credentials, nobody to answer: FatalAuthenticationError.
        ("gemini", "oauth_needed", F.AUTH, True),
        ("gemini", "account_refused", F.AUTH, True),  # IneligibleTierError (fake_code_assist.py)
        ("gemini", "bad_model", F.INVALID_MODEL, True),
        ("claude", "bad_model", F.INVALID_MODEL, True),
        ("gemini", "bad_session", F.INVALID_SESSION, True),
        ("claude", "bad_session", F.INVALID_SESSION, True),
        ("claude", "server_error", F.PROVIDER_ERROR, True),
        # gemini keeps retrying a 500 on its own: the run's time budget cuts it off.
        ("gemini", "server_error", F.TIMEOUT, True),
    ],
)
def test_recorded_failures_are_classified(cli: str, scenario: str, kind: str, recoverable: bool) -> None:
    # recoverable: the older wrappers' table (a retry or a fallback is appropriate), auth as
    # provider_error (another CLI has its own login)
    failure = failure_of(cli, scenario)
    assert failure is not None, f"{cli} {scenario} not seen as a failure"
    assert (failure.type, failure.recoverable) == (kind, recoverable), failure
    assert failure.message and "\n" not in failure.message


def test_an_auth_failure_is_told_in_the_cli_s_own_words() -> None:
    """The line where gemini said what is wrong with its login, not its first line of stderr."""
    oauth = failure_of("gemini", "oauth_needed")
    assert oauth is not None and oauth.exit_code == 41
    assert oauth.message.startswith("Error authenticating: FatalAuthenticationError: Manual authorization")
    refused = failure_of("gemini", "account_refused")
    assert refused is not None and refused.message.startswith("Error authenticating: IneligibleTierError")
    # What happened and what works instead, in the envelope's one line.
    assert "Antigravity CLI (agy), which waaah cannot supervise" in refused.message
    assert "GEMINI_API_KEY" in refused.message and "--start=claude" in refused.message
    assert "Antigravity" not in oauth.message


@pytest.mark.parametrize("cli", CLIS)
def test_the_models_own_words_about_rate_limits_are_not_an_error(cli: str) -> None:
    summary, code, _ = recorded(cli, "rate_limit_words")
    assert code == 0 and "rate limit" in summary.response
    assert summary.error == "" and failure_of(cli, "rate_limit_words") is None


def test_claude_error_text_is_not_taken_as_the_answer() -> None:
    summary, _, _ = recorded("claude", "server_error")
    assert summary.error.startswith("API Error: 500") and summary.error_status == 500
    assert summary.response == ""


def test_noise_lines_are_dropped_and_counted() -> None:
    parser = parser_for("gemini")
    lines = ["Loaded cached credentials.", '{"type":"init","session_id":"s1","model":"m"}', "[1, 2]", ""]
    summary = parser.feed_all(lines)
    assert (summary.session_id, summary.events, summary.noise) == ("s1", 1, 2)


def test_a_killed_cli_with_nothing_to_say_is_a_crash() -> None:
    failure = classify(-9, "", StreamSummary())
    assert failure is not None and failure.type == F.CRASH and "signal 9" in failure.message


def test_rate_limit_reset_time_is_parsed() -> None:
    summary = StreamSummary(error="You've hit your limit · resets 3pm (UTC)", error_status=429)
    now = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
    failure = classify(1, "", summary, now=now, tz=timezone.utc)
    assert failure is not None and failure.type == F.RATE_LIMIT
    assert failure.reset_at == datetime(2026, 11, 22, 15, 0, tzinfo=timezone.utc)


def _odd_events(seed: int, count: int) -> list[str]:
    """Lines of the CLIs' event types with fields of every other shape (lists for objects,
    numbers for text, objects for lists, nulls), as a broken or hostile CLI could print them."""
    rng = random.Random(seed)
    kinds = ["system", "assistant", "user", "result", "text", "reasoning", "tool_use", "step_finish",
             "error", "init", "message", "tool_result", "thread.started", "turn.completed",
             "turn.failed", "item.started", "item.completed"]  # fmt: skip
    fields = ["subtype", "message", "content", "usage", "result", "part", "error", "data", "item",
              "tokens", "state", "modelUsage", "session_id", "sessionID", "is_error", "text", "role",
              "stats", "delta", "status", "usage_metadata"]  # fmt: skip
    shapes: list[Any] = [None, 1, -5, 3.5, True, "x", "", [], [1], {}, {"a": 1}, [{"type": "text"}]]
    lines = []
    for _ in range(count):
        event: dict[str, Any] = {"type": rng.choice(kinds)}
        for _ in range(rng.randint(1, 5)):
            field = rng.choice(fields)
            event[field] = rng.choice([*shapes, {rng.choice(fields): rng.choice(shapes)}])
        lines.append(json.dumps(event))
    return lines


@pytest.mark.parametrize("cli", sorted(RECORDED))
def test_lines_of_shapes_a_cli_never_writes_are_noise_and_its_answer_is_still_read(cli: str) -> None:
    folder = STREAMS / RECORDED[cli]
    answer = (folder / "answer.stdout").read_text(encoding="utf-8").splitlines()
    expected = parser_for(cli).feed_all(answer)
    odd = _odd_events(7, 3000)
    summary = parser_for(cli).feed_all([*odd, *answer])  # never raises
    assert expected.response and expected.response in summary.response
    assert summary.events + summary.noise == len(odd) + expected.events + expected.noise


#: Numbers Python's JSON parser takes that no count or cost can be: NaN, infinities, negatives.
NOT_NUMBERS = ("NaN", "Infinity", "-Infinity", "1e999", "-1e999", "-5", "-0.5")


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_gemini_counts_that_are_no_numbers_are_absent(value: str) -> None:
    lines = [
        '{"type":"init","session_id":"11111111-2222-3333-4444-555555555555","model":"m"}',
        '{"type":"message","role":"assistant","content":"hello","delta":true}',
        f'{{"type":"result","status":"success","stats":{{"total_tokens":{value},"input_tokens":{value},'
        '"output_tokens":5}}',
    ]
    summary = parser_for("gemini").feed_all(lines)
    assert summary.finished and summary.response == "hello" and summary.noise == 0
    assert (summary.tokens.input, summary.tokens.output, summary.tokens.total) == (0, 5, 0)


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_claude_cost_that_is_no_number_is_not_reported(value: str) -> None:
    line = (
        '{"type":"result","subtype":"success","is_error":false,"result":"hi","session_id":"s",'
        f'"total_cost_usd":{value},"usage":{{"input_tokens":{value},"output_tokens":2}}}}'
    )
    summary = parser_for("claude").feed_all([line])
    assert summary.finished and summary.response == "hi"
    assert summary.tokens.cost_usd is None and summary.tokens.input == 0 and summary.tokens.output == 2
    json.dumps(summary.tokens.to_json(), allow_nan=False)  # what the envelope and the log are made of


def test_opencode_cost_that_is_no_number_is_not_reported() -> None:
    line = (
        '{"type":"step_finish","part":{"type":"step-finish","reason":"stop","cost":NaN,'
        '"tokens":{"input":Infinity,"output":3,"reasoning":0,"cache":{"read":0,"write":0}}}}'
    )
    summary = parser_for("opencode").feed_all([line])
    assert summary.tokens.cost_usd is None and summary.tokens.input == 0 and summary.tokens.output == 3


def test_a_failure_message_shows_the_cli_s_escape_sequences_never_holds_them() -> None:
    failure = classify(1, "\x1b]0;PWNED\x07\x1b[2J\x1b[31mred\n", StreamSummary())
    assert failure is not None and failure.type is F.CRASH
    assert failure.message == "\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mred"
    said = StreamSummary(error="\x1b[31mquota\u202e exceeded")
    failure = classify(1, "", said)
    assert failure is not None and "\x1b" not in failure.message and "\u202e" not in failure.message


@pytest.mark.parametrize(
    ("stdout", "said"),
    [
        ("not json at all\n", "ending: not json at all"),
        ("Hello! \x1b[31mI am a wrapper\n[1, 2]\n", "ending: Hello! \\x1b[31mI am a wrapper | [1, 2]"),
        ("", "0 event(s)"),
        ('{"type":"init","session_id":"s","model":"m"}\n', "1 event(s)"),
    ],
)
def test_exit_0_without_an_answer_or_a_result_is_no_result(stdout: str, said: str) -> None:
    summary = parser_for("gemini").feed_all(stdout.splitlines())
    failure = classify(0, "", summary)
    assert failure is not None and failure.type is F.CRASH and failure.recoverable
    assert failure.message.startswith("no result from the CLI") and said in failure.message, failure.message


def test_exit_0_without_a_result_names_the_last_stderr_line() -> None:
    failure = classify(0, "starting\nwrapper: gave up\n\n", StreamSummary())
    assert failure is not None and failure.message.endswith("(stderr ends: wrapper: gave up)")


@pytest.mark.parametrize("cli", ["gemini", "claude", "codex", "opencode"])
@pytest.mark.parametrize("scenario", ["answer", "resume", "thinking", "tool"])
def test_every_recorded_answer_is_still_an_answer(cli: str, scenario: str) -> None:
    folder = STREAMS / RECORDED[cli]
    summary = parser_for(cli).feed_all((folder / f"{scenario}.stdout").read_text().splitlines())
    assert classify(0, (folder / f"{scenario}.stderr").read_text(), summary) is None
