"""The envelope fields under the older wrappers' names (core/outputs.py), on the recorded real
streams (tests/fixtures/streams), and the error classes quota, provider_error and unknown."""

from __future__ import annotations

import pytest

from tests.unit.test_run_streams import RECORDED, STREAMS, failure_of, recorded
from waaah_agent.adapters import registry
from waaah_agent.adapters.claude.transcript import claude_thinking
from waaah_agent.adapters.gemini.transcript import gemini_thoughts
from waaah_agent.core import failures as F
from waaah_agent.core.failures import Failure, classify
from waaah_agent.core.oneshot import models, outputs, present
from waaah_agent.core.oneshot.resilience import RetryConfig, default_chain, max_attempts, next_step
from waaah_agent.core.oneshot.streams import StreamSummary, Tokens, ToolActivity
from waaah_agent.errors import ExitCode, run_exit_code

ALL = tuple(RECORDED)


@pytest.mark.parametrize("cli", ALL)
def test_tokens_used_names_the_same_figures_as_tokens_every_one_a_number(cli: str) -> None:
    summary, _, _ = recorded(cli, "tool")
    used = outputs.tokens_used(summary.tokens, summary.response)
    plain = summary.tokens.to_json()
    assert list(used) == [
        "input_tokens",
        "output_tokens",
        "estimated_output_tokens",
        "total_tokens",
        "cost_usd",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ]
    assert (used["input_tokens"], used["output_tokens"], used["total_tokens"]) == (
        plain["input"],
        plain["output"],
        plain["total"],
    )
    assert used["cache_read_input_tokens"] == plain["cached"]
    assert used["cost_usd"] == plain.get("cost_usd", 0.0) and isinstance(used["cost_usd"], float)
    # Only gemini's stream says nothing of cache writes: 0 then, as the older wrappers gave it.
    assert used["cache_creation_input_tokens"] == (summary.tokens.cache_write or 0)
    assert all(isinstance(v, (int, float)) and v is not None for v in used.values())
    assert "cache_write" not in plain  # `tokens` keeps its shape


def test_estimated_output_tokens_come_from_the_answer_s_characters() -> None:
    assert outputs.estimated_output_tokens("") == 0
    assert outputs.estimated_output_tokens("ok") == 1  # any answer is at least one token
    assert outputs.estimated_output_tokens("x" * 1700) == 425
    # The CLI's real count does not change the estimate: the two are reported side by side.
    used = outputs.tokens_used(Tokens(1200, 450, 800, 1650, 0.012, 0), "x" * 1700)
    assert (used["output_tokens"], used["estimated_output_tokens"]) == (450, 425)


def test_claude_cache_creation_and_codex_cached_reads_come_from_their_usage() -> None:
    assert recorded("claude", "answer")[0].tokens.cache_write == 0
    assert recorded("codex", "answer")[0].tokens.cached == 7  # cached_input_tokens
    assert recorded("opencode", "answer")[0].tokens.cached == 7  # cache.read


def test_cache_writes_add_up_and_unknown_stays_unknown() -> None:
    assert (Tokens(1, 1, 0, 2, None, 5) + Tokens(1, 1, 0, 2, None, 3)).cache_write == 8
    assert (Tokens(1, 1, 0, 2) + Tokens(1, 1, 0, 2)).cache_write is None
    assert (Tokens(1, 1, 0, 2, None, None) + Tokens(1, 1, 0, 2, None, 4)).cache_write == 4
    assert Tokens(5, 5, 0, 10, None, 9).since(Tokens(2, 2, 0, 4, None, 4)).cache_write == 5


@pytest.mark.parametrize("cli", ALL)
def test_no_tool_no_tool_activity_and_the_four_flags_always(cli: str) -> None:
    summary, _, _ = recorded(cli, "answer")
    assert outputs.tool_metadata(summary.tools) is None
    envelope: dict[str, object] = {"response": summary.response}
    outputs.add_fields(envelope, summary.tokens, summary.tools, summary.reasoning, "stream", cli)
    assert envelope["metadata"] == {
        "token_usage_available": True,
        "reasoning_available": False,
        "reasoning_source": "none",
        "reasoning_absent_reason": "model_not_emitted",
    }
    assert envelope["reasoning"] == "" and "reasoning_source" not in envelope


