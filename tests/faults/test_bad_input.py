"""Bad input and a hostile file system: one clear line naming the path, never a traceback.

Each test drives the real `waaah` command (the simulated agent, or a scripted `claude` for
`waaah run`) into one class of trouble and asserts the documented exit code, the one line that
names the path and the fix, no traceback anywhere, and that nothing is lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.envelope_schema import refused
from tests.faults.conftest import WAAAH, assert_no_traceback, clean_env, run_waaah, small_disk
from tests.runtime.helpers import events, retry_until, session_dirs

STREAMS = Path(__file__).resolve().parents[1] / "fixtures" / "streams" / "claude-2.1.332"
SID = "simulated-20240101-000000-abcdef"


def stderr_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def start_agent(ws: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`waaah agent --start=simulated` headless, running until it is sent SIGTERM."""
    return subprocess.Popen(
        [WAAAH, "agent", "--start=simulated", "--no-nudge", *args],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def started(ws: Path) -> bool:
    return bool(session_dirs(ws)) and any(e["event"] == "start" for e in events(ws))


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    return out, err


def fake_claude(folder: Path, answer: str = "answer") -> Path:
    """A `claude` on PATH that prints a recorded stream."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "claude"
    script.write_text(f"#!/bin/sh\ncat '{STREAMS / (answer + '.stdout')}'\n")
    script.chmod(0o755)
    return script


def run_env(home: Path, bin_dir: Path, **extra: str) -> dict[str, str]:
    env = clean_env(home, **extra)
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    env.setdefault("XDG_STATE_HOME", str(home / "state"))
    return env


@contextlib.contextmanager
def read_only(where: Path, bind: bool = False) -> Iterator[Path]:
    """``where`` read-only for everyone, root too: a read-only bind mount of itself, or an empty
    read-only tmpfs over it. Skipped where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    if bind:
        steps = [["mount", "--bind", str(where), str(where)], ["mount", "-o", "remount,bind,ro", str(where)]]
    else:
        steps = [["mount", "-t", "tmpfs", "-o", "ro,size=1m", "waaah-ro", str(where)]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)
            pytest.skip(f"cannot mount read-only here ({done.stderr.strip()}): needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def a_state(ws: Path, **fields: object) -> dict[str, object]:
    data: dict[str, object] = {
        "id": SID,
        "agent": "simulated",
        "workflow": "waaah-orc",
        "workspace": str(ws),
        "native_session_id": "0d3c2b1a-0000-4000-8000-000000000001",
        "schema": 1,
    }
    data.update(fields)
    return data


def put_session(ws: Path, text: str) -> Path:
    folder = ws / ".waaah" / "sessions" / SID
    folder.mkdir(parents=True)
    path = folder / "session.json"
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------
# 1. session.json of the wrong shape: one warning, moved aside, a fresh session
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "[]",
        "null",
        '"a string"',
        "bad-limit",
        "tokens-not-ints",
        "fifo",
    ],
)
def test_a_session_file_of_the_wrong_shape_is_moved_aside_and_a_fresh_session_starts(
    workspace, home, content
):
    if content == "bad-limit":
        text = json.dumps(a_state(workspace, limit_until="tomorrow-ish", status="limited"))
    elif content == "tokens-not-ints":
        text = json.dumps(a_state(workspace, tokens={"input": "many"}, restarts="3"))
    else:
        text = content
    bad = put_session(workspace, text)
    if content == "fifo":
        bad.unlink()
        os.mkfifo(bad)
    proc = start_agent(workspace, clean_env(home), "--resume")
    try:
        retry_until(lambda: len(session_dirs(workspace)) == 2 and started(workspace), timeout=20)
    finally:
        out, err = stop(proc)
    assert_no_traceback(out, err)
    warned = [line for line in (out + err).splitlines() if "is unreadable" in line]
    assert len(warned) == 1 and str(bad) in warned[0] and "starting a fresh session" in warned[0], out + err
    assert list(bad.parent.glob("session.json.corrupt-*")), "the bad file is kept for inspection"
    assert proc.returncode == 0


# ---------------------------------------------------------------------------------------------
# 2. A run-log record of the wrong shape does not break later runs
# ---------------------------------------------------------------------------------------------


