"""What is put back or set aside of a CLI's session files (core/kept_sessions.py), and whether
a file holds a conversation, read from files the real CLIs wrote (tests/fixtures/transcripts)."""

from __future__ import annotations

import json
from pathlib import Path

from waaah_agent.adapters.claude.transcript import claude_holds
from waaah_agent.adapters.codex.transcript import codex_holds
from waaah_agent.adapters.gemini.transcript import gemini_holds
from waaah_agent.core.kept_sessions import FileSeen, decide

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


def test_a_gemini_session_with_turns_holds_a_conversation():
    assert gemini_holds(lines("gemini-0.61.0.jsonl")) is True
    assert gemini_holds(lines("gemini-0.34.0.json")) is True  # one JSON document (0.34)


def test_gemini_s_file_of_a_start_holds_none():
    """What gemini writes at every start, --resume too: its header and the context it sets up."""
    head = lines("gemini-0.61.0.jsonl")[:2]
    assert json.loads(head[0])["sessionId"] and "<session_context>" in head[1]
    assert gemini_holds(head) is False
    assert gemini_holds(head[:1]) is False
    assert gemini_holds([]) is None and gemini_holds(["not json"]) is None


def test_a_set_of_messages_or_a_rewind_replaces_what_came_before():
    whole = lines("gemini-0.61.0.jsonl")
    first_user = next(json.loads(x) for x in whole if '"type":"user"' in x and "session_context" not in x)
    context_only = whole[1]
    assert gemini_holds([*whole, context_only]) is False  # a later $set of the start's context only
    assert gemini_holds([*whole, json.dumps({"$rewindTo": first_user["id"]})]) is False
    assert gemini_holds([*whole, json.dumps({"$rewindTo": "nowhere"})]) is False
    user = {"id": "u9", "type": "user", "content": [{"text": "/quit"}]}  # a slash command: none
    assert gemini_holds([*whole[:2], json.dumps(user)]) is False


def test_claude_and_codex_files():
    assert claude_holds(lines("claude-2.1.332.jsonl")) is True
    assert codex_holds(lines("codex-0.171.0.jsonl")) is True
    assert claude_holds(['{"type": "summary"}']) is False
    assert codex_holds(lines("codex-0.171.0.jsonl")[:1]) is False  # its session_meta alone


def test_put_back_what_was_removed_or_emptied():
    kept = {"a": FileSeen(100, True), "b": FileSeen(50, None), "c": FileSeen(10, False)}
    assert decide(kept, {}).restore == [("a", "removed"), ("b", "removed")]  # c held nothing
    assert decide(kept, {"a": FileSeen(0, None), "b": FileSeen(60, None)}).restore == [("a", "emptied")]
    plan = decide(kept, {"a": FileSeen(150, False), "b": FileSeen(50, None)})
    assert plan.restore == [("a", "its conversation emptied")]
    assert plan.set_aside == []  # "a" is being put back, not set aside
    assert not decide(kept, {"a": FileSeen(120, True), "b": FileSeen(50, None)})


def test_set_aside_a_file_without_conversation_beside_one_with_it():
    now = {"old": FileSeen(3000, True), "new": FileSeen(1100, False)}
    assert decide({}, now).set_aside == [("new", "holds no conversation beside the file that does")]
    assert decide({}, {"new": FileSeen(1100, False)}).set_aside == []  # alone: a fresh session
    assert decide({}, {"x": FileSeen(10, None), "new": FileSeen(1100, False)}).set_aside == []
    kept = {"old": FileSeen(3000, True)}
    plan = decide(kept, {"new": FileSeen(1100, False)})  # the real one removed: put back first
    assert plan.restore == [("old", "removed")] and plan.set_aside == [("new", plan.set_aside[0][1])]
