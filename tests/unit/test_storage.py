"""Session state, locks, log rotation and workflow lookup on a temporary folder."""

import collections
import json
import os
import random
import re
import resource
from datetime import datetime
from pathlib import Path

import pytest

from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.errors import SessionBusy, WorkflowNotFound
from waaah_agent.runtime.store import CorruptSession, SessionState, SessionStore, atomic_write
from waaah_agent.runtime.supervise.logfiles import RETRY_AFTER, RollingFile, json_text, prune, replay
from waaah_agent.runtime.supervise.logs import SessionLogs
from waaah_agent.runtime.supervise.parts import parts_of
from waaah_agent.runtime.workspace import find_workflow, git_root, strip_front_matter, workflow_name


def make_state(sid: str = "s1", agent: str = "gemini") -> SessionState:
    return SessionState(id=sid, agent=agent, workflow="waaah-orc", workspace="/w", native_session_id="u-1")


def test_session_json_round_trip_and_schema(tmp_path):
    store = SessionStore(tmp_path)
    session = store.open("s1")
    session.save(make_state())
    data = json.loads(session.state_file.read_text())
    assert data["schema"] == 1 and data["native_session_id"] == "u-1" and data["updated"]
    assert session.load().id == "s1"
    assert oct(session.state_file.stat().st_mode & 0o777) == "0o600"


def test_corrupt_session_is_detected_and_moved_aside(tmp_path):
    session = SessionStore(tmp_path).open("s1")
    session.state_file.write_text("{nope")
    with pytest.raises(CorruptSession):
        session.load()
    moved = session.move_aside()
    assert moved.exists() and not session.state_file.exists()


def test_exclusive_lock(tmp_path):
    store = SessionStore(tmp_path)
    first = store.open("s1")
    first.lock()
    with pytest.raises(SessionBusy):
        store.open("s1").lock()
    first.unlock()
    store.open("s1").lock()


def test_newest_session_per_agent(tmp_path):
    store = SessionStore(tmp_path)
    for sid, agent, mtime in [("a", "gemini", 100), ("b", "claude", 200), ("c", "gemini", 50)]:
        session = store.open(sid)
        session.save(make_state(sid, agent))
        os.utime(session.state_file, (mtime, mtime))
    assert store.newest("gemini") == "a"
    assert store.newest("claude") == "b"
    assert store.newest(None) == "b"
    assert SessionStore(tmp_path / "none").newest("gemini") is None