def test_a_run_log_record_of_the_wrong_shape_does_not_break_later_runs(workspace, home, tmp_path):
    fake_claude(tmp_path / "bin")
    day = workspace / ".waaah" / "runs" / "2024-01-01"
    day.mkdir(parents=True)
    (day / "old.jsonl").write_text(
        "\n".join(
            [
                '{"record": "start", "ts": "noon", "prompt": 5, "agent": ["x"]}',
                '{"record": "end", "envelope": [1, 2]}',
                '{"record": "end", "envelope": {"tokens": {"input": "many"}, "session_id": 7}}',
                "[1, 2, 3]",
                '{"record": 12}',
            ]
        )
        + "\n"
    )
    env = run_env(home, tmp_path / "bin", WAAAH_PARENT_ID="old")
    done = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["response"] == "Hello from the fake model."
    assert json.loads(done.stdout)["parent_id"] == "old"
    listed = run_waaah("sessions", cwd=workspace, env=env)
    assert listed.returncode == 0 and "old" in listed.stdout
    assert_no_traceback(listed.stdout, listed.stderr)


# ---------------------------------------------------------------------------------------------
# 3. The file system at start: .waaah a file, read-only, the workspace read-only, a full disk
# ---------------------------------------------------------------------------------------------


def test_dot_waaah_being_a_file_is_one_line_with_the_fix(workspace, home):
    (workspace / ".waaah").write_text("not a folder\n")
    done = run_waaah("agent", "--start=simulated", cwd=workspace, env=clean_env(home), timeout=30)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 8, done.stderr
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and str(workspace / ".waaah") in lines[0] and "mv " in lines[0], lines


def test_dot_waaah_read_only_is_one_line_with_the_fix(workspace, home):
    with read_only(workspace / ".waaah"):
        done = run_waaah("agent", "--start=simulated", cwd=workspace, env=clean_env(home), timeout=30)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 8, done.stderr
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and str(workspace / ".waaah") in lines[0] and "read-only" in lines[0], lines


def test_a_read_only_workspace_is_one_line_with_the_fix(workspace, home):
    with read_only(workspace, bind=True):
        done = run_waaah("agent", "--start=simulated", cwd=workspace, env=clean_env(home), timeout=30)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 8, done.stderr
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and str(workspace / ".waaah") in lines[0] and "read-only" in lines[0], lines


def test_a_full_disk_at_start_is_one_line_before_the_agent_starts(workspace, home):
    with small_disk(workspace / ".waaah", "64k") as disk:
        with contextlib.suppress(OSError), (disk / "filler").open("wb") as fh:
            while True:
                fh.write(b"x" * 4096)
                fh.flush()
        done = run_waaah("agent", "--start=simulated", cwd=workspace, env=clean_env(home), timeout=30)
        assert not (disk / "logs").exists() or not any((disk / "logs").iterdir())
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 8, done.stderr
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and str(workspace / ".waaah") in lines[0], (
        lines
    )  # the first file it could not write
    assert "No space left on device" in lines[0] and "free some disk space" in lines[0], lines


# ---------------------------------------------------------------------------------------------
# 4. A CLI that exists but cannot be executed
# ---------------------------------------------------------------------------------------------


def test_a_cli_that_cannot_be_executed_names_the_file_and_chmod(workspace, home, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gemini = bin_dir / "gemini"
    gemini.write_text("#!/bin/sh\necho hi\n")
    gemini.chmod(0o644)
    done = run_waaah("agent", "--start=gemini", cwd=workspace, env=run_env(home, bin_dir), timeout=30)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 3, done.stderr
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and str(gemini) in lines[0] and f"chmod +x {gemini}" in lines[0], lines


def test_waaah_run_with_a_cli_whose_exec_is_refused_prints_a_crash_envelope(workspace, home, tmp_path):
    bin_dir = tmp_path / "bin"
    interpreter = tmp_path / "interp"
    interpreter.write_text("not executable\n")
    interpreter.chmod(0o644)
    claude = fake_claude(bin_dir)
    claude.write_text(f"#!{interpreter}\n")  # exec fails with EACCES on the interpreter
    done = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=run_env(home, bin_dir))
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 15, done.stderr
    envelope = refused(done.stdout, "provider_error", 15, "crash")
    assert f"chmod +x {claude}" in envelope["error"]
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and str(claude) in lines[0], lines


# ---------------------------------------------------------------------------------------------
# 5. `waaah run`: the prompt (NUL, invalid UTF-8) and state that cannot be written
# ---------------------------------------------------------------------------------------------


def test_a_nul_byte_in_the_prompt_is_an_invalid_input_envelope(workspace, home, tmp_path):
    fake_claude(tmp_path / "bin")
    env = run_env(home, tmp_path / "bin")
    done = run_waaah("run", "--agent", "claude", cwd=workspace, env=env, stdin="explain\x00this")
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 2, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["error_type"] == "invalid_input" and "NUL byte" in envelope["error"]
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and "prompt on stdin" in lines[0] and "NUL" in lines[0], lines


