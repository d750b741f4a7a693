"""A CLI that rejects an argument `waaah run` passed it (after `--`) is invalid input, with its own
error line whole: on the recordings of each pinned CLI given ``--bogus`` (tests/fixtures/streams,
``unknown_option.*``, recorded by scripts/record_usage_errors.py)."""

from __future__ import annotations

import pytest

from tests.unit.test_run_streams import RECORDED, failure_of, recorded
from waaah_agent.core import failures as F
from waaah_agent.core.failures import classify
from waaah_agent.core.oneshot.streams import StreamSummary
from waaah_agent.errors import ExitCode, run_exit_code

#: What each CLI says; gemini prints its whole usage after the line (4 kB of stderr) and exits 1,
#: opencode prints only its usage.
EXPECTED = {
    "claude": "error: unknown option '--bogus'",
    "gemini": "Unknown argument: bogus",
    "codex": "error: unexpected argument '--bogus' found",
    "opencode": "the CLI rejected its arguments and printed its usage (opencode run [message..])",
}


@pytest.mark.parametrize("cli", sorted(RECORDED))
def test_an_unknown_option_is_invalid_input_with_the_clis_whole_line(cli: str) -> None:
    summary, code, _ = recorded(cli, "unknown_option")
    assert code not in (0, None) and summary.error == ""
    failure = failure_of(cli, "unknown_option")
    assert failure is not None
    assert (failure.type, failure.recoverable, failure.message) == (F.INVALID_INPUT, False, EXPECTED[cli])
    assert run_exit_code(failure.type) == ExitCode.USAGE == 2


def test_gemini_prints_more_than_the_tail_we_read_so_its_first_line_is_needed() -> None:
    _, _, stderr = recorded("gemini", "unknown_option")
    assert len(stderr) > 4000 and stderr.startswith("Unknown argument: bogus\n")


def test_a_long_stderr_is_read_in_whole_lines() -> None:
    # 9 characters over the limit: the old tail began "mething broke badly", a line cut in two.
    stderr = "Fatal: something broke badly\n" + "help line\n" * 398
    assert len(stderr) == 4009
    failure = classify(1, stderr, StreamSummary())
    assert failure is not None and failure.message == "help line"


def test_a_long_line_is_cut_at_a_word_not_in_one() -> None:
    line = "word " * 100
    failure = classify(1, line, StreamSummary())
    assert failure is not None and failure.message.endswith("word ...")
    assert len(failure.message) <= 304


@pytest.mark.parametrize("cli", sorted(RECORDED))
def test_a_supervised_cli_that_refuses_its_arguments_at_once_is_not_restarted(cli: str) -> None:
    """The same recordings, as the supervisor sees a CLI that exits before its first prompt."""
    from waaah_agent.core.failures import rejected_arguments
    from waaah_agent.core.supervise.events import Outcome, StopReason
    from waaah_agent.core.supervise.lifecycle import rejected_command_line

    _, code, stderr = recorded(cli, "unknown_option")
    lines = stderr.splitlines()

    class Exit:
        ok = False
        code = 1

    ended = Outcome(StopReason.AGENT_EXIT, Exit(), reached_prompt=False)
    said = rejected_command_line(ended, lines)
    assert said == rejected_arguments(stderr) and said is not None
    if cli != "opencode":  # it prints only its usage
        assert said == EXPECTED[cli]
    # After its prompt was shown, the same words are the agent's business, and a crash restarts.
    assert rejected_command_line(Outcome(StopReason.AGENT_EXIT, Exit(), reached_prompt=True), lines) is None
    assert (
        rejected_command_line(Outcome(StopReason.AGENT_EXIT, Exit(), reached_prompt=False), ["a crash"])
        is None
    )
