"""Token totals accumulate across resumes and restarts, each transcript file counted once."""

from __future__ import annotations

from pathlib import Path

from waaah_agent.adapters.claude.transcript import claude_usage
from waaah_agent.adapters.gemini.transcript import gemini_usage
from waaah_agent.runtime.store import SessionDir, SessionState
from waaah_agent.runtime.supervise.session.run import tally_tokens

FIXTURES = Path(__file__).parent.parent / "fixtures" / "transcripts"


def fresh() -> SessionState:
    return SessionState(id="s", agent="claude", workflow="w", workspace="/w", native_session_id="n")


def lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines(keepends=True)


def test_a_resumed_conversation_in_the_same_file_is_not_counted_twice() -> None:
    whole = lines("claude-2.1.332.jsonl")
    state = fresh()
    tally_tokens(state, "/t/a.jsonl", claude_usage(whole[: len(whole) // 2]))  # the first run
    tally_tokens(state, "/t/a.jsonl", claude_usage(whole))  # resumed: the same file, grown
    full = claude_usage(whole)
    assert state.tokens == {"input": full.input, "output": full.output, "cached": full.cached}
    assert full.output > 0


def test_a_new_transcript_file_adds_and_a_missing_read_keeps_the_totals() -> None:
    gemini = gemini_usage(lines("gemini-0.61.0.jsonl"))
    state = fresh()
    tally_tokens(state, "/g/session-1.jsonl", gemini)
    before = dict(state.tokens)
    # The CLI crashed and started over in a file of its own, with nothing in it yet: before,
    # the totals became the new file's (0/0).
    tally_tokens(state, "/g/session-2.jsonl", gemini_usage(['{"sessionId": "x"}\n']))
    assert state.tokens == before
    tally_tokens(state, "/g/session-2.jsonl", gemini)
    assert state.tokens["output"] == 2 * gemini.output
    assert set(state.token_files) == {"/g/session-1.jsonl", "/g/session-2.jsonl"}


def test_a_file_that_shrank_never_takes_tokens_back() -> None:
    whole = lines("claude-2.1.332.jsonl")
    state = fresh()
    tally_tokens(state, "/t/a.jsonl", claude_usage(whole))
    tally_tokens(state, "/t/a.jsonl", claude_usage(whole[:2]))
    assert state.tokens["output"] == claude_usage(whole).output


def test_totals_saved_by_an_earlier_supervisor_survive_its_resume(tmp_path: Path) -> None:
    session = SessionDir(tmp_path, "s")
    state = fresh()
    tally_tokens(state, "/t/a.jsonl", claude_usage(lines("claude-2.1.332.jsonl")))
    session.save(state)
    again = session.load()  # a new supervisor (--resume): the per-file totals come back
    tally_tokens(again, "/t/b.jsonl", claude_usage([]))
    assert again.tokens == state.tokens and again.token_files["/t/a.jsonl"] == state.tokens


def test_totals_from_before_the_per_file_record_are_kept() -> None:
    state = fresh()
    state.tokens = {"input": 3600, "output": 102, "cached": 0}
    tally_tokens(state, "/t/a.jsonl", claude_usage([]))
    assert state.tokens == {"input": 3600, "output": 102, "cached": 0}
