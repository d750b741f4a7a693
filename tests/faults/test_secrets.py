"""Secrets never reach a file: what the agent prints, what is typed into a key dialog, what a CLI is given.

Through the real `waaah` command over the simulated agent (and a scripted fake `claude` for
`waaah run`): every file under .waaah/ (except the simulated CLI's own transcript, which stands
for the real CLIs' files in ~/.gemini or ~/.claude) is searched for each secret afterwards.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from pathlib import Path

import pexpect

from tests.faults.conftest import assert_no_traceback, clean_env, run_waaah
from tests.runtime.helpers import (
    delivered,
    retry_until,
    session_dirs,
    sim_env,
    sim_messages,
    spawn_waaah,
    state,
)
from waaah_agent.runtime.supervise.logfiles import replay

GH_ENV = "ghp_" + "E" * 36  # GITHUB_TOKEN of the user's environment (a known value)
PASSWORD = "correct-horse-battery"  # MY_SERVICE_PASSWORD (a known value, no shape)
BEARER = "abcdefghij0123456789KLMNOP"  # printed after "Bearer " (a shape)
GH_SHAPED = "ghp_" + "S" * 36  # a GitHub token shape nobody told us about
TYPED_KEY = "AIzaTYPED-key-for-the-dialog-0123456789"  # typed into the key-entry screen
ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b.|[\r\x08]")


def our_files(ws: Path) -> list[Path]:
    root = ws / ".waaah"
    return [p for p in root.rglob("*") if p.is_file() and "simulated" not in p.relative_to(root).parts]


def test_secrets_printed_or_typed_during_a_session_are_in_no_file_we_write(workspace, fake_home):
    env = sim_env(fake_home, GITHUB_TOKEN=GH_ENV, MY_SERVICE_PASSWORD=PASSWORD)
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=env)
    retry_until(lambda: session_dirs(workspace) and delivered(workspace))
    sid = state(workspace)["native_session_id"]
    retry_until(lambda: sim_messages(workspace, sid, role="model"))  # it answered the workflow: idle
    child.send(f"use Bearer {BEARER} then {GH_SHAPED} {GH_ENV} {PASSWORD}")
    time.sleep(0.3)  # a person types, then presses Enter
    child.send("\r")
    retry_until(lambda: len(sim_messages(workspace, sid, role="model")) >= 2)
    child.send("/apikey")
    time.sleep(0.3)
    child.send("\r")
    child.expect("enter your API key")
    for ch in TYPED_KEY:  # key by key, each echoed by the dialog
        child.send(ch)
        time.sleep(0.01)
    child.send("\r")
    child.expect("API key saved")
    child.send("\x03")
    child.expect("save and exit")
    child.send("s")
    child.expect(pexpect.EOF, timeout=15)

    files = our_files(workspace)
    assert {p.suffix for p in files} >= {".cast", ".log", ".json", ".jsonl"}
    for path in files:
        raw = path.read_bytes()
        plain = ESCAPES.sub(b"", raw)
        for secret in (GH_ENV, PASSWORD, BEARER, GH_SHAPED, TYPED_KEY):
            assert secret.encode() not in raw and secret.encode() not in plain, f"{secret} in {path}"
    cast = next(p for p in files if p.suffix == ".cast")
    shown = ESCAPES.sub(b"", replay(cast))
    assert b"[REDACTED]" in shown and b"use Bearer" in shown  # masked, not dropped
    assert TYPED_KEY[:12].encode() not in shown  # not even a part of the typed key
    assert (
        "[input hidden]" in cast.read_text()
        and "[input hidden]" in next(p for p in files if p.suffix == ".log").read_text()
    )


def test_waaah_folder_is_private_and_never_committed(workspace, fake_home):
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=sim_env(fake_home))
    retry_until(lambda: session_dirs(workspace) and delivered(workspace))
    child.send("\x03")
    child.expect("save and exit")
    child.send("s")
    child.expect(pexpect.EOF, timeout=15)
    root = workspace / ".waaah"
    assert (root / ".gitignore").read_text().strip().endswith("*")
    subprocess.run(["git", "add", "-A"], cwd=workspace, check=True)  # what an agent does all the time
    staged = subprocess.run(
        ["git", "status", "--porcelain"], cwd=workspace, capture_output=True, text=True
    ).stdout
    assert ".waaah" not in staged
    for path in root.rglob("*"):
        if "simulated" in path.relative_to(root).parts:
            continue  # the simulated CLI's own files
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"


FAKE_CLAUDE = """#!/usr/bin/env python3
import json, os, sys
names = sorted(k for k in os.environ if k.endswith(("_KEY", "_TOKEN", "_SECRET")) or k.startswith(("AWS_", "OPENAI_")))
if os.environ.get("FAKE_FAIL"):
    sys.stderr.write("API Error: 401 invalid x-api-key sk-ant-api03-" + "Z" * 30 + "\\n")
    sys.exit(1)