def test_an_error_has_the_fixed_metadata_zero_tokens_and_one_of_the_eight_types() -> None:
    envelope: dict[str, object] = {"response": "partial", "reasoning_source": "stream"}
    outputs.add_error(envelope, F.AUTH, "not logged in", 6)
    assert envelope["metadata"] == outputs.ERROR_METADATA
    assert envelope["response"] == envelope["reasoning"] == "" and "reasoning_source" not in envelope
    assert set(envelope["tokens_used"].values()) == {0}  # type: ignore[attr-defined]
    assert (envelope["error_type"], envelope["error_kind"], envelope["recoverable"]) == (
        "provider_error",
        "auth",
        True,
    )


@pytest.mark.parametrize(
    ("kind", "legacy", "recoverable"),
    [
        (F.TIMEOUT, "timeout", True),
        (F.QUOTA, "quota", True),
        (F.RATE_LIMIT, "rate_limit", True),
        (F.INVALID_MODEL, "invalid_model", True),
        (F.INVALID_SESSION, "invalid_session", True),
        (F.INVALID_INPUT, "invalid_input", False),
        (F.PROVIDER_ERROR, "provider_error", True),
        (F.UNKNOWN, "unknown", False),
        (F.AUTH, "provider_error", True),
        (F.CRASH, "provider_error", True),
        (F.TRANSIENT, "provider_error", True),
        (F.INTERRUPTED, "unknown", False),
        (F.BUDGET, "unknown", False),
    ],
)
def test_each_precise_type_maps_to_one_of_the_eight(
    kind: F.ErrorType, legacy: str, recoverable: bool
) -> None:
    assert F.legacy_type(kind) == legacy and legacy in F.LEGACY_TYPES
    assert F.is_recoverable(kind) is recoverable and F.RECOVERABLE[kind] is recoverable


def test_every_precise_type_is_mapped() -> None:
    assert {F.legacy_type(k) for k in F.ErrorType} == set(F.LEGACY_TYPES)


def test_stderr_keeps_the_last_lines_without_control_sequences() -> None:
    text = "".join(f"line {n}\n" for n in range(50)) + "\x1b[31mred\x1b[0m \x07bell\n\n   \n"
    tail = outputs.stderr_tail(text)
    assert tail.splitlines()[-1] == "red bell" and len(tail.splitlines()) == outputs.STDERR_LINES
    assert tail.splitlines()[0] == "line 31" and "\x1b" not in tail and "\x07" not in tail
    assert len(outputs.stderr_tail("x" * 5000)) == outputs.STDERR_LINE_CAP


@pytest.mark.parametrize(
    ("cli", "name", "kind"),
    [
        ("gemini", "waaah.wait_for_prompt", "other"),
        ("claude", "waaah.wait_for_prompt", "other"),
        ("codex", "command_execution", "shell"),
        ("opencode", "bash", "shell"),
    ],
)
def test_tool_metadata_of_a_recorded_tool_turn(cli: str, name: str, kind: str) -> None:
    summary, _, _ = recorded(cli, "tool")
    meta = outputs.tool_metadata(summary.tools, cli)
    assert meta == {
        "call_count": 1,
        "write_count": 0,
        "error_count": 0,
        "tool_names": [name],
        "result_classes": [kind],
        "activity_class": "tool_active",
        "source": f"wrapper:{cli}",
        "class_counts": {kind: 1},
    }


def test_tool_classes_and_activity_classes() -> None:
    tools = ToolActivity()
    for name in ("Write", "Edit", "Read", "mcp__playwright__browser_navigate", "WebFetch", "Bash", "x"):
        tools.called(name)
    tools.called("Write")
    meta = outputs.tool_metadata(tools)
    assert meta is not None
    assert meta["call_count"] == 8 and meta["write_count"] == 3
    assert meta["result_classes"] == ["write", "read", "browser", "web", "shell", "other"]  # each once
    assert meta["class_counts"] == {"write": 3, "read": 1, "browser": 1, "web": 1, "shell": 1, "other": 1}
    assert meta["activity_class"] == "write_active"
    assert "playwright.browser_navigate" in meta["tool_names"] and meta["tool_names"].count("Write") == 1
    tools.error_count = 1
    assert outputs.tool_metadata(tools)["activity_class"] == "tool_errors"  # type: ignore[index]
    assert outputs.tool_class("mcp__fs__write_file") == "write"
    assert outputs.compact_tool_name("mcp__github__create_issue") == "github.create_issue"
    assert outputs.compact_tool_name("read_file") == "read_file"
    # gemini's own names, read as gemini reads them back (the server up to the first "_").
    assert outputs.compact_tool_name("mcp_github_create_issue") == "github.create_issue"
    assert outputs.tool_class("mcp_fs_write_file") == "write"
    assert outputs.compact_tool_name("mcp_tool") == "mcp_tool"


