"""Token usage from the CLIs' session files (waaah_agent.core.tokens).

The fixtures are real session files of the pinned CLIs, recorded offline by
scripts/record_transcripts.py: two turns (a text reply, then a wait_for_prompt tool call and a
text reply), i.e. three model calls, each reported by the fake model as 1200 input and 34 output
tokens with no cache use.
"""

from __future__ import annotations

import json
from pathlib import Path

from waaah_agent import adapters
from waaah_agent.adapters.claude.transcript import claude_counter, claude_usage
from waaah_agent.adapters.gemini.transcript import gemini_counter, gemini_usage
from waaah_agent.core.tokens import Usage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
CLAUDE = FIXTURES / "claude-2.1.332.jsonl"
GEMINI = FIXTURES / "gemini-0.61.0.jsonl"
CODEX = FIXTURES / "codex-0.171.0.jsonl"
# What scripts/record_transcripts.py set up (USAGE, MODEL_CALLS there).
INPUT_PER_CALL, OUTPUT_PER_CALL, MODEL_CALLS = 1200, 34, 3
EXPECTED = Usage(input=INPUT_PER_CALL * MODEL_CALLS, output=OUTPUT_PER_CALL * MODEL_CALLS, cached=0)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def claude_record(msg_id: str, inp: int, out: int, read: int = 0, created: int = 0) -> str:
    usage = {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": created,
    }
    message = {"id": msg_id, "role": "assistant", "content": [], "usage": usage}
    return json.dumps({"type": "assistant", "uuid": f"u-{msg_id}-{out}", "message": message})


def gemini_record(msg_id: str, **tokens: int) -> str:
    full = {"input": 0, "output": 0, "cached": 0, "thoughts": 0, "tool": 0, **tokens}
    full["total"] = full["input"] + full["output"] + full["thoughts"] + full["tool"]
    return json.dumps({"id": msg_id, "type": "gemini", "content": "", "tokens": full})


# ---- the real recordings ----------------------------------------------------------------------


def test_claude_fixture_totals() -> None:
    assert claude_usage(lines(CLAUDE)) == EXPECTED


def test_gemini_fixture_totals() -> None:
    # The tool-calling message is written twice (again once its tool call is attached).
    ids = [json.loads(line).get("id") for line in lines(GEMINI) if '"type":"gemini"' in line]
    assert len(ids) == MODEL_CALLS + 1 and len(set(ids)) == MODEL_CALLS
    assert gemini_usage(lines(GEMINI)) == EXPECTED


def test_fixtures_fed_line_by_line() -> None:
    for counter, path in ((claude_counter(), CLAUDE), (gemini_counter(), GEMINI)):
        totals = [counter.feed([line]) for line in lines(path)]
        assert totals[-1] == EXPECTED
        assert counter.messages == MODEL_CALLS
        # Totals only grow, one model call at a time.
        outputs = [t.output for t in totals]
        assert outputs == sorted(outputs)
        assert set(outputs) <= {0, 34, 68, 102}


def test_fixture_fed_twice_counts_once() -> None:
    counter = claude_counter()
    counter.feed(lines(CLAUDE))
    assert counter.feed(lines(CLAUDE)) == EXPECTED
    gem = gemini_counter()
    gem.feed(lines(GEMINI))
    assert gem.feed(lines(GEMINI)) == EXPECTED


# ---- the mapping --------------------------------------------------------------------------------


def test_claude_cache_tokens_count_as_input() -> None:
    usage = claude_usage([claude_record("msg_1", inp=10, out=5, read=1000, created=200)])
    assert usage == Usage(input=1210, output=5, cached=1000)


def test_claude_split_message_counts_once_latest_wins() -> None:
    # One API message written as one record per content block; the later one has the final count.
    records = [
        claude_record("msg_1", inp=100, out=1),
        claude_record("msg_1", inp=100, out=40),
        claude_record("msg_2", inp=150, out=7, read=100),
    ]
    assert claude_usage(records) == Usage(input=350, output=47, cached=100)


def test_claude_ignores_other_records() -> None:
    records = [
        json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}),
        json.dumps({"type": "assistant", "message": {"id": "m", "content": []}}),
        json.dumps({"type": "assistant", "message": "not a dict"}),
        json.dumps({"type": "system", "subtype": "turn_duration"}),
        json.dumps({"type": "result", "usage": {"input_tokens": 99, "output_tokens": 99}}),
    ]
    assert claude_usage(records) == Usage()


def test_claude_falls_back_to_request_id() -> None:
    record = {"type": "assistant", "requestId": "req_1", "message": {"usage": {"output_tokens": 3}}}
    assert claude_usage([json.dumps(record)] * 2) == Usage(output=3)


def test_gemini_mapping() -> None:
    usage = gemini_usage([gemini_record("a", input=1000, output=20, cached=600, thoughts=30, tool=5)])
    assert usage == Usage(input=1005, output=50, cached=600)


def test_gemini_rewritten_message_latest_wins() -> None:
    records = [gemini_record("a", input=10, output=1), gemini_record("a", input=10, output=4)]
    assert gemini_usage(records) == Usage(input=10, output=4)


def test_gemini_set_messages_and_resume() -> None:
    # A resumed session lists the earlier messages again in a $set record: not counted twice.
    first = json.loads(gemini_record("a", input=100, output=10))
    header = json.dumps({"sessionId": "s", "projectHash": "h", "startTime": "t", "kind": "main"})
    records = [
        header,
        json.dumps({"$set": {"messages": [{"id": "u", "type": "user", "content": []}, first]}}),
        gemini_record("a", input=100, output=10),
        json.dumps({"$set": {"lastUpdated": "2026-11-22T00:00:00Z"}}),
        json.dumps({"$rewindTo": "a"}),
        gemini_record("b", input=200, output=20),
    ]
    assert gemini_usage(records) == Usage(input=300, output=30)


