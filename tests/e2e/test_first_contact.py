"""A newcomer's first night: `make run` from the checkout, the real pinned gemini, a fresh HOME.

Offline: a fake model API and a WAAAH server double on 127.0.0.1. The person at the terminal
answers gemini's own first-start dialogs (trust this folder, how to authenticate, the key) with
Enter, as its screen suggests; waaah types nothing into them, waits, and gives the workflow once
gemini is ready. With no key at all, waaah waits at gemini's auth dialog instead of stopping it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pexpect
import pytest

from tests.doubles.cli_homes import REPO, ScreenFeed, base_env
from tests.doubles.fake_model import FakeModel, Text
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import workspace_for
from tests.runtime.helpers import events, pump_until, state

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

MARKER = "stay in the loop"  # a phrase of the bundled waaah-orc workflow
DIALOGS = (
    "Do you trust the files in this folder",
    "How would you like to authenticate",
    "Enter Gemini API Key",
)
ROWS, COLS = 35, 120  # a tmux pane


def newcomer_env(home: Path, model_url: str, server_url: str, key: str | None) -> dict[str, str]:
    """A fresh HOME, nothing of waaah's or gemini's configured, gemini not on PATH (make finds it)."""
    env = {k: v for k, v in base_env(home).items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".cache/clis" not in p)
    env.update(GOOGLE_GEMINI_BASE_URL=model_url, WAAAH_SERVER_URL=server_url)
    if key is not None:
        env["GEMINI_API_KEY"] = key
    return env


class Person:
    """Reads the terminal like a person, answers each first-start dialog of gemini once with Enter."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child, self.screen, self.answered = child, ScreenFeed(COLS, ROWS), set()

    def look(self) -> str:
        try:
            self.screen.feed(self.child.read_nonblocking(65536, timeout=0.2))
        except pexpect.TIMEOUT:
            pass
        return self.screen.view().text

    def answer_dialogs(self) -> None:
        text = self.look()
        for dialog in DIALOGS:
            if dialog in text and dialog not in self.answered:
                self.answered.add(dialog)
                time.sleep(0.5)  # reads it
                self.child.send("\r")


def make_run(ws: Path, env: dict[str, str]) -> pexpect.spawn:
    child = pexpect.spawn(
        "make",
        ["-s", "-C", str(REPO), "run", f"ARGS=--workspace {ws}"],
        env=env,
        dimensions=(ROWS, COLS),
        timeout=60,
    )
    child.delaybeforesend = None
    return child


def test_make_run_with_a_key_and_nothing_else_reaches_a_working_agent(tmp_path):
    ws = workspace_for(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    with FakeModel([], default=Text("REGISTERED-AND-WAITING")) as model, WaaahServer() as server:
        child = make_run(ws, newcomer_env(home, model.url, server.url, key="newcomer-key-0123456789"))
        person = Person(child)
        deadline = time.monotonic() + 150
        while not any(MARKER in r["last_user_text"] for r in model.main_requests()):
            assert time.monotonic() < deadline, person.look()[-2000:]
            assert child.isalive(), person.look()[-2000:]
            person.answer_dialogs()
        pump_until(
            child, lambda: any(e["event"] == "delivery" and e["phase"] == "confirmed" for e in events(ws))
        )
        names = [e["event"] for e in events(ws)]
        print(f"gemini's first-start dialogs the person answered: {sorted(person.answered)}")
        if "login-wait" in names:  # gemini asked how to authenticate: waaah waited for the person
            assert "login-done" in names and names.index("login-wait") < names.index("login-done")
        assert "stop" not in names
        assert state(ws)["workflow_delivered"] is True
        assert sum(MARKER in r["last_user_text"] for r in model.main_requests()) == 1
        child.send("\x03")
        child.expect("save and exit")
        child.send("s")
        child.expect(pexpect.EOF, timeout=30)
        out = child.before.decode(errors="replace")
        assert "Resume with: " in out and f"{REPO}/.venv/bin/waaah agent --start=gemini" in out


def test_with_no_key_waaah_waits_at_gemini_s_auth_dialog_instead_of_stopping_it(tmp_path):
    ws = workspace_for(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    with FakeModel([], default=Text("OK")) as model, WaaahServer() as server:
        child = make_run(ws, newcomer_env(home, model.url, server.url, key=None))
        person = Person(child)
        deadline = time.monotonic() + 90
        while not any(e["event"] == "login-wait" for e in (events(ws) if state_exists(ws) else [])):
            assert time.monotonic() < deadline, person.look()[-2000:]
            text = person.look()
            if DIALOGS[0] in text and DIALOGS[0] not in person.answered:  # trusts the folder, no further
                person.answered.add(DIALOGS[0])
                child.send("\r")
        started = time.monotonic()
        while time.monotonic() - started < 8:  # waaah neither types nor stops meanwhile
            text = person.look()
        assert child.isalive() and "How would you like to authenticate" in text
        assert "log in to gemini" in person.screen.view().title
        names = [e["event"] for e in events(ws)]
        assert "stop" not in names and not [e for e in events(ws) if e["event"] == "delivery"]
        assert model.main_requests() == []
        child.send("\x03")
        child.expect("save and exit")
        child.send("s")
        child.expect(pexpect.EOF, timeout=30)


def state_exists(ws: Path) -> bool:
    return any((ws / ".waaah" / "sessions").glob("*/events.jsonl"))