def test_reasoning_is_collapsed_and_capped() -> None:
    assert outputs.compact_reasoning("  first\n\n  second\tthird ") == "first second third"
    long = outputs.compact_reasoning("word " * 500)
    assert len(long) == outputs.REASONING_CAP and long.endswith("...")
    envelope: dict[str, object] = {"response": "x"}
    outputs.add_fields(envelope, Tokens(), ToolActivity(), "I  should\nlook", "stream")
    assert envelope["reasoning"] == "I should look" and envelope["reasoning_source"] == "stream"
    assert envelope["metadata"]["reasoning_source"] == "raw_output"  # type: ignore[index]
    assert envelope["metadata"]["reasoning_absent_reason"] == "available"  # type: ignore[index]
    assert envelope["metadata"]["token_usage_available"] is False  # type: ignore[index]


@pytest.mark.parametrize(
    ("answer", "stripped"),
    [
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ("```\nplain\nlines\n```\n", "plain\nlines"),
        ("  ```python\nprint(1)\n```  ", "print(1)"),
        ("Here:\n```\nx\n```", "Here:\n```\nx\n```"),  # text around the fence: as it is
        ("```a\n1\n```\nand\n```b\n2\n```", "```a\n1\n```\nand\n```b\n2\n```"),  # two fences
        ("no fence", "no fence"),
        ("```", "```"),
    ],
)
def test_a_fenced_answer_loses_its_fence(answer: str, stripped: str) -> None:
    assert outputs.strip_fence(answer) == stripped


@pytest.mark.parametrize(
    "message",
    [
        # gemini (TerminalQuotaError), claude, codex, the OpenAI API, as their bundles word them
        "[API Error: You have exhausted your daily quota on this model.]",
        "You've hit your usage limit · resets 9pm (UTC)",
        "You've hit your weekly limit",
        "You've hit your session limit · resets 3am",
        "You're out of usage credits. See Usage in Settings",
        "You've hit your usage limit. Upgrade to Pro or try again later.",
        "insufficient_quota: You exceeded your current quota, please check your plan",
    ],
)
def test_a_spent_quota_is_quota_not_rate_limit(message: str) -> None:
    failure = classify(1, "", StreamSummary(error=message, error_status=429))
    assert failure is not None and failure.type == F.QUOTA and failure.recoverable
    assert run_exit_code(F.QUOTA) == ExitCode.QUOTA == 18


def test_recorded_gemini_daily_quota_is_quota_and_short_limits_stay_rate_limits() -> None:
    assert failure_of("gemini", "rate_limit").type == F.QUOTA  # type: ignore[union-attr]
    for cli in ("claude", "codex", "opencode"):
        assert failure_of(cli, "rate_limit").type == F.RATE_LIMIT  # type: ignore[union-attr]


@pytest.mark.parametrize("cli", ("claude", "codex", "opencode"))
def test_recorded_server_errors_are_provider_errors(cli: str) -> None:
    failure = failure_of(cli, "server_error")
    assert failure is not None and failure.type == F.PROVIDER_ERROR
    assert run_exit_code(F.PROVIDER_ERROR) == 19


def test_network_errors_stay_transient_and_unexplained_errors_are_unknown() -> None:
    net = classify(1, "Error: fetch failed (ECONNREFUSED 127.0.0.1:9)", StreamSummary())
    assert net is not None and net.type == F.TRANSIENT
    odd = classify(1, "", StreamSummary(error="something odd happened"))
    assert odd is not None and odd.type == F.UNKNOWN and not odd.recoverable  # the older table
    assert run_exit_code(F.UNKNOWN) == 20
    silent = classify(1, "", StreamSummary())
    assert silent is not None and silent.type == F.CRASH