def test_failed_save_keeps_the_old_copy(tmp_path, monkeypatch):
    session = SessionStore(tmp_path).open("s1")
    session.save(make_state())

    def full_disk(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    state = make_state()
    state.status = "changed"
    assert session.save(state) is False
    assert session.load().status == "starting"
    assert list(session.path.glob(".*.tmp")) == []


def test_atomic_write_replaces_whole(tmp_path):
    target = tmp_path / "f.json"
    atomic_write(target, "one")
    atomic_write(target, "two")
    assert target.read_text() == "two"


@pytest.mark.parametrize("planted", ["symlink", "file"])
def test_atomic_write_never_writes_through_what_stands_at_its_temporary_name(tmp_path, planted):
    """The temporary name is predictable (``.<name>.<pid>.tmp``): a symlink planted there is
    removed, never followed; a file a killed process left there is replaced."""
    target = tmp_path / "session.json"
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("precious")
    tmp = tmp_path / f".session.json.{os.getpid()}.tmp"
    if planted == "symlink":
        tmp.symlink_to(elsewhere)
    else:
        tmp.write_text("left by a killed process")
    atomic_write(target, "new")
    assert target.read_text() == "new" and not target.is_symlink()
    assert elsewhere.read_text() == "precious" and not os.path.lexists(tmp)


def test_prune_keeps_the_newest_ten_sessions_per_agent(tmp_path):
    for i in range(13):
        for suffix in (".log", ".cast", ".log.1"):
            (tmp_path / f"gemini-20260101-0000{i:02d}{suffix}").write_text("x")
    (tmp_path / "claude-20250101-000000.log").write_text("x")
    prune(tmp_path, "gemini", keep=10)
    logs = sorted(p.name for p in tmp_path.glob("gemini-*.log"))
    assert len(logs) == 10 and logs[0] == "gemini-20260101-000003.log"
    assert not list(tmp_path.glob("gemini-20260101-000000*"))
    assert (tmp_path / "claude-20250101-000000.log").exists()


def test_rolling_file_rolls_into_numbered_parts_in_order(tmp_path):
    """Each file stays under its size; the parts, oldest first, then the live file, hold all that
    was written in order (compressing them and keeping them within a budget is the
    Compressor's part: tests/runtime/test_record_parts.py)."""
    rolled = []
    f = RollingFile(tmp_path / "a.log", max_bytes=100, on_roll=rolled.append)
    lines = [b"%09d\n" % n for n in range(50)]
    for line in lines:
        f.write(line)
    f.close()
    parts = parts_of(tmp_path / "a.log")
    assert parts == rolled and [p.name for p in parts[:2]] == ["a.log.1", "a.log.2"]
    assert all(p.stat().st_size <= 100 for p in [*parts, tmp_path / "a.log"])
    assert b"".join(p.read_bytes() for p in [*parts, tmp_path / "a.log"]) == b"".join(lines)


def test_a_log_on_a_full_disk_keeps_whole_lines_and_resumes(tmp_path):
    """Writes that fail (here: past RLIMIT_FSIZE, as on a full disk) never raise; the file
    keeps whole lines only, counts what it lost, and is written again after a while."""
    now = [0.0]
    path = tmp_path / "a.cast"
    f = RollingFile(path, max_bytes=10**9, header=b'{"version": 2}\n', clock=lambda: now[0])
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))
    written = len(b'{"version": 2}\n')
    try:
        for i in range(400):  # ~400 KB: the second half cannot be written
            line = b'[%d, "o", "%b"]\n' % (i, b"x" * 1000)
            f.write(line)
            written += len(line)
        f.flush()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert f.failing is not None
    assert f.lost + path.stat().st_size == written  # every byte is in the file or counted lost
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) > 100
    assert [json.loads(line) for line in lines[1:-1]][-1][0] == len(lines) - 3  # whole lines, in order
    f.write(b'[1000, "o", "too early"]\n')  # still failing: counted, not written
    now[0] = RETRY_AFTER + 1
    f.write(b'[1001, "o", "again"]\n')
    f.close()
    assert f.failing is None
    assert path.read_bytes().endswith(b'"' + b"x" * 1000 + b'"]\n[1001, "o", "again"]\n')


def test_session_logs_write_text_and_cast(tmp_path):
    logs = SessionLogs(
        tmp_path, "gemini", (80, 24), Redactor(["s3cr3t-value"]), now=datetime(2026, 1, 2, 3, 4, 5)
    )
    raw = b"\x1b[1mbold\x1b[0m s3cr3t-value \xf0\x9f\x98\x80\r\n\xff tail\n"
    logs.output(raw[:20])
    logs.output(raw[20:])
    logs.notice("hello")
    logs.close()
    assert logs.text_path.name == "gemini-20260102-030405.log"
    text = logs.text_path.read_text()
    assert "bold [REDACTED] 😀" in text and "[waaah] hello" in text and "s3cr3t" not in text
    assert replay(logs.cast_path) == raw.replace(b"s3cr3t-value", b"[REDACTED]")


def test_cast_is_exact_for_any_bytes_in_any_split(tmp_path):
    rng = random.Random(7)
    secret = "sécret-κey-0123456789"
    pieces = [
        b"\x1b[1m\xe2\x9c\xa6 plain\x1b[0m\r\n",
        '"quoted" back\\slash tab\t bell\x07 del\x7f ünïcødé ✓ 😀'.encode(),
        secret.encode(),
        b"\xff\xfe invalid \xc3 \xe2\x9c",  # invalid and truncated UTF-8
        bytes(range(256)),
    ]
    raw = b"".join(rng.choice(pieces) for _ in range(400))
    logs = SessionLogs(tmp_path, "gemini", (80, 24), Redactor([secret]))
    at = 0
    while at < len(raw):
        step = rng.choice((1, 2, 3, 5, 64, 4095, 20000))
        logs.output(raw[at : at + step])
        at += step
    logs.close()
    cast = logs.cast_path.read_bytes()
    cast.decode("utf-8")  # valid UTF-8 throughout, as asciicast players expect
    assert all(len(json.loads(line)) == 3 for line in cast.splitlines()[1:])
    # Masked as the whole stream at once would be: the secret, and every run of 8 or more of its
    # characters ("0123456789" of the 256 bytes), whatever the split (two secrets in a row may be
    # one mask or two).
    expected = Redactor([secret]).raw(raw)
    assert secret.encode() not in expected and b"0123456789" not in expected

    def masks_joined(data: bytes) -> bytes:
        return re.sub(rb"(?:\[REDACTED\])+", b"[REDACTED]", data)

    assert masks_joined(replay(logs.cast_path)) == masks_joined(expected)


