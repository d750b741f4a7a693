"""Stream parsers and error classes on the real headless streams of codex and opencode
(tests/fixtures/streams, recorded by scripts/record_streams_extra.py from the pinned CLIs against
tests/doubles/fake_openai.py: input 123 (7 of them cached), output 45, total 168 per model call)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.test_run_streams import RECORDED, STREAMS, failure_of, parser_for, recorded
from waaah_agent import adapters
from waaah_agent.core import failures as F
from waaah_agent.core.failures import classify
from waaah_agent.core.oneshot.streams import Tokens
from waaah_agent.runtime.oneshot import run_envelope

CLIS = ("codex", "opencode")
ANSWER = (123, 45, 7, 168)  # the fake's usage of one model call: input, output, cached, total


def numbers(tokens: Tokens) -> tuple[int, int, int, int]:
    return tokens.input, tokens.output, tokens.cached, tokens.total


@pytest.mark.parametrize("cli", CLIS)
def test_answer_has_session_response_and_the_fakes_tokens(cli: str) -> None:
    summary, code, _ = recorded(cli, "answer")
    assert code == 0 and summary.finished
    assert summary.response == "Hello from the fake model."
    assert numbers(summary.tokens) == ANSWER
    assert summary.tools.call_count == 0 and summary.tools.activity_class == "none"
    assert summary.error == "" and failure_of(cli, "answer") is None


def test_session_ids_are_the_clis_own() -> None:
    codex, _, _ = recorded("codex", "answer")
    opencode, _, _ = recorded("opencode", "answer")
    assert len(codex.session_id) == 36  # thread.started.thread_id, a UUIDv7
    assert opencode.session_id.startswith("ses_")


def test_neither_stream_names_the_model() -> None:
    # codex and opencode print no model name in their streams: the envelope falls back to --model.
    assert recorded("codex", "answer")[0].model == "" and recorded("opencode", "answer")[0].model == ""


def test_opencode_reports_cost_and_codex_does_not() -> None:
    assert recorded("opencode", "answer")[0].tokens.cost_usd == 0.0  # no prices in the config
    assert recorded("codex", "answer")[0].tokens.cost_usd is None


@pytest.mark.parametrize("cli", CLIS)
def test_tool_turn_counts_the_shell_call_and_keeps_the_final_answer(cli: str) -> None:
    summary, code, _ = recorded(cli, "tool")
    assert code == 0 and summary.finished
    assert summary.response == "The command printed: hi"
    assert summary.tools.call_count == 1 and summary.tools.error_count == 0
    assert summary.tools.tool_names == [{"codex": "command_execution", "opencode": "bash"}[cli]]
    assert summary.tools.activity_class == "shell"
    # Two model calls; codex sums its turn, opencode reports each step.
    assert numbers(summary.tokens) == (246, 90, 14, 336)


@pytest.mark.parametrize("cli", CLIS)
def test_resume_keeps_the_session_id(cli: str) -> None:
    first, _, _ = recorded(cli, "answer")
    again, code, _ = recorded(cli, "resume")
    assert code == 0 and again.session_id == first.session_id
    assert again.response == "Hello from the fake model."


def test_opencode_resume_reports_only_the_new_call() -> None:
    again, _, _ = recorded("opencode", "resume")
    assert numbers(again.tokens) == ANSWER and not again.tokens_cumulative


def test_codex_resume_reports_the_threads_running_total() -> None:
    """Limitation of the stream: codex's turn.completed usage is the thread's running total. The
    resumed run made one model call (123/45) but reports the thread's 246/90; nothing in the
    stream tells the earlier turns apart, so the parser keeps the total and flags it."""
    again, _, _ = recorded("codex", "resume")
    assert numbers(again.tokens) == (246, 90, 14, 336) and again.tokens_cumulative
    first, _, _ = recorded("codex", "answer")
    # `waaah run --session` takes off the total the log holds from the earlier run.
    assert numbers(again.tokens.since(first.tokens)) == ANSWER


def test_run_log_gives_the_earlier_session_total(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    lines = (STREAMS / RECORDED["codex"] / "answer.stdout").read_text(encoding="utf-8").splitlines()
    first = parser_for("codex").feed_all(lines)
    records = [{"record": "start"}] + [
        {"record": "event", "attempt": 1, "agent": "codex", "event": json.loads(line)} for line in lines
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    total = run_envelope.session_total(log, "codex", first.session_id)
    assert total is not None and numbers(total) == ANSWER
    assert run_envelope.session_total(log, "codex", "another-thread") is None
    assert run_envelope.session_total(log, "opencode", first.session_id) is None


@pytest.mark.parametrize(
    ("cli", "scenario", "kind", "recoverable"),
    [
        ("codex", "rate_limit", F.RATE_LIMIT, True),
        ("opencode", "rate_limit", F.RATE_LIMIT, True),
        ("codex", "auth", F.AUTH, True),
        ("opencode", "auth", F.AUTH, True),
        ("codex", "no_key", F.AUTH, True),
        ("opencode", "no_key", F.AUTH, True),
        ("codex", "bad_model", F.INVALID_MODEL, True),
        ("opencode", "bad_model", F.INVALID_MODEL, True),
        # A model missing from opencode's own config: only its ERROR log on stderr says so.
        ("opencode", "unknown_model", F.INVALID_MODEL, True),
        ("codex", "server_error", F.PROVIDER_ERROR, True),
        ("opencode", "server_error", F.PROVIDER_ERROR, True),
    ],
)
def test_recorded_failures_are_classified(cli: str, scenario: str, kind: str, recoverable: bool) -> None:
    # recoverable: the older wrappers' table (a retry or a fallback is appropriate), auth as
    # provider_error (another CLI has its own login)
    failure = failure_of(cli, scenario)
    assert failure is not None, f"{cli} {scenario} not seen as a failure"
    assert (failure.type, failure.recoverable) == (kind, recoverable), failure
    assert failure.message and "\n" not in failure.message
    summary, _, _ = recorded(cli, scenario)
    assert summary.response == "" and summary.finished


@pytest.mark.parametrize(
    ("scenario", "status"),
    [("rate_limit", 429), ("auth", 401), ("no_key", 401), ("bad_model", 404), ("server_error", 500)],
)
def test_opencode_names_the_http_status(scenario: str, status: int) -> None:
    summary, _, _ = recorded("opencode", scenario)
    assert summary.error_status == status and summary.error_kind == "APIError"


def test_codex_status_comes_from_its_message() -> None:
    assert recorded("codex", "rate_limit")[0].error_status == 429
    assert recorded("codex", "auth")[0].error_status == 401
    assert recorded("codex", "bad_model")[0].error_status is None


def test_codex_reconnects_are_retries_not_the_error() -> None:
    summary, _, _ = recorded("codex", "rate_limit")
    assert summary.retries == 5
    assert summary.error == "exceeded retry limit, last status: 429 Too Many Requests"


def test_codex_warning_item_is_not_an_error() -> None:
    # bad_model's first item is a warning ("Model metadata ... not found"); the failure is the turn's.
    summary, _, _ = recorded("codex", "bad_model")
    assert summary.error.startswith("The model `gpt-missing` does not exist")


def codex_lines(*events: dict[str, object]) -> list[str]:
    return [json.dumps(e) for e in events]


def test_codex_failed_command_counts_as_a_tool_error() -> None:
    started = {"id": "item_0", "type": "command_execution", "command": "false", "status": "in_progress"}
    done = dict(started, exit_code=1, status="failed")
    summary = parser_for("codex").feed_all(
        codex_lines(
            {"type": "item.started", "item": started},
            {"type": "item.completed", "item": done},
            {
                "type": "item.completed",
                "item": {"id": "item_1", "type": "agent_message", "text": "It failed."},
            },
        )
    )
    assert (summary.tools.call_count, summary.tools.error_count) == (1, 1)
    assert summary.response == "It failed."


def test_codex_answer_is_the_text_after_the_last_tool_call() -> None:
    summary = parser_for("codex").feed_all(
        codex_lines(
            {"type": "item.completed", "item": {"id": "a", "type": "agent_message", "text": "Let me look."}},
            {"type": "item.completed", "item": {"id": "b", "type": "file_change", "status": "completed"}},
        )
    )
    assert summary.response == "" and summary.tools.activity_class == "edit"


def test_opencode_rejected_tool_counts_as_a_tool_error() -> None:
    event = {
        "type": "tool_use",
        "sessionID": "ses_x",
        "part": {"tool": "bash", "state": {"status": "error", "error": "The user rejected permission"}},
    }
    summary = parser_for("opencode").feed_all([json.dumps(event)])
    assert (summary.tools.call_count, summary.tools.error_count) == (1, 1)


@pytest.mark.parametrize("cli", CLIS)
def test_the_models_own_words_about_rate_limits_are_not_an_error(cli: str) -> None:
    """The recorded answer with its text swapped for a model talking about rate limits."""
    text = "You hit a rate limit (429 Too Many Requests); quota exceeded, try again later."
    lines = []
    for line in (STREAMS / RECORDED[cli] / "answer.stdout").read_text(encoding="utf-8").splitlines():
        lines.append(line.replace("Hello from the fake model.", text))
    summary = parser_for(cli).feed_all(lines)
    assert summary.response == text and summary.error == ""
    assert classify(0, "", summary) is None


def test_codex_argv() -> None:
    headless = adapters.registry()["codex"].headless
    assert headless is not None
    assert headless.argv("hi", "", False, None) == ["exec", "--json", "--skip-git-repo-check", "hi"]
    assert headless.argv(None, "T1", True, "gpt-5.5") == [
        "exec",
        "resume",
        "--json",
        "--skip-git-repo-check",
        "--model",
        "gpt-5.5",
        "T1",
        "-",
    ]


def test_opencode_argv_takes_the_prompt_on_stdin() -> None:
    headless = adapters.registry()["opencode"].headless
    assert headless is not None and headless.stdin_prompt
    argv = headless.argv(None, "ses_1", True, "fake/gpt-fake")
    assert argv[:3] == ["run", "--format", "json"]
    assert argv[argv.index("--session") + 1] == "ses_1"
    assert argv[argv.index("--model") + 1] == "fake/gpt-fake"
    assert "--session" not in headless.argv(None, "", False, None)