def test_what_the_run_does_with_each_new_class() -> None:
    def step(kind: F.ErrorType, retries: int = 0, has_next: bool = True) -> str:
        return next_step(Failure(kind, "m", True, 1), retries, 100.0, has_next, 0.0, 0.5).action

    assert step(F.PROVIDER_ERROR) == "retry" and step(F.PROVIDER_ERROR, retries=2) == "fallback"
    assert step(F.QUOTA) == "fallback" and step(F.QUOTA, has_next=False) == "stop"
    assert step(F.UNKNOWN) == "fallback"


def test_claude_s_recorded_thinking_block_is_the_reasoning() -> None:
    summary, code, _ = recorded("claude", "thinking")
    assert code == 0 and summary.response == "Hello from the fake model."
    assert summary.reasoning == "The user asks for a greeting.\n\nA short, friendly one will do."
    envelope: dict[str, object] = {"response": summary.response}
    outputs.add_fields(envelope, summary.tokens, summary.tools, summary.reasoning, "stream")
    assert envelope["reasoning"] == "The user asks for a greeting. A short, friendly one will do."
    assert envelope["reasoning_source"] == "stream"


def test_gemini_s_stream_drops_the_thoughts_the_model_sent() -> None:
    summary, code, _ = recorded("gemini", "thinking")
    assert code == 0 and summary.response == "Hello from the fake model."
    assert summary.reasoning == ""  # the fake sent thought parts; stream-json has no event for them


@pytest.mark.parametrize("cli", ("codex", "opencode"))
def test_codex_and_opencode_recorded_reasoning_is_the_reasoning(cli: str) -> None:
    summary, code, _ = recorded(cli, "thinking")
    assert code == 0 and summary.response == "Hello from the fake model."
    assert summary.reasoning == "The user asks for a greeting.\n\nA short one will do."
    assert summary.tools.call_count == 0  # a reasoning item is not a tool call


@pytest.mark.parametrize(
    ("cli", "thought"),
    [
        # gemini splits a thought into a subject and a description; the fake's has no subject
        ("gemini", "The user asks for a greeting.\n\nA short, friendly one will do."),
        ("claude", "The user asks for a greeting.\n\nA short, friendly one will do."),
    ],
)
def test_recorded_session_files_hold_the_last_turn_s_thinking(cli: str, thought: str) -> None:
    lines = (STREAMS / RECORDED[cli] / "thinking.session.jsonl").read_text(encoding="utf-8").splitlines()
    reasoning = registry()[cli].reasoning
    assert reasoning is not None and reasoning(lines) == thought
    assert (
        registry()["codex"].reasoning is None and registry()["opencode"].reasoning is None
    )  # from the stream


def test_session_reasoning_takes_the_last_turn_only_and_survives_junk() -> None:
    gemini = [
        '{"id": "u1", "type": "user", "content": [{"text": "first"}]}',
        '{"id": "g1", "type": "gemini", "content": "a", "thoughts": [{"subject": "Old", "description": "x"}]}',
        "not json",
        "[1, 2]",
        '{"id": "u2", "type": "user", "content": [{"text": "second"}]}',
        '{"id": "g2", "type": "gemini", "content": "", "thoughts": [{"subject": "Plan", "description": "y"}]}',
        '{"id": "g2", "type": "gemini", "content": "b", "thoughts": [{"subject": "Plan", "description": "z"}]}',
        '{"id": "g3", "type": "gemini", "content": "c", "thoughts": "not a list"}',
    ]
    assert gemini_thoughts(gemini) == "Plan: z"
    claude = [
        '{"type": "user", "message": {"role": "user", "content": "first"}}',
        '{"type": "assistant", "message": {"content": [{"type": "thinking", "thinking": "old"}]}}',
        '{"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "again"}]}}',
        '{"type": "assistant", "message": {"content": [{"type": "thinking", "thinking": "one"}]}}',
        '{"type": "user", "message": {"content": [{"type": "tool_result", "content": "ok"}]}}',
        '{"type": "assistant", "message": {"content": [{"type": "thinking", "thinking": "two"}]}}',
        '{"type": "assistant", "message": "junk"}',
    ]
    assert claude_thinking(claude) == "one\ntwo"


