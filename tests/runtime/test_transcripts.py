"""Evidence from a CLI's transcript, read as a hostile file: missing, a FIFO, a device, huge, a symlink."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from waaah_agent.adapters.gemini.transcript import gemini_counter, gemini_usage
from waaah_agent.runtime.supervise.transcripts import TRANSCRIPT_CAP, holds_prompt, markers, usage_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "transcripts"

PROMPT = "# The orchestrator\nRegister with the WAAAH server first.\nThen call wait_for_prompt forever and serve.\n"


def test_markers_are_lines_a_json_transcript_stores_unescaped():
    assert markers(PROMPT) == [
        b"Register with the WAAAH server first.",
        b"Then call wait_for_prompt forever and serve.",
    ]
    assert markers('short\n"quoted lines are skipped because JSON escapes them"') == []


def test_a_json_lines_transcript_holding_the_prompt_or_not(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"role": "user", "text": PROMPT}) + "\n")
    assert holds_prompt(path, PROMPT) is True
    path.write_text(json.dumps({"role": "user", "text": "something else entirely, long enough"}) + "\n")
    assert holds_prompt(path, PROMPT) is False


def test_what_is_not_a_readable_regular_file_tells_nothing_and_never_blocks(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    started = time.monotonic()
    assert holds_prompt(fifo, PROMPT) is None
    assert holds_prompt(link, PROMPT) is None
    assert holds_prompt(tmp_path, PROMPT) is None  # a directory
    assert holds_prompt(tmp_path / "missing", PROMPT) is None
    assert holds_prompt(Path("/dev/zero"), PROMPT) is None
    assert time.monotonic() - started < 2
    assert holds_prompt(tmp_path / "missing", "no line here is long enough") is None


def test_a_huge_transcript_is_read_up_to_the_cap(tmp_path):
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as fh:
        fh.write(json.dumps({"text": PROMPT}).encode() + b"\n")
        fh.truncate(TRANSCRIPT_CAP * 2)  # sparse: a 64 MB file costs no disk
    started = time.monotonic()
    assert holds_prompt(path, PROMPT) is True
    assert time.monotonic() - started < 5


def test_token_totals_of_what_is_not_a_regular_file_fail_at_once_and_never_block(tmp_path):
    """The supervisor reads the transcript's totals on its slow timer: a FIFO in the CLI's
    session folder (or a link to one, a device, a folder) is an error it logs, never a hang."""
    fifo = tmp_path / "session-2026-11-25T20-48-73cb8297.jsonl"
    os.mkfifo(fifo)
    link = tmp_path / "link.jsonl"
    link.symlink_to(Path("/dev/zero"))
    started = time.monotonic()
    for path in (fifo, link, tmp_path):
        with pytest.raises(OSError):
            usage_of(path, gemini_counter())
    assert time.monotonic() - started < 2
    real = tmp_path / "real.jsonl"
    real.write_bytes((FIXTURES / "gemini-0.61.0.jsonl").read_bytes() + b"\xff\xfe not json\n")
    assert usage_of(real, gemini_counter()) == gemini_usage(
        (FIXTURES / "gemini-0.61.0.jsonl").read_text().splitlines()
    )
