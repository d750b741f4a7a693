"""gemini 0.61.0 loses a resumed conversation (upstream issue 29198), and waaah keeps it.

The real gemini, offline against the fake model API. A resume in a later minute than the
session began leaves a file of that minute beside the conversation's, holding none; the next
start of gemini for any other session in the folder (a plain `gemini`, a `waaah run`,
`--list-sessions`) then removes every file of the resumed session. waaah keeps a copy of the
session's files before each native resume, sets such a file aside, and puts back what gemini
removed or emptied (runtime/session_keep.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pexpect
import pytest

from tests.doubles.cli_homes import CliPty, cli_bin, gemini_env, gemini_idle
from tests.doubles.fake_model import FakeModel, Rule, Text
from tests.e2e.conftest import with_cli_path, workspace_for
from tests.e2e.test_waaah_agent import continue_requests, save_and_exit, spawn
from tests.runtime.helpers import events, pump_until, state

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def session_files(home: Path, session_id: str) -> list[Path]:
    return sorted(home.glob(f".gemini/tmp/*/chats/session-*-{session_id[:8]}.jsonl"))


def next_minute(first: Path) -> None:
    """Wait until the minute in which the session began (its file's name) is over: at night a
    resume always starts in a later minute than the session did."""
    began = first.name.split("-", 1)[1][: len("2026-11-25T20-48")]
    while time.strftime("%Y-%m-%dT%H-%M", time.gmtime()) == began:
        time.sleep(0.5)


def quit_gemini(pty: CliPty) -> None:
    """/quit, typed once the box is quiet; Enter again if the first one only closed the
    completion list it opens under the box."""
    pty.settle()
    pty.keys("/quit")
    pty.wait(lambda s: "> /quit" in s.text, "/quit in the input box")
    for _ in range(3):
        pty.enter(1.0)
        with contextlib.suppress(AssertionError):
            pty.wait_exit(20)
            return
    pty.wait_exit(1)


def test_gemini_0_61_removes_a_resumed_session_left_before_any_turn(tmp_path):
    """The CLI's own behaviour, without waaah: resume, exit before any turn, start again."""
    ws = workspace_for(tmp_path)
    home = tmp_path / "home"
    sid = str(uuid.uuid4())
    gemini = str(cli_bin("gemini"))
    with FakeModel([Rule(marker="HELLO", reply=Text("Hi there."))]) as fake:
        env = gemini_env(home, fake.url)
        with CliPty([gemini, "--session-id", sid], env, ws) as pty:
            pty.wait(gemini_idle, "idle", 90)
            pty.settle()
            pty.paste("HELLO say hi")
            pty.enter()
            pty.wait(lambda s: "Hi there." in s.text and gemini_idle(s), "the reply", 90)
            quit_gemini(pty)
        (first,) = session_files(home, sid)
        next_minute(first)
        with CliPty([gemini, "--resume", sid], env, ws) as pty:
            pty.wait(gemini_idle, "idle after the resume", 90)
            quit_gemini(pty)  # no turn
        files = session_files(home, sid)
        print("after the resume:", [(f.name, f.stat().st_size) for f in files])
        assert len(files) == 2 and first in files  # a file of the resume's minute beside it
        other = another_session(gemini, ws, env)
        assert other.returncode == 0, other.stderr
        assert session_files(home, sid) == [], "another start of gemini removed every file of the session"
        again = subprocess.run(
            [gemini, "--resume", sid, "-p", "HELLO again", "--output-format", "json"],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    print("the resume after it:", again.returncode, again.stderr.strip()[-300:])
    assert again.returncode != 0 and "Error resuming session" in again.stderr


def another_session(gemini: str, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """gemini started for a session of its own in the same folder, as a user or `waaah run` does."""
    return subprocess.run(
        [gemini, "-p", "HELLO there", "--output-format", "json"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_waaah_keeps_a_resumed_gemini_session_across_starts(tmp_path):
    """Start, save and exit; resume in a later minute, gemini killed before any turn; gemini
    for another session in the same folder; gemini --resume: the conversation is still there
    and the model sees it. Without the keeper the other start removes the session's files."""
    ws = workspace_for(tmp_path)
    rules = [
        Rule(marker="stay in the loop", reply=Text("FIRST-TURN-DONE")),
        Rule(marker="HELLO", reply=Text("Hi there.")),
    ]
    with FakeModel(rules, default=Text("OK")) as model:
        env = with_cli_path(gemini_env(tmp_path / "home", model.url))
        child = spawn(ws, env, "--start=gemini", "--no-mcp")
        child.expect("FIRST-TURN-DONE")
        native = state(ws)["native_session_id"]
        assert save_and_exit(child) == 0
        home = tmp_path / "home"
        (first,) = session_files(home, native)
        next_minute(first)

        # Resumed, and gemini dies once it opened its file of this minute, before any turn (a
        # crash; --restart-budget 0: no restart).
        child = spawn(ws, env, "--start=gemini", "--no-mcp", "--resume", "--restart-budget", "0")
        pump_until(child, lambda: starts(ws) == 2 and len(session_files(home, native)) == 2, 90)
        os.kill(state(ws)["agent_pid"], signal.SIGKILL)
        child.expect(pexpect.EOF, timeout=60)
        child.close()
        assert not continue_requests(model)
        kept = [e for e in events(ws) if e["event"] == "session-kept"]
        aside = [e for e in events(ws) if e["event"] == "session-set-aside"]
        assert kept and kept[-1]["files"] == [str(first)], kept
        # gemini's file of the resume's minute, holding no conversation, is out of its way.
        assert aside and Path(aside[-1]["to"]).parent.name == "set-aside", aside
        assert Path(aside[-1]["to"]).is_file() and not Path(aside[-1]["file"]).exists()
        assert session_files(home, native) == [first]

        # gemini run for another session in the same folder: it removes nothing of this one now.
        assert another_session(str(cli_bin("gemini")), ws, env).returncode == 0
        assert session_files(home, native) == [first]

        # gemini's own --resume carries the conversation on: the model sees both turns.
        later = subprocess.run(
            [str(cli_bin("gemini")), "--resume", native, "-p", "HELLO again", "--output-format", "json"],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert later.returncode == 0, later.stderr
        asked = [r for r in model.main_requests() if "HELLO again" in r["last_user_text"]]
        history = json.dumps(asked[-1]["body"])
        assert "FIRST-TURN-DONE" in history, "the conversation carries on"


def starts(ws: Path) -> int:
    return sum(e["event"] == "start" for e in events(ws))


def test_waaah_run_keeps_a_resumed_gemini_session(tmp_path):
    """`waaah run --session` resumes with gemini's own --resume: the file that resume leaves is
    set aside, so gemini for another session does not remove the conversation."""
    from tests.e2e.test_waaah_run import both_env, records, rules, waaah_run

    ws = workspace_for(tmp_path)
    with FakeModel([*rules(), Rule(marker="HELLO", reply=Text("Hi there."))]) as model:
        env = both_env(tmp_path, ws, model.url)
        code, first, err = waaah_run(ws, env, "ANSWER-MARKER remember PURPLE-FROG", "--agent", "gemini")
        assert code == 0, err
        native = first["session_id"]
        (began,) = session_files(tmp_path / "home", native)
        next_minute(began)
        code, second, err = waaah_run(ws, env, "AGAIN-MARKER what did I say?", "--session", native)
        assert code == 0, err
        aside = records(first["log_path"], "session_set_aside")
        assert aside and aside[0]["agent"] == "gemini" and Path(aside[0]["to"]).is_file(), aside
        assert any("would remove the whole session" in w for w in second["warnings"]), second["warnings"]
        assert session_files(tmp_path / "home", native) == [began]
        assert another_session(str(cli_bin("gemini")), ws, env).returncode == 0
        code, third, err = waaah_run(ws, env, "AGAIN-MARKER and before that?", "--session", native)
        assert code == 0, (err, third)
        assert "PURPLE-FROG" in json.dumps(model.main_requests()[-1]["body"])