def test_a_stdin_that_never_ends_is_waited_for_no_longer_than_the_run_s_timeout(workspace, home, tmp_path):
    """`producer | waaah run -` where the producer wrote part of a prompt and hangs: the run's
    --timeout bounds the wait for the prompt's end too (one line, exit 2, an envelope)."""
    fake_claude(tmp_path / "bin")
    read_end, write_end = os.pipe()
    os.write(write_end, b"half a prompt")  # and the writer keeps it open
    began = time.monotonic()
    try:
        done = subprocess.run(
            [WAAAH, "run", "-", "--agent", "claude", "--timeout", "2"],
            cwd=workspace,
            env=run_env(home, tmp_path / "bin"),
            stdin=read_end,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 2 and time.monotonic() - began < 30, (done.returncode, done.stderr)
    assert json.loads(done.stdout)["ok"] is False
    (line,) = stderr_lines(done.stderr)
    assert "did not end within --timeout 2 s" in line and "13 bytes read" in line, line


def test_invalid_utf8_on_stdin_is_replaced_with_a_warning(workspace, home, tmp_path):
    fake_claude(tmp_path / "bin")
    done = subprocess.run(
        [WAAAH, "run", "--agent", "claude"],
        cwd=workspace,
        env=run_env(home, tmp_path / "bin"),
        input=b"caf\xe9 au lait",
        capture_output=True,
        timeout=60,
    )
    out, err = done.stdout.decode(), done.stderr.decode()
    assert_no_traceback(out, err)
    assert done.returncode == 0, err
    envelope = json.loads(out)
    assert envelope["ok"] and "not valid UTF-8" in envelope["warnings"][0]
    lines = stderr_lines(err)
    assert len(lines) == 1 and "0xe9 at offset 3" in lines[0] and "U+FFFD" in lines[0], lines


def test_a_run_log_that_cannot_be_written_still_prints_the_answer(workspace, home, tmp_path):
    fake_claude(tmp_path / "bin")
    (workspace / ".waaah").write_text("in the way\n")
    done = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=run_env(home, tmp_path / "bin"))
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["response"] == "Hello from the fake model."
    assert str(workspace / ".waaah") in envelope["log_error"]
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and str(workspace / ".waaah") in lines[0] and "mv " in lines[0], lines


def test_a_state_folder_that_cannot_hold_the_breakers_still_prints_the_answer(workspace, home, tmp_path):
    fake_claude(tmp_path / "bin")
    blocked = tmp_path / "state"
    blocked.write_text("a file where the state folder should be\n")
    env = run_env(home, tmp_path / "bin", XDG_STATE_HOME=str(blocked))
    done = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["response"] == "Hello from the fake model."
    assert "breakers" in envelope["warnings"][0]
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and str(blocked) in lines[0] and "XDG_STATE_HOME" in lines[0], lines


KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n-----END OPENSSH PRIVATE KEY-----\n"
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB"


