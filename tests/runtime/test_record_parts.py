"""The whole night kept: rolled parts compressed, a disk budget, `waaah replay` from any point."""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
from pathlib import Path

import pexpect
import pytest

from tests.runtime.helpers import WAAAH, session_dirs, sim_env, spawn_waaah, state
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.errors import UsageError
from waaah_agent.runtime.night.replay import parse_at, read_record
from waaah_agent.runtime.supervise.logfiles import replay
from waaah_agent.runtime.supervise.logs import SessionLogs
from waaah_agent.runtime.supervise.parts import parts_of

WAIT_STREAM = (
    Path(__file__).resolve().parents[1] / "fixtures" / "streams" / "gemini-0.61.0" / "wait-loop.jsonl.gz"
)


def wait_reads() -> list[bytes]:
    lines = gzip.decompress(WAIT_STREAM.read_bytes()).decode().splitlines()[1:]
    return [base64.b64decode(json.loads(line)[1]) for line in lines]


def logs_in(folder: Path, **kwargs) -> SessionLogs:
    return SessionLogs(folder, "gemini", (120, 40), Redactor({}), **kwargs)


def test_rolled_parts_are_compressed_and_the_record_replays_whole(tmp_path):
    logs = logs_in(tmp_path / "logs", max_bytes=256 * 1024)
    written = bytearray()
    for data in wait_reads() * 2:  # ~4 MB of gemini waiting in wait_for_prompt
        logs.output(data)
        written += data
    logs.close()
    parts = parts_of(logs.cast_path)
    assert len(parts) >= 10 and all(p.suffix == ".gz" for p in parts), parts
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in parts)
    assert replay(logs.cast_path) == bytes(written)  # every byte, in order, across the parts
    subprocess.run(["gzip", "--test", *map(str, parts)], check=True)  # plain gzip files (ISA-L's)
    kept = sum(p.stat().st_size for p in parts)
    raw_cast = sum(len(gzip.decompress(p.read_bytes())) for p in parts)
    assert raw_cast / kept > 20, (raw_cast, kept)  # the redraws compress well
    lines = logs.text_path.read_text().splitlines()
    assert len(lines) < 40, lines  # the text log holds the distinct lines, not 1,200 redraws


def test_over_its_budget_the_record_drops_its_oldest_parts_and_says_so(tmp_path):
    logs = logs_in(tmp_path / "logs", max_bytes=64 * 1024, budget=400 * 1024)
    for n in range(400):  # output that hardly compresses (base64 of random bytes), a line at a time
        logs.output(b"%05d %s\r\n" % (n, base64.b64encode(os.urandom(900))))
        if n % 50 == 0:
            logs.parts.close()  # let the background compression catch up
            logs.flush()
    logs.close()
    logs.parts.close()
    folder = tmp_path / "logs"
    total = sum(p.stat().st_size for p in folder.iterdir())
    assert total <= 400 * 1024 + 2 * 64 * 1024 + 4096, total
    text = "".join(
        gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text()
        for p in [*parts_of(logs.text_path), logs.text_path]
    )
    assert "the record outgrew its budget: dropped its oldest part" in text
    record = read_record(logs.cast_path)
    assert record.events and record.problems == []  # what is left reads back


def test_a_part_cut_short_replays_up_to_the_damage(tmp_path):
    logs = logs_in(tmp_path / "logs", max_bytes=64 * 1024)
    for data in wait_reads()[:200]:
        logs.output(data)
        logs.flush()  # the reads came 50 ms apart: one .cast event each (back to back they are joined)
    logs.close()
    first = parts_of(logs.cast_path)[0]
    first.write_bytes(first.read_bytes()[: first.stat().st_size // 2])  # a disk that filled up
    record = read_record(logs.cast_path)
    assert len(record.problems) == 1 and "is damaged" in record.problems[0], record.problems
    assert len(record.events) > 20  # the rest of the night is still there


def test_replay_times():
    from datetime import datetime, timezone

    start = datetime(2026, 11, 23, 21, 30, tzinfo=timezone.utc)
    assert parse_at("+2h15m", start) == 8100
    assert parse_at("+90s", start) == 90
    assert parse_at("03:12", start) == (5 * 3600 + 42 * 60)  # the next 03:12 after the start
    assert parse_at("2026-11-23T22:00:00+00:00", start) == 1800
    with pytest.raises(UsageError, match="further in than any record"):
        parse_at("+999999999h", start)  # its date, shown with the replay, overflowed


def test_waaah_replay_writes_the_night_from_a_point(workspace, fake_home):
    env = sim_env(
        fake_home,
        SIM_MODE="replay",
        SIM_REPLAY=str(WAIT_STREAM),
        SIM_SECONDS="4",
        WAAAH_LOG_ROLL_MB="0.1",
    )
    child = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env)
    child.expect("REPLAY-END", timeout=30)
    child.expect(pexpect.EOF, timeout=30)
    cast = Path(state(workspace)["cast_path"])
    assert parts_of(cast), "the record rolled over"
    run = subprocess.run(
        [WAAAH, "replay", "--at", "+2s", "--out", "-"],
        cwd=workspace,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.decode().splitlines()
    header = json.loads(lines[0])
    events = [json.loads(line) for line in lines[1:]]
    assert header["version"] == 2 and events[0][0] == 0.0  # the screen so far, drawn at once
    assert all(a[0] <= b[0] for a, b in zip(events, events[1:], strict=False))
    assert 1.0 < events[-1][0] < 4.0  # from two seconds in to the end
    unknown = subprocess.run(
        [WAAAH, "replay", "no-such-session", "--out", "-"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
    )
    assert unknown.returncode != 0 and unknown.stderr.count("\n") == 1
    assert "no session matches 'no-such-session'" in unknown.stderr
    assert session_dirs(workspace)
