"""Compactions as each CLI marks them in its transcript (adapters/<cli>/transcript.py), read from
transcripts the real CLIs wrote before and after their own compaction command
(scripts/record_transcripts.py --compact: claude /compact, gemini /compress, codex /compact)."""

from __future__ import annotations

from pathlib import Path

import pytest

from waaah_agent import adapters

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
PINNED = {"claude": "claude-2.1.332", "gemini": "gemini-0.61.0", "codex": "codex-0.171.0"}


def lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("cli", sorted(PINNED))
def test_one_compaction_is_found_and_none_before_it(cli: str) -> None:
    finder = adapters.registry()[cli].compactions
    assert finder is not None
    assert finder(lines(f"{PINNED[cli]}.jsonl")) == set()
    compacted = lines(f"{PINNED[cli]}.compacted.jsonl")
    found = finder(compacted)
    assert len(found) == 1, found
    # Read a piece at a time, the same one is found once: the keys tell it from a new one.
    half = len(compacted) // 2
    assert finder(compacted[:half]) | finder(compacted[half:]) == found


def test_gemini_s_message_list_set_again_is_not_a_new_compaction() -> None:
    """gemini writes its whole message list again after changes: the same acknowledgement id."""
    compacted = lines("gemini-0.61.0.compacted.jsonl")
    finder = adapters.registry()["gemini"].compactions
    assert finder is not None
    setting = next(x for x in compacted if "Got it. Thanks for the additional context!" in x)
    assert finder([*compacted, setting, setting]) == finder(compacted)


def test_opencode_s_transcript_is_not_read_for_compactions() -> None:
    assert adapters.registry()["opencode"].compactions is None