def test_gemini_ignores_user_and_info_messages() -> None:
    records = [
        json.dumps({"id": "u", "type": "user", "content": [{"text": "hi"}], "tokens": {"input": 5}}),
        json.dumps({"id": "i", "type": "info", "content": "x"}),
        json.dumps({"id": "g", "type": "gemini", "content": "no tokens"}),
    ]
    assert gemini_usage(records) == Usage()


def test_malformed_lines_are_skipped() -> None:
    junk = ["", "   ", "not json", "[1, 2]", '"text"', "{", '{"type": "assistant"', "null"]
    bad_numbers = json.dumps(
        {"type": "assistant", "message": {"id": "m", "usage": {"input_tokens": "12", "output_tokens": True}}}
    )
    assert claude_usage([*junk, bad_numbers, claude_record("ok", 1, 2)]) == Usage(input=1, output=2)
    bad_tokens = json.dumps({"id": "x", "type": "gemini", "tokens": {"input": -5, "output": None}})
    assert gemini_usage([*junk, bad_tokens, gemini_record("ok", input=3, output=4)]) == Usage(3, 4)


def test_usage_add() -> None:
    assert Usage(1, 2, 3) + Usage(10, 20, 30) == Usage(11, 22, 33)
    assert sum([Usage(1, 1, 0)] * 3, Usage()) == Usage(3, 3, 0)


def test_counter_incremental_across_calls() -> None:
    counter = claude_counter()
    assert counter.feed([claude_record("m1", 100, 1)]) == Usage(100, 1, 0)
    assert counter.feed([claude_record("m1", 100, 30), claude_record("m2", 50, 5)]) == Usage(150, 35, 0)
    assert counter.feed([]) == Usage(150, 35, 0)
    assert counter.total == Usage(150, 35, 0)
    assert counter.messages == 2


def test_each_adapter_counts_its_own_transcript_format() -> None:
    known = adapters.registry()
    for name, path in (("claude", CLAUDE), ("gemini", GEMINI), ("codex", CODEX)):
        factory = known[name].tokens
        assert factory is not None
        assert factory().feed(lines(path)) == EXPECTED
    assert all(known[n].tokens is None for n in ("opencode", "simulated"))  # no made-up numbers


def test_gemini_0_34_session_document_totals() -> None:
    """gemini 0.34.0 keeps its session as one pretty-printed JSON document, rewritten whole."""
    document = FIXTURES / "gemini-0.34.0.json"
    assert lines(document)[0] == "{"
    assert gemini_usage(lines(document)) == EXPECTED
    assert gemini_usage(document.read_text(encoding="utf-8").splitlines(keepends=True)) == EXPECTED
    assert gemini_usage(lines(document)[:-3]) == Usage()  # cut short: no numbers, no error


def test_gemini_s_transcript_is_the_session_s_first_file_not_the_stub_of_a_later_start() -> None:
    """Every start of gemini (a resume too) opens a header-only file named for its minute; the
    resume goes on in the first one (an old .json carried on as .jsonl beside it). Its backups and
    temporary files, and other sessions' files, are never the transcript."""
    from waaah_agent.adapters.gemini import pick_transcript

    sid = "73cb8297-1111-4222-8333-444455556666"
    names = [
        "session-2026-11-25T20-49-73cb8297.jsonl",  # the resume's stub
        "session-2026-11-25T20-48-73cb8297.json",  # 0.34's document
        "session-2026-11-25T20-48-73cb8297.jsonl",  # ... carried on by a later release
        "session-2026-11-25T20-47-73cb8297.jsonl.unreadable-1764103000000",
        "session-2026-11-25T20-47-73cb8297.jsonl.tmp-4242",
        "session-2026-11-25T20-40-0000aaaa.jsonl",  # another session
    ]
    assert pick_transcript(names, sid) == "session-2026-11-25T20-48-73cb8297.jsonl"
    assert pick_transcript(names[:2], sid) == "session-2026-11-25T20-48-73cb8297.json"
    assert pick_transcript(names[3:5], sid) is None
    assert pick_transcript([], sid) is None


def test_a_gemini_json_conversation_carried_on_as_jsonl_counts_once() -> None:
    """Resumed by a later gemini, a 0.34 ``.json`` conversation goes on whole in a ``.jsonl``
    file beside it: the new file's totals replace the old one's (per model too), never add."""
    from waaah_agent.core.tokens import file_totals, model_totals, record_file, record_models

    old = "/h/.gemini/tmp/p/chats/session-2026-11-25T20-48-73cb8297.json"
    files = record_file({"/other.jsonl": {"input": 1, "output": 1, "cached": 0}}, old, Usage(100, 10, 0))
    files = record_file(files, old + "l", Usage(150, 15, 0))
    assert file_totals(files) == {"input": 151, "output": 16, "cached": 0}
    assert set(files) == {"/other.jsonl", old + "l"}
    models = record_models({}, old, {"g": {"input": 100, "output": 10, "cached": 0}})
    models = record_models(models, old + "l", {"g": {"input": 150, "output": 15, "cached": 0}})
    assert model_totals(models) == {"g": {"input": 150, "output": 15, "cached": 0}}