sid = sys.argv[sys.argv.index("--session-id") + 1] if "--session-id" in sys.argv else "s"
print(json.dumps({"type": "system", "subtype": "init", "session_id": sid, "model": "fake"}))
msg = {"id": "m1", "role": "assistant", "model": "fake", "content": [{"type": "text", "text": " ".join(names)}],
       "usage": {"input_tokens": 1, "output_tokens": 1}}
print(json.dumps({"type": "assistant", "message": msg, "session_id": sid}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": " ".join(names),
                  "session_id": sid, "usage": {"input_tokens": 1, "output_tokens": 1}}))
"""


def fake_claude(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(FAKE_CLAUDE)
    (bin_dir / "claude").chmod(0o755)
    return bin_dir


def test_waaah_run_gives_a_cli_its_own_keys_and_no_one_else_s(workspace, home, tmp_path):
    env = clean_env(
        home,
        PATH=f"{fake_claude(tmp_path)}:{os.environ['PATH']}",
        ANTHROPIC_API_KEY="sk-ant-own-key-0123456789",
        GEMINI_API_KEY="AIza-other-provider-0123456789012345",
        OPENAI_API_KEY="sk-other-provider-0123456789",
        AWS_SECRET_ACCESS_KEY="aws-secret-0123456789",
        GITHUB_TOKEN=GH_ENV,
        WAAAH_API_KEY="waaah-key-0123456789",
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    done = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    answer = json.loads(done.stdout)["response"].split()
    assert "ANTHROPIC_API_KEY" in answer and "WAAAH_API_KEY" in answer
    for withheld in ("GEMINI_API_KEY", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"):
        assert withheld not in answer
    passed = run_waaah("run", "hi", "--agent", "claude", "--pass-env", "AWS_", cwd=workspace, env=env)
    assert "AWS_SECRET_ACCESS_KEY" in json.loads(passed.stdout)["response"].split()
    env["WAAAH_PASS_ENV"] = "GITHUB_TOKEN"
    assert (
        "GITHUB_TOKEN"
        in json.loads(run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=env).stdout)["response"]
    )


def test_a_failing_run_s_key_is_in_no_log_breaker_or_saved_response(workspace, home, tmp_path):
    state_home = tmp_path / "state"
    env = clean_env(
        home,
        PATH=f"{fake_claude(tmp_path)}:{os.environ['PATH']}",
        FAKE_FAIL="1",
        WAAAH_PASS_ENV="FAKE_",  # the fake CLI's own switch (a CLI gets only what it needs)
        XDG_STATE_HOME=str(state_home),
    )
    for _ in range(3):
        done = run_waaah("run", "hi", "--agent", "claude", "--format", "llm", cwd=workspace, env=env)
        assert_no_traceback(done.stdout, done.stderr)
        assert "sk-ant-api03-" + "Z" * 30 not in done.stdout + done.stderr
    streamed = run_waaah("run", "hi", "--agent", "claude", "--stream", cwd=workspace, env=env)
    assert_no_traceback(streamed.stdout, streamed.stderr)
    assert streamed.stdout.count("\n") >= 2 and "Z" * 30 not in streamed.stdout + streamed.stderr
    written = [*our_files(workspace), *[p for p in state_home.rglob("*") if p.is_file()]]
    assert any(p.name == "claude.json" and p.parent.name == "breakers" for p in written)
    for path in written:
        assert b"Z" * 30 not in path.read_bytes(), path
    doctor = run_waaah("doctor", "--agent", "claude", cwd=workspace, env=env)
    assert b"Z" * 30 not in (doctor.stdout + doctor.stderr).encode()


def test_a_flood_of_code_and_coloured_frames_is_recorded_whole_with_its_secrets_masked(
    workspace, fake_home, tmp_path
):
    """What agents print in a flood, through the real relay: source code naming keys and tokens
    (an assignment, a Bearer header) and the user's key drawn a character at a time between
    colours, as a TUI's frames draw it. The record holds every line; no file any of the secrets,
    whole or 8 of their characters in a row."""
    assigned = "s3cr3t-v4lue-0123456789"
    spread = "".join(f"\x1b[3{i % 8}m{c}" for i, c in enumerate(GH_ENV)) + "\x1b[0m"
    block = "".join(
        f"def handler_{i}(request):\n"
        f'    api_key = "{assigned}"\n'
        f"    headers = {{'Authorization': 'Bearer {BEARER}'}}\n"
        "    total_tokens = usage.get('output_tokens', 0)  # the token count\n"
        f"\x1b[2m{spread} shown in colour {i}\n"
        for i in range(100)
    ).encode()
    flood = tmp_path / "flood.txt"
    flood.write_bytes(block)
    env = sim_env(fake_home, GITHUB_TOKEN=GH_ENV, SIM_MODE="blast", SIM_MB="2", SIM_BLAST_FROM=str(flood))
    child = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env, timeout=120)
    child.expect(rb"BLAST-END (\d+) ", timeout=120)
    blocks = int(child.match.group(1)) // len(block)
    child.expect(pexpect.EOF, timeout=30)

    files = our_files(workspace)
    for path in files:
        raw = path.read_bytes()
        plain = ESCAPES.sub(b"", raw)
        for secret in (GH_ENV, assigned, BEARER):
            for part in (secret[:8], secret[-8:], secret[8:16]):
                assert part.encode() not in raw and part.encode() not in plain, (
                    f"{part} of {secret} in {path}"
                )
    cast = next(p for p in files if p.suffix == ".cast")
    shown = ESCAPES.sub(b"", replay(cast))
    assert blocks >= 2
    assert shown.count(b"    total_tokens = usage.get('output_tokens', 0)  # the token count") == 100 * blocks
    assert shown.count(b'    api_key = "[REDACTED]') == 100 * blocks
    assert shown.count(b"'Authorization': 'Bearer [REDACTED]") == 100 * blocks
    drawn = re.findall(rb"\n([^\n]*) shown in colour", shown)
    assert len(drawn) == 100 * blocks
    for key in drawn:  # masked (in two where a read cut it), at most 7 of its characters in a row
        assert b"[REDACTED]" in key and max(map(len, key.split(b"[REDACTED]"))) < 8, key


# What a terminal shows nothing of, between each two characters of a key (it shows the key).
FILLERS = ["\u200b", "\u2060", "\ufeff", "\u00ad", "\u0301", "\x1bP+q\x1b\\", "\x1b_Gi=1\x07", "\x00", "\x07"]


def test_a_key_with_what_shows_nothing_between_its_characters_is_in_no_file(workspace, fake_home, tmp_path):
    """Through the real relay: the user's key printed with a zero width, a combining mark, a DCS or
    APC string, a NUL or a BEL between each two characters (the terminal shows the key, marked or
    not). Every line is recorded, the key masked in the .cast and in the text log."""
    block = "".join(f"KEY{i} {filler.join(GH_ENV)} end\n" for i, filler in enumerate(FILLERS)).encode()
    flood = tmp_path / "fillers.txt"
    flood.write_bytes(block)
    env = sim_env(fake_home, GITHUB_TOKEN=GH_ENV, SIM_MODE="blast", SIM_MB="0.05", SIM_BLAST_FROM=str(flood))
    child = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env, timeout=120)
    child.expect(rb"BLAST-END (\d+) ", timeout=120)
    blocks = int(child.match.group(1)) // len(block)
    child.expect(pexpect.EOF, timeout=30)

    shows_nothing = re.compile(
        rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]P_X^][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b.|[\x00-\x08\r]"
        + "|[\u200b\u2060\ufeff\u00ad\u0301]".encode()
    )
    files = our_files(workspace)
    for path in files:
        shown = shows_nothing.sub(b"", path.read_bytes())
        for at in range(len(GH_ENV) - 7):
            assert GH_ENV[at : at + 8].encode() not in shown, f"{GH_ENV[at : at + 8]} in {path}"
    cast = next(p for p in files if p.suffix == ".cast")
    replayed = replay(cast)
    assert blocks >= 2
    for i in range(len(FILLERS)):
        # masked whole where no read cut the key; where one did, in two masks
        assert replayed.count(f"KEY{i} [REDACTED] end\r\n".encode()) >= blocks - 2, i
    log = next(p for p in files if p.suffix == ".log").read_text()
    for i in range(len(FILLERS)):
        assert f" KEY{i} [REDACTED] end\n" in log, i