def recording_claude(folder: Path, seen: Path) -> None:
    """A `claude` on PATH that keeps what it was given (its arguments, its stdin) in ``seen``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "claude"
    stream = STREAMS / "answer.stdout"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{seen}'\ncat >> '{seen}'\ncat '{stream}'\n")
    script.chmod(0o755)


def test_the_workspace_s_context_file_is_not_followed_out_of_the_workspace(workspace, home, tmp_path):
    # A repository can commit `CONTEXT.md -> ~/.ssh/id_ed25519`: nobody named it, so the key
    # is not sent, and one line says why and how to send a file on purpose.
    secret = home / ".ssh" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text(KEY)
    (workspace / "CONTEXT.md").symlink_to(secret)
    seen = tmp_path / "seen.txt"
    recording_claude(tmp_path / "bin", seen)
    done = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=run_env(home, tmp_path / "bin"))
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["response"] == "Hello from the fake model."
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1, lines
    assert "CONTEXT.md was not read" in lines[0] and f"symlink to {secret}" in lines[0], lines
    assert f"--context {workspace / 'CONTEXT.md'}" in lines[0], lines
    assert KEY_BODY not in seen.read_text() and "hi" in seen.read_text()
    log = Path(envelope["log_path"]).read_text()
    assert KEY_BODY not in log and '"context": null' in log


def test_a_context_file_named_on_purpose_may_be_a_symlink_and_the_log_masks_a_key_in_it(
    workspace, home, tmp_path
):
    notes = tmp_path / "notes.md"
    notes.write_text(f"PROJECT-NOTE: deploy with make\n{KEY}")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "CONTEXT.md").write_text("INSIDE-NOTE\n")
    (workspace / "CONTEXT.md").symlink_to("docs/CONTEXT.md")  # inside the workspace: followed
    seen = tmp_path / "seen.txt"
    recording_claude(tmp_path / "bin", seen)
    env = run_env(home, tmp_path / "bin")
    inside = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=env)
    assert inside.returncode == 0 and not stderr_lines(inside.stderr), inside.stderr
    assert "INSIDE-NOTE" in seen.read_text()
    (workspace / "named.md").symlink_to(notes)
    done = run_waaah("run", "hi", "--agent", "claude", "--context", "named.md", cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0 and not stderr_lines(done.stderr), done.stderr
    assert "PROJECT-NOTE" in seen.read_text() and KEY_BODY in seen.read_text()  # the user asked for it
    log = Path(json.loads(done.stdout)["log_path"]).read_text()
    assert "PROJECT-NOTE" in log and KEY_BODY not in log  # ... and the run log masks the key


# ---------------------------------------------------------------------------------------------
# 6. Truthful endings, one workspace per session, live logs kept, one supervisor per agent id
# ---------------------------------------------------------------------------------------------


def test_saved_is_said_only_when_the_save_succeeded(workspace, home):
    proc = start_agent(workspace, clean_env(home))
    try:
        retry_until(lambda: started(workspace), timeout=20)
        folder = session_dirs(workspace)[-1]
        with read_only(folder):  # session.json can no longer be replaced
            out, err = stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_no_traceback(out, err)
    assert "could NOT be saved" in out and f"{folder.name} saved" not in out, out
    assert "Resume with" not in out


def test_a_session_of_another_workspace_is_not_resumed_here(workspace, home, tmp_path):
    elsewhere = tmp_path / "moved-away"
    put_session(workspace, json.dumps(a_state(workspace, workspace=str(elsewhere))))
    before = sorted(p.name for p in (workspace / ".waaah").iterdir())
    done = run_waaah("agent", "--start=simulated", "--resume", cwd=workspace, env=clean_env(home), timeout=20)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 7, done.stderr
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and str(elsewhere) in lines[0] and str(workspace) in lines[0], lines
    assert "without --resume" in lines[0]
    assert sorted(p.name for p in (workspace / ".waaah").iterdir()) == before  # nothing created
    assert len(session_dirs(workspace)) == 1


def test_log_pruning_keeps_the_logs_of_a_live_session(workspace, home):
    logs = workspace / ".waaah" / "logs"
    logs.mkdir(parents=True)
    names = [f"simulated-20000101-0000{n:02d}" for n in range(12)]
    for name in names:
        (logs / f"{name}.log").write_text("old\n")
        (logs / f"{name}.cast").write_text("{}\n")
    live = workspace / ".waaah" / "sessions" / "simulated-20000101-000000-live00"
    live.mkdir(parents=True)
    (live / "session.json").write_text(
        json.dumps(
            a_state(
                workspace,
                id=live.name,
                workflow="other",
                log_path=str(logs / f"{names[0]}.log"),
                cast_path=str(logs / f"{names[0]}.cast"),
            )
        )
    )
    with (live / "lock").open("w") as lock:  # its supervisor is alive
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = start_agent(workspace, clean_env(home))
        try:
            retry_until(lambda: len(session_dirs(workspace)) == 2 and started(workspace), timeout=20)
        finally:
            out, err = stop(proc)
    assert_no_traceback(out, err)
    assert (logs / f"{names[0]}.log").exists() and (logs / f"{names[0]}.cast").exists()
    assert not (logs / f"{names[1]}.log").exists()  # the old ones that are not live do go


def test_a_second_supervisor_of_the_same_agent_and_workflow_is_refused_with_the_pid(workspace, home):
    first = start_agent(workspace, clean_env(home))
    try:
        retry_until(lambda: started(workspace), timeout=20)
        second = run_waaah(
            "agent", "--start=simulated", "--no-nudge", cwd=workspace, env=clean_env(home), timeout=20
        )
    finally:
        out, err = stop(first)
    assert_no_traceback(second.stdout, second.stderr, out, err)
    assert second.returncode == 5, second.stderr
    lines = stderr_lines(second.stderr)
    assert len(lines) == 1 and f"pid {first.pid}" in lines[0] and "--as" in lines[0], lines
    assert len(session_dirs(workspace)) == 1