def test_json_text_writes_what_json_reads():
    common = '✓ \x1b[1m"a\\b"\x1b[0m\r\n\t\x07\x08'.encode()
    samples = (
        b"",
        b"abc",
        b'"\\\x00\x1b\x1f\x7f',
        "ü✓😀".encode(),
        b"\xff",
        bytes(range(256)),
        common,
        b"\x0e\x0f",
    )
    for data in samples:
        body = json_text(data)
        body.decode("utf-8")
        assert json.loads(b'"' + body + b'"').encode("utf-8", "surrogateescape") == data
    # Valid UTF-8 with only the usual terminal controls is written as it is, but for those.
    assert json_text(common) == '✓ \\u001b[1m\\"a\\\\b\\"\\u001b[0m\\r\\n\\t\\u0007\\b'.encode()


def test_workflow_lookup(tmp_path):
    ws, bundled = tmp_path / "ws", tmp_path / "bundled"
    (ws / ".agent" / "workflows").mkdir(parents=True)
    bundled.mkdir()
    (bundled / "waaah-orc.md").write_text("---\nname: x\n---\nbundled body\n")
    (ws / ".agent" / "workflows" / "mine.md").write_text("workspace body")
    assert find_workflow("/mine", ws, bundled).text == "workspace body"
    assert find_workflow("waaah-orc.md", ws, bundled).text == "bundled body\n"
    with pytest.raises(WorkflowNotFound) as err:
        find_workflow("nope", ws, bundled)
    assert "available: mine, waaah-orc" in str(err.value)
    assert workflow_name("/a.md") == "a"
    assert strip_front_matter("no front matter") == "no front matter"


def test_bundled_workflow_is_real():
    text = find_workflow("waaah-orc", Path("/nonexistent")).text
    assert "register_agent" in text and "wait_for_prompt" in text and not text.startswith("---")


def test_git_root(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "a" / "b").mkdir(parents=True)
    assert git_root(tmp_path / "repo" / "a" / "b") == tmp_path / "repo"


def test_damaged_per_model_token_counts_are_dropped_not_fatal():
    """session.json's token_models is read again from the transcripts: a damaged one (a hand, a
    disk) is left out and the session loads."""
    for damaged in ("x", {"a.jsonl": "x"}, {"a.jsonl": {"m": {"input": "lots"}}}, {"a.jsonl": {"m": [1]}}):
        data = {**make_state().to_json(), "token_models": damaged}
        assert SessionState.from_json(data).token_models == {}
    good = {"a.jsonl": {"gemini-2.5-pro": {"input": 5, "output": 1, "cached": 0}}}
    assert SessionState.from_json({**make_state().to_json(), "token_models": good}).token_models == good


