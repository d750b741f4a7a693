"""Bad data is one line, never a hang, a traceback or all the memory.

Through the real `waaah` command: `waaah run` over a CLI that answers 64 MB or never ends its
line (a `gemini`/`claude` on PATH replaying a stream in the CLIs' own format, as recorded in
tests/fixtures/streams), `waaah replay` over a record with a FIFO and gzip bombs among its
parts, and the printers of what sessions and runs left behind fed control sequences. Memory
is the peak resident size of the `waaah` process (and what it waited for), as the kernel
counts it.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.faults.conftest import WAAAH, assert_no_traceback
from tests.runtime.helpers import sim_env, spawn_waaah, state

MB = 1024 * 1024
WAIT_STREAM = (
    Path(__file__).resolve().parents[1] / "fixtures" / "streams" / "gemini-0.61.0" / "wait-loop.jsonl.gz"
)
SID = "50a543e2-bbd8-4fdf-9659-9fbd496f8f0b"
# Run a command, then say the peak resident size (KB) and the CPU seconds of what it waited for,
# on stderr's last line.
_PEAK = (
    "import resource, subprocess, sys\n"
    "limit = int(sys.argv[1])\n"
    "def cap():\n"
    "    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "done = subprocess.run(sys.argv[2:], preexec_fn=cap if limit else None)\n"
    "used = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(used.ru_maxrss, used.ru_utime + used.ru_stime, file=sys.stderr)\n"
    "sys.exit(done.returncode)\n"
)


def measured(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float, address_space: int = 0
) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """``argv`` run to its end: what it printed, its peak memory in MB and its seconds (the CPU
    seconds it used are printed). On a timeout, everything it started is ended (its own process
    group) and the test fails."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _PEAK, str(address_space), *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{' '.join(argv[:3])} did not end within {timeout:.0f} s")
    seconds = time.monotonic() - started
    *said, figures = err.rstrip("\n").split("\n")
    peak, cpu = figures.split()
    print(f"{' '.join(argv[1:3])}: {seconds:.1f} s, {float(cpu):.1f} CPU s")
    done = subprocess.CompletedProcess(argv, proc.returncode, out, "\n".join(said))
    return done, int(peak) / 1024, seconds


def cli_on_path(tmp_path: Path, name: str, script: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text("#!/bin/sh\n" + script)
    (bin_dir / name).chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "LANG": "C.UTF-8",
    }


