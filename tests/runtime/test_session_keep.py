"""The keeper of a CLI's own session files (runtime/session_keep.py) over files gemini wrote
(tests/fixtures/transcripts), changed as gemini 0.61.0 changes them (tests/e2e/test_gemini_sessions.py
shows it doing so): the file removed, its conversation reset, a start's file left beside it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from waaah_agent import adapters
from waaah_agent.runtime.session_keep import keeper_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "gemini-0.61.0.jsonl"
SID = "1dbd2ee3-0000-4000-8000-000000000000"


class Record:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.events: list[dict[str, Any]] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def event(self, name: str, **fields: Any) -> None:
        self.events.append({"event": name, **fields})


def setup(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    chats = tmp_path / "home" / ".gemini" / "tmp" / "ws" / "chats"
    chats.mkdir(parents=True)
    real = chats / f"session-2026-11-26T12-21-{SID[:8]}.jsonl"
    real.write_bytes(FIXTURE.read_bytes())
    return real, {"HOME": str(tmp_path / "home")}, tmp_path / "kept"


def keeper(tmp_path: Path, env: dict[str, str], folder: Path, record: Record):
    gemini = adapters.registry()["gemini"]
    return keeper_for(gemini, env, tmp_path / "ws", SID, folder, record.note, record.event)


def test_a_removed_session_file_is_put_back(tmp_path):
    real, env, folder = setup(tmp_path)
    record = Record()
    kept = keeper(tmp_path, env, folder, record)
    assert kept is not None and (folder / real.name).read_bytes() == FIXTURE.read_bytes()
    assert oct((folder / real.name).stat().st_mode & 0o777) == "0o600"
    real.unlink()  # gemini's exit clean-up, when the resume began in the session's own minute
    plan = kept.after()
    assert plan.restore == [(str(real), "removed")]
    assert real.read_bytes() == FIXTURE.read_bytes()
    assert "gemini removed its session file" in record.notes[-1]
    assert record.events[-1]["event"] == "session-restored" and record.events[-1]["ok"] is True


def test_a_reset_conversation_is_put_back_and_gemini_s_version_set_aside(tmp_path):
    real, env, folder = setup(tmp_path)
    record = Record()
    kept = keeper(tmp_path, env, folder, record)
    context_only = FIXTURE.read_text(encoding="utf-8").splitlines()[1]
    with real.open("a", encoding="utf-8") as fh:  # a $set of the start's context only
        fh.write(context_only + "\n")
    plan = kept.after()
    assert plan.restore == [(str(real), "its conversation emptied")]
    assert real.read_bytes() == FIXTURE.read_bytes()
    (aside,) = (folder / "set-aside").iterdir()
    assert aside.read_text(encoding="utf-8").endswith(context_only + "\n")


def test_a_start_s_file_beside_the_conversation_is_set_aside_before_and_after(tmp_path):
    real, env, folder = setup(tmp_path)
    head = "\n".join(FIXTURE.read_text(encoding="utf-8").splitlines()[:2]) + "\n"
    stray = real.with_name(f"session-2026-11-26T12-22-{SID[:8]}.jsonl")
    stray.write_text(head, encoding="utf-8")  # left by an earlier, killed supervisor
    record = Record()
    kept = keeper(tmp_path, env, folder, record)
    assert not stray.exists() and real.exists()
    assert [e["event"] for e in record.events] == ["session-set-aside", "session-kept"]
    again = real.with_name(f"session-2026-11-26T12-23-{SID[:8]}.jsonl")
    again.write_text(head, encoding="utf-8")  # this run's
    assert kept.after().set_aside and not again.exists()
    assert len(list((folder / "set-aside").iterdir())) == 2
    assert "would remove the whole session at its next start" in record.notes[-1]


def test_a_fifo_and_a_folder_that_cannot_be_made_cost_nothing(tmp_path):
    real, env, folder = setup(tmp_path)
    fifo = real.with_name(f"session-2026-11-26T12-30-{SID[:8]}.jsonl")
    os.mkfifo(fifo)
    folder.write_text("a file where the folder goes\n")  # even root cannot write into it
    record = Record()
    kept = keeper(tmp_path, env, folder, record)  # neither blocks on the FIFO nor raises
    assert kept is not None and kept.kept == {}
    assert any("could not keep a copy" in n for n in record.notes), record.notes
    real.unlink()
    assert kept.after().restore == []  # nothing was kept: nothing to put back, no error


def test_opencode_keeps_no_files_per_session(tmp_path):
    record = Record()
    opencode = adapters.registry()["opencode"]
    assert keeper_for(opencode, {}, tmp_path, "ses_1", tmp_path / "kept", record.note, record.event) is None
