"""queue.jsonl: the prompts of `waaah send` waiting, kept beside session.json, on a real file system."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from waaah_agent.runtime.store import SessionDir, SessionState
from waaah_agent.runtime.supervise.send_queue import COMPACT_SLACK, SendQueue, read_waiting


def test_adds_and_pops_keep_the_order_and_an_empty_queue_empties_the_file(tmp_path: Path) -> None:
    queue = SendQueue(tmp_path / "queue.jsonl")
    for text in ("one", "two 😀", "three"):
        queue.add(text)
    assert queue.pop() is False
    assert SendQueue(queue.path).texts() == ["two 😀", "three"]  # as a later supervisor reads it
    assert "😀".encode() in queue.path.read_bytes()  # UTF-8 as it is, not a 12-byte escape
    queue.pop()
    queue.pop()
    assert queue.path.stat().st_size == 0 and read_waiting(queue.path) == []


def test_typed_prompts_that_outweigh_those_waiting_are_rewritten_away(tmp_path: Path) -> None:
    queue = SendQueue(tmp_path / "queue.jsonl")
    big = "x" * 100_000
    for _ in range(30):
        queue.add(big)
    queue.add("last")
    for _ in range(30):
        queue.pop()
    assert queue.path.stat().st_size < COMPACT_SLACK + 200_000
    assert read_waiting(queue.path) == [(31, "last")]


def test_prompts_an_older_session_json_kept_are_typed_first_and_then_leave_it(tmp_path: Path) -> None:
    folder = SessionDir(tmp_path / "sessions", "s1")
    state = SessionState(id="s1", agent="a", workflow="w", workspace="/w", native_session_id="n")
    state.queued = ["old one", "old two"]
    (folder.path / "session.json").write_text(json.dumps(state.to_json()))
    folder.queue.add("new")  # written by a supervisor of this version before the restart
    again = SessionDir(tmp_path / "sessions", "s1")
    loaded = again.load()
    assert loaded.queued == ["old one", "old two", "new"]
    assert again.queue.pop() is True  # one of session.json's: the caller saves it
    again.save(loaded)
    assert json.loads((folder.path / "session.json").read_text())["queued"] == ["old two"]
    assert again.queue.pop() is True
    again.save(loaded)
    assert again.queue.pop() is False  # the queue file's own
    assert SessionDir(tmp_path / "sessions", "s1").load().queued == []


def test_a_fifo_in_place_of_the_queue_is_moved_aside_and_never_waited_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "queue.jsonl"
    os.mkfifo(path)
    queue = SendQueue(path)
    assert queue.texts() == []
    with caplog.at_level(logging.WARNING):
        queue.add("after")
    assert [r.message for r in caplog.records if "cannot be read" in r.message and "moved to" in r.message]
    assert list(tmp_path.glob("queue.jsonl.corrupt-*")) and read_waiting(path) == [(1, "after")]


def test_lines_that_are_not_the_queues_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "queue.jsonl"
    lines = [
        '{"add": 1, "text": "kept"}',
        "not json",
        "[" * 5000 + "]" * 5000,
        '{"add": 2, "text": ""}',
        '{"add": true, "text": "x"}',
        '{"add": 3, "text": "gone"}',
        '{"done": 3}',
        '{"add": 4, "text": "also kept"}',
    ]
    path.write_text("\n".join(lines) + "\n")
    assert read_waiting(path) == [(1, "kept"), (4, "also kept")]


def test_the_mark_of_the_inbox_s_sends_is_saved_in_session_json_before_the_queue_empties(
    tmp_path: Path,
) -> None:
    folder = SessionDir(tmp_path / "sessions", "s1")
    state = SessionState(id="s1", agent="a", workflow="w", workspace="/w", native_session_id="n")
    state.inbox_mark = [0.0, 0]
    folder.save(state)
    folder.queue.add("one", 5.5)
    folder.queue.add("two", 5.5)  # the same instant: the second of that ts
    assert json.loads(folder.queue.path.read_text().splitlines()[-1])["inbox"] == [5.5, 2]
    folder.queue.pop()
    folder.queue.pop()
    assert folder.queue.path.stat().st_size == 0
    assert json.loads(folder.state_file.read_text())["inbox_mark"] == [5.5, 2]
    again = SessionDir(tmp_path / "sessions", "s1")
    again.load()
    assert again.queue.mark == (5.5, 2)