def test_gemini_s_capacity_errors_as_now_classified_still_get_the_smaller_model() -> None:
    default = models.Resolution("", None, "nothing configured")
    text = "[API Error: No capacity available for model gemini-2.5-pro on the server]"
    for failure in (
        classify(173, "", StreamSummary(error=text)),  # gemini-cli's own exit code: unknown
        classify(1, "", StreamSummary(error=text, error_status=503)),  # provider_error
    ):
        assert failure is not None and failure.type in (F.UNKNOWN, F.PROVIDER_ERROR)
        got = models.retry_model(
            registry()["gemini"].smaller_model, default, failure, text, "gemini-2.5-pro", False
        )
        assert got is not None and got.model == "gemini-2.5-flash", failure


def test_the_default_chain_is_the_other_usable_clis_in_order() -> None:
    usable = {"gemini": True, "claude": True, "codex": True, "opencode": True}
    assert default_chain("claude", usable) == ["gemini", "codex"]  # opencode only when named
    assert default_chain("opencode", usable) == ["gemini", "claude", "codex"]
    assert default_chain("gemini", {**usable, "claude": False}) == ["codex"]
    assert default_chain("gemini", {}) == []


def test_max_attempts_counts_every_cli_process_a_chain_may_start() -> None:
    assert max_attempts(1) == 4 and max_attempts(3) == 12  # first, model retry, two retries each
    assert max_attempts(2, RetryConfig(transient_retries=0, rate_limit_retries=0)) == 4
    assert max_attempts(0) == 0


def test_llm_answers_are_cut_by_lines_as_well_as_characters() -> None:
    saved: list[str] = []

    def save(text: str) -> str:
        saved.append(text)
        return "/runs/x.txt"

    rows = "\n".join(f"row {n}" for n in range(500))
    shown = present.llm_text({"response": rows, "exit_code": 0}, "", save).splitlines()
    assert shown[:133] == rows.splitlines()[:133] and shown[134:201] == rows.splitlines()[433:]
    assert shown[133] == "[... 2,400 characters (300 lines) cut; full output: /runs/x.txt ...]"
    assert saved == [rows]
    few = present.llm_text({"response": rows, "exit_code": 0}, "", save, max_lines=3).splitlines()
    assert few[:2] == ["row 0", "row 1"] and few[3] == "row 499" and "(497 lines) cut" in few[2]
    assert present.cut_answer(rows, 6000, 3000, 500) is None  # 500 lines fit in 500
    # Few lines but many characters: cut by characters, as before.
    wide = "x" * 20_000
    head, tail, chars, lines = present.cut_answer(wide, 6000, 3000, 200) or ("", "", 0, 0)
    assert (len(head), len(tail), chars, lines) == (6000, 3000, 11_000, 0)


def test_llm_text_says_the_warnings_and_the_precise_error() -> None:
    envelope = {"response": "", "warnings": ["the context file a.md was cut"], "exit_code": 6}
    envelope.update(error="Not logged in", error_type="provider_error", error_kind="auth")
    lines = present.llm_text(envelope, "login first\n", lambda text: "").splitlines()
    assert lines[:2] == [
        "[warning: the context file a.md was cut]",
        "[error: provider_error (auth): Not logged in]",
    ]
    assert lines[-1] == "[exit:6 | 0.0s]" and "login first" in lines


def test_llm_text_shows_escape_sequences_from_the_cli_as_text() -> None:
    envelope = {"response": "", "exit_code": 15, "warnings": ["skipped \x1b[2J"]}
    envelope.update(error="\x1b]0;PWNED\x07red", error_type="provider_error", error_kind="crash")
    text = present.llm_text(envelope, "\x1b[31mred\nline two\n", lambda text: "")
    assert "\x1b" not in text and "\x07" not in text
    assert "[error: provider_error (crash): \\x1b]0;PWNED\\x07red]" in text
    assert "[stderr]\n\\x1b[31mred\nline two" in text  # its lines kept