def test_the_text_log_never_joins_the_pieces_its_budget_cut(tmp_path, monkeypatch):
    """Over a second's cleaning budget the rest of that second is only in the .cast: a smaller
    batch later in it is not put on the half line the skip cut, and the first line after the
    skip (a fragment) is left out too. Either would write a fragment of a token no mask knows."""
    from waaah_agent.runtime.supervise import logs as logs_module

    clock = [1000.0]
    monkeypatch.setattr(logs_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(logs_module, "CLEAN_PER_SECOND", 1000)
    token = "abcdefghij0123456789KLMNOP"
    header = f"    headers = {{'Authorization': 'Bearer {token}'}}"
    logs = SessionLogs(tmp_path, "sim", (80, 24), Redactor({}))
    for data in (
        b"x" * 800 + b"\r\n" + header.encode(),  # cleaned, its last line not ended yet
        b"\r\n" + b"y" * 400 + b"\r\n" + header[:45].encode(),  # over the budget: skipped
        header[45:].encode() + b"\r\n",  # small enough for the budget left: skipped as well
    ):
        logs.output(data)
        logs.flush()
    clock[0] += 1.5  # the next second
    logs.output(header[50:].encode() + b"\r\nthe next line\r\n")  # the cut line's rest, then whole ones
    logs.flush()
    logs.close()
    text = logs.text_path.read_text()
    assert "the next line" in text and "bytes of fast output are only in" in text
    for at in range(len(token) - 7):
        assert token[at : at + 8] not in text, token[at : at + 8]
    assert replay(logs.cast_path).count(b"Bearer [REDACTED]") == 2  # the .cast has it all, masked


def test_a_flood_of_batches_as_large_as_the_budget_still_leaves_each_second_s_lines(tmp_path, monkeypatch):
    """Under a flood every batch is at least as large as a second's cleaning budget: each second
    the whole lines within the budget are cleaned (never none), the rest is only in the .cast,
    and no line in the text log is a piece of one."""
    from waaah_agent.runtime.supervise import logs as logs_module

    clock = [1000.0]
    monkeypatch.setattr(logs_module.time, "monotonic", lambda: clock[0])
    lines = [f"line {i:06d} of the flood, the same length every time".encode() for i in range(40_000)]
    stream = b"\r\n".join(lines) + b"\r\n"
    batch = logs_module.BATCH + 4096  # a flood's batch: one read more than BATCH
    logs = SessionLogs(tmp_path, "sim", (80, 24), Redactor({}))
    for second, at in enumerate(range(0, len(stream), batch)):
        clock[0] = 1000.0 + second * 1.01  # one batch a second, each over the budget
        logs.output(stream[at : at + batch])
        logs.flush()
    logs.close()
    text = [line.split(" ", 1)[1] for line in logs.text_path.read_text().splitlines()]
    agent = [line for line in text if not line.startswith("[waaah]")]
    assert all(line.encode() in lines for line in agent), [x for x in agent if x.encode() not in lines][:3]
    per_second = collections.Counter(int(line.split()[1]) * (len(lines[0]) + 2) // batch for line in agent)
    budget_lines = logs_module.CLEAN_PER_SECOND // (len(lines[0]) + 2)  # whole lines in the budget
    full = len(stream) // batch  # (the last batch is a short one)
    assert full >= 8 and [n for n in (per_second[i] for i in range(full)) if n < budget_lines - 2] == [], (
        per_second
    )
    assert replay(logs.cast_path) == stream


def test_a_key_echoed_a_cell_at_a_time_is_masked_however_the_reads_are_batched(tmp_path):
    """A diff-based TUI echoes a typed key one cell at a time, a cursor move and a colour around
    each: the run grows longer than the tail held back, and is masked whole, never released a
    character at a time."""
    key = "AIzaSyTyped-0123456789abcdefghijklmnopq"
    escapes = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b.|[\r\x08]")
    cells = [b"\x1b[20;%dH\x1b[3%dm%s\x1b[0m" % (4 + i, i % 8, c.encode()) for i, c in enumerate(key)]
    for trial in range(30):
        rng = random.Random(trial)
        logs = SessionLogs(tmp_path / str(trial), "sim", (120, 40), Redactor([key]))
        logs.output(b"\x1b[2J\x1b[H > Type your message\r\n")
        at = 0
        while at < len(cells):
            n = rng.choice([1, 1, 1, 2, 3, 5])
            logs.output(b"".join(cells[at : at + n]))
            at += n
            if rng.random() < 0.5:
                logs.flush()
        logs.output(b"\r\n done\r\n")
        logs.close()
        played = escapes.sub(b"", replay(logs.cast_path))
        assert b"[REDACTED]" in played and b"done" in played
        for i in range(len(key) - 7):
            assert key[i : i + 8].encode() not in played, (trial, key[i : i + 8])


def test_fast_output_the_cast_could_not_take_either_is_not_said_to_be_in_it(tmp_path, monkeypatch):
    """Over a second's cleaning budget the rest is "only in the .cast": not so on a full disk,
    where the .cast's writes fail too; the text log says it is in neither."""
    from waaah_agent.runtime.supervise import logs as logs_module

    clock = [1000.0]
    monkeypatch.setattr(logs_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(logs_module, "CLEAN_PER_SECOND", 1000)
    logs = SessionLogs(tmp_path, "sim", (80, 24), Redactor({}))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, hard))  # the .cast fills it; the text log stays small
    try:
        for _ in range(10):
            logs.output(b"flood line\r\n" * 1000)
            logs.flush()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert logs._cast.failing is not None  # the disk refused the .cast
    clock[0] += 1.5  # the next second says what the last one left out
    logs.output(b"after\r\n")
    logs.close()
    text = logs.text_path.read_text()
    assert "bytes of fast output are only in" not in text
    assert "bytes of fast output are not in the text log, nor in" in text and "it cannot be written" in text