def gemini_answer(path: Path, size: int, piece: int = 8192) -> str:
    """gemini's stream-json for an answer of ``size`` bytes, in deltas of ``piece`` bytes."""
    words = ("lorem ipsum dolor sit amet, consectetur adipiscing elit " * (piece // 50 + 1))[:piece]
    with path.open("w") as out:
        out.write(json.dumps({"type": "init", "session_id": SID, "model": "gemini-2.5-pro"}) + "\n")
        delta = json.dumps({"type": "message", "role": "assistant", "content": words, "delta": True}) + "\n"
        out.write(delta * (size // piece))
        stats = {"total_tokens": 3, "input_tokens": 1, "output_tokens": 2}
        out.write(json.dumps({"type": "result", "status": "success", "stats": stats}) + "\n")
    return words * (size // piece)


def claude_answer(path: Path, text: str) -> None:
    """claude's stream-json for one answer: the assistant message and the result, a line each."""
    with path.open("w") as out:
        out.write(json.dumps({"type": "system", "subtype": "init", "session_id": SID, "model": "m"}) + "\n")
        out.write(json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}))
        out.write("\n")
        usage = {"input_tokens": 1, "output_tokens": 2}
        result = {"type": "result", "subtype": "success", "is_error": False, "result": text}
        out.write(json.dumps({**result, "session_id": SID, "usage": usage}) + "\n")


@pytest.mark.timeout(600)
def test_a_64_mb_answer_is_read_in_linear_time(workspace, tmp_path):
    gemini_stream, claude_stream = tmp_path / "gemini.stdout", tmp_path / "claude.stdout"
    text = gemini_answer(gemini_stream, 64 * MB)
    claude_answer(claude_stream, text)
    env = cli_on_path(tmp_path, "gemini", f"cat '{gemini_stream}'\n")
    cli_on_path(tmp_path, "claude", f"cat '{claude_stream}'\n")
    for agent in ("gemini", "claude"):
        done, peak, seconds = measured(
            [WAAAH, "run", "hi", "--agent", agent, "--format", "text"], workspace, env, timeout=200
        )
        print(f"{agent}: a 64 MB answer read in {seconds:.1f} s, peak memory {peak:.0f} MB")
        assert done.returncode == 0, done.stderr[-2000:]
        assert_no_traceback(done.stderr)
        assert done.stdout == text + "\n"
        # 216 s before (gemini); a few seconds on a quiet machine. This one is shared with other
        # work (2 cores), so the bound is generous: a quadratic reader never gets near it.
        assert seconds < 120, seconds


def test_stream_lines_of_a_shape_the_cli_never_writes_are_noise_and_the_answer_comes(workspace, tmp_path):
    """A CLI whose stream has objects with fields of another shape (a text where an object goes,
    a list for the usage): the run reads past them to the answer, never a traceback."""
    stream = tmp_path / "claude.stdout"
    claude_answer(stream, "THE-ANSWER")
    odd = [
        {"type": "assistant", "message": "a text where an object goes"},
        {"type": "result", "usage": [1, 2]},
        {"type": "user", "message": {"content": 5}},
    ]
    stream.write_text("".join(json.dumps(line) + "\n" for line in odd) + stream.read_text())
    env = cli_on_path(tmp_path, "claude", f"cat '{stream}'\n")
    done = subprocess.run(
        [WAAAH, "run", "hi", "--agent", "claude", "--format", "json", "--no-fallback"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_no_traceback(done.stderr)
    assert done.returncode == 0, done.stderr[-2000:]
    envelope = json.loads(done.stdout)
    assert envelope["ok"] and envelope["response"] == "THE-ANSWER"


@pytest.mark.timeout(300)
def test_a_line_that_never_ends_is_cut_in_bounded_memory(workspace, tmp_path):
    answer = tmp_path / "answer.stdout"
    gemini_answer(answer, 100, piece=10)
    # 400 MB with no newline, then a newline and the answer as usual.
    script = f"head -c {400 * MB} /dev/zero | tr '\\0' x\necho\ncat '{answer}'\n"
    env = cli_on_path(tmp_path, "gemini", script)
    done, peak, seconds = measured([WAAAH, "run", "hi", "--agent", "gemini"], workspace, env, timeout=120)
    print(f"a 400 MB line: {seconds:.1f} s, peak memory {peak:.0f} MB")
    assert_no_traceback(done.stderr)
    assert done.returncode == 0, done.stderr[-2000:]
    envelope = json.loads(done.stdout)
    assert envelope["ok"] and envelope["response"] == "lorem ipsu" * 10
    log = Path(envelope["log_path"]).read_text()
    cut = [json.loads(line) for line in log.splitlines() if '"record": "cut"' in line]
    assert len(cut) == 1 and cut[0]["sizes"] == [400 * MB], cut
    assert "longer than 128 MB, left out" in cut[0]["what"]
    assert peak < 450, peak  # the line is never held whole


def recorded_session(workspace: Path, home: Path) -> Path:
    """A short session of the simulated agent replaying a recorded screen; its `.cast` path."""
    env = sim_env(home, SIM_MODE="replay", SIM_REPLAY=str(WAIT_STREAM), SIM_SECONDS="2")
    child = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env)
    child.expect("REPLAY-END", timeout=30)
    child.expect(pexpect.EOF, timeout=30)
    return Path(state(workspace)["cast_path"])


def gzip_bomb(path: Path, head: bytes, body: bytes, times: int) -> None:
    """A gzip file that inflates to ``head`` then ``body`` ``times`` times (members repeated)."""
    member = gzip.compress(body, compresslevel=9, mtime=0)
    with path.open("wb") as out:
        out.write(gzip.compress(head, mtime=0))
        for _ in range(times):
            out.write(member)


@pytest.mark.timeout(300)
def test_replay_skips_a_fifo_part_and_cuts_gzip_bombs_in_bounded_memory(workspace, fake_home, tmp_path):
    cast = recorded_session(workspace, fake_home)
    header = cast.read_text().splitlines()[0].encode() + b"\n"
    os.mkfifo(cast.with_name(cast.name + ".7"))  # reading it would wait forever for a writer
    event = json.dumps([1.0, "o", "x" * 1000]).encode() + b"\n"
    # 5 GB of well-formed events, then 5 GB of one line with no end: 10 MB on disk together.
    gzip_bomb(cast.with_name(cast.name + ".8.gz"), header, event * (64 * MB // len(event)), 80)
    gzip_bomb(cast.with_name(cast.name + ".9.gz"), header, b"y" * 64 * MB, 80)
    out = tmp_path / "replay.cast"
    done, peak, seconds = measured(
        [WAAAH, "replay", "--at", "+1h", "--out", str(out)],
        workspace,
        sim_env(fake_home),
        timeout=180,
        address_space=3 * 1024 * MB,  # a MemoryError before the machine runs out, on a regression
    )
    print(f"replay over two 5 GB bombs: {seconds:.1f} s, peak memory {peak:.0f} MB")
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    said = done.stderr.splitlines()
    assert any(f"{cast.name}.7 is a FIFO, not a regular file: left out" in line for line in said), said
    assert any(f"{cast.name}.8.gz holds more than 256 MB once uncompressed" in line for line in said), said
    assert any(f"{cast.name}.9.gz: 1 line(s) longer than 16 MB, left out" in line for line in said), said
    assert peak < 400, peak
    lines = out.read_text().splitlines()
    assert json.loads(lines[0])["version"] == 2
    assert len(lines) == 2 and "REPLAY-END" in json.loads(lines[1])[2]  # the screen at the end


# What a terminal acts on: OSC 52 writes the clipboard, CSI clears the screen, a C1 CSI, a bidi
# override that reverses what follows, a carriage return that overwrites the line.
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
HOSTILE = f"task{OSC52}-1\x1b[2J\x9b31m\u202eevil\r"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")
SESSION = "gemini-20261123-200000-c0ffee"
STREAMS = Path(__file__).resolve().parents[1] / "fixtures" / "streams" / "claude-2.1.330"


def hostile_workspace(ws: Path) -> None:
    """A session and a routing table whose text holds escapes, as a file anyone wrote would."""
    folder = ws / ".waaah" / "sessions" / SESSION
    folder.mkdir(parents=True)
    events = [
        {"ts": "2026-11-23T20:00:00.000+00:00", "event": "start", "argv": ["gemini"]},
        {"ts": "2026-11-23T20:01:00.000+00:00", "event": "state", "state": "tool", "evidence": HOSTILE},
        {
            "ts": "2026-11-23T20:02:00.000+00:00",
            "event": "mcp-tool_end",
            "tool": "wait_for_prompt",
            "outcome": "task",
            "task_id": HOSTILE,
        },  # fmt: skip
        {"ts": "2026-11-23T20:03:00.000+00:00", "event": "restart", "after": HOSTILE, "reason": HOSTILE},
        {"ts": "2026-11-23T20:04:00.000+00:00", "event": "nudge", "kind": "continue", "reason": HOSTILE},
    ]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    state = {
        "schema": 1,
        "id": SESSION,
        "agent": "gemini",
        "workflow": "waaah-orc",
        "workspace": str(ws),
        "native_session_id": HOSTILE,
        "status": "stopped",
        "created": "2026-11-23T20:00:00+00:00",
        "ended": "2026-11-23T20:05:00+00:00",
        "end_reason": HOSTILE,
        "first_prompt": HOSTILE,
        "first_task": HOSTILE,
    }
    (folder / "session.json").write_text(json.dumps(state))
    (ws / ".agent").mkdir()
    table = {"roles": {"evil": {"chain": ["gemini"], "why": HOSTILE}}}
    (ws / ".agent" / "routes.json").write_text(json.dumps(table))


def test_control_sequences_from_files_are_shown_never_acted_on(workspace, tmp_path):
    hostile_workspace(workspace)
    env = cli_on_path(tmp_path, "claude", f"cat '{STREAMS / 'answer.stdout'}'\n")
    env["TZ"] = "UTC"
    ran = subprocess.run(
        [WAAAH, "run", HOSTILE, "--agent", "claude"], cwd=workspace, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["log_id"]
    page = tmp_path / "night.html"
    commands = [
        ["status"],
        ["status", "--json"],
        ["sessions"],
        ["sessions", "--json"],
        ["report", "--html", str(page)],
        ["run", "--list", run_id],
        ["run", "--list", run_id, "--paths"],
        ["route", "--role", "evil"],
        ["quota"],
        ["doctor", "--agent", "claude"],
        ["replay", HOSTILE],  # an error line naming what was asked
    ]
    shown = ""
    for args in commands:
        done = subprocess.run(
            [WAAAH, *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=60
        )
        assert_no_traceback(done.stdout, done.stderr)
        for raw in RAW:
            assert raw not in done.stdout + done.stderr, f"waaah {args[0]} printed {raw!r}"
        shown += done.stdout + done.stderr
    # What the data holds is there to see, as escapes.
    assert "task\\x1b]52;c;ZWNobyBwd25lZA==\\x07-1\\x1b[2J\\x9b31m\\u202eevil\\x0d" in shown
    assert "tasks served: 1" in shown and "evil" in shown
    text = page.read_text()
    for raw in RAW:
        assert raw not in text, f"the page holds {raw!r}"
    assert "task\\x1b]52;c;ZWNobyBwd25lZA==\\x07-1" in text
    # The config file is data too: what `waaah config` shows of it, and its error lines.
    config = tmp_path / "config.toml"
    for body in (f"default_agent = {json.dumps(HOSTILE)}\n", f"{json.dumps(HOSTILE)} = 1\n"):
        config.write_text(body)
        done = subprocess.run(
            [WAAAH, "config"],
            cwd=workspace,
            env={**env, "WAAAH_CONFIG": str(config)},
            capture_output=True,
            text=True,
        )
        assert_no_traceback(done.stdout, done.stderr)
        assert "\\x1b]52" in done.stdout + done.stderr, done.stdout + done.stderr
        for raw in RAW:
            assert raw not in done.stdout + done.stderr, f"waaah config printed {raw!r}"


def long_night(ws: Path, size: int) -> int:
    """A session whose events.jsonl is ``size`` bytes: a task every 10 s, each with its nudge,
    state changes and tokens, as a supervisor writes them over weeks. The number of tasks."""
    folder = ws / ".waaah" / "sessions" / SESSION
    folder.mkdir(parents=True)
    start = 1795464000.0  # 2026-11-23 20:00 UTC
    cycle = [
        '"event": "state", "state": "busy", "evidence": "title: Working"',
        '"event": "mcp-tool_start", "tool": "wait_for_prompt"',
        '"event": "state", "state": "tool", "evidence": "MCP tap: wait_for_prompt in flight"',
        '"event": "mcp-tool_end", "tool": "wait_for_prompt", "outcome": "task", "task_id": "task-{n}"',
        '"event": "state", "state": "busy", "evidence": "title: Working"',
        '"event": "mcp-tool_end", "tool": "send_response", "outcome": "ok"',
        '"event": "state", "state": "ready", "evidence": "screen: input prompt"',
        '"event": "nudge", "kind": "continue", "reason": "the turn ended outside wait_for_prompt"',
        '"event": "tokens", "input": {n}00, "output": 7',
    ]
    written = n = 0
    with (folder / "events.jsonl").open("w") as out:
        while written < size:
            block = "".join(
                f'{{"ts": {start + n * 10 + i}, {line.replace("{n}", str(n))}}}\n'
                for i, line in enumerate(cycle)
            )
            out.write(block)
            written += len(block)
            n += 1
    state = {"schema": 1, "id": SESSION, "agent": "gemini", "workflow": "waaah-orc", "workspace": str(ws),
             "native_session_id": "x", "status": "stopped", "created": "2026-11-23T20:00:00+00:00"}  # fmt: skip
    (folder / "session.json").write_text(json.dumps(state))
    return n


@pytest.mark.timeout(600)
def test_a_report_over_120_mb_of_events_is_bounded_and_its_page_opens(workspace, tmp_path):
    from tests.runtime.test_report import chromium

    long_night(workspace, 120 * MB)
    page = tmp_path / "night.html"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "TZ": "UTC"}
    done, peak, seconds = measured([WAAAH, "report", "--html", str(page)], workspace, env, timeout=300)
    size = page.stat().st_size / MB
    print(
        f"a report of 120 MB of events: {seconds:.1f} s, peak memory {peak:.0f} MB, a page of {size:.1f} MB"
    )
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    assert "is larger than 64 MB: the report covers its end" in done.stdout
    assert re.search(r"tasks served: \d{5}\n", done.stdout), done.stdout[:2000]
    assert "listed, spread over the night)" in done.stdout
    assert len(done.stdout.splitlines()) < 150  # a summary, not a listing of the weeks
    assert peak < 400, peak  # 909 MB before
    assert size < 10, size  # 74 MB before; plotly.js itself is most of it
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    browser += ["--virtual-time-budget=10000", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=240
    ).stdout
    timeline = dom[dom.index('id="timeline"') : dom.index('id="tokens"')]
    assert timeline.count('class="trace bars"') >= 3, timeline[:2000]  # plotly drew the states
    assert 'data-n="tasks">' in dom and "spread over the night" in dom
