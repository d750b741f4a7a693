"""A newcomer's first night: `make run` from the checkout, the real pinned gemini, a fresh HOME.

Offline: a fake model API and a WAAAH server double on 127.0.0.1. The person at the terminal
answers gemini's own first-start dialogs (trust this folder, how to authenticate, the key) with
Enter, as its screen suggests; waaah types nothing into them, waits, and gives the workflow once
gemini is ready. With no key at all, waaah waits at gemini's auth dialog instead of stopping it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

from tests.doubles.cli_homes import REPO, ScreenFeed, base_env
from tests.doubles.fake_model import FakeModel, Text
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import workspace_for
from tests.runtime.helpers import WAAAH as WAAAH_BIN
from tests.runtime.helpers import events, pump_until, retry_until, state

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
    # What the person chose in gemini's dialogs is in their own ~/.gemini, as gemini alone would
    # have left it; the waaah entry and the run's switches are not.
    user = home / ".gemini"
    print(f"the user's ~/.gemini after the night: {sorted(os.listdir(user))}")
    settings = json.loads((user / "settings.json").read_text()) if (user / "settings.json").exists() else {}
    assert "waaah" not in settings.get("mcpServers", {}) and "disableLoopDetection" not in str(settings)
    if DIALOGS[1] in person.answered:
        assert settings["security"]["auth"]["selectedType"] == "gemini-api-key", settings
    if DIALOGS[0] in person.answered:
        assert str(ws) in (user / "trustedFolders.json").read_text()
    assert not [p for p in user.iterdir() if p.is_symlink()]
    assert not list((home / ".local" / "state" / "waaah-agent" / "homes").glob("*"))


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


def test_an_address_and_key_typed_once_are_kept_for_the_next_unattended_start(tmp_path):
    """No server configured anywhere: waaah asks at the terminal (the key not echoed), the run
    works with them, and the next start with nobody at the terminal uses them again. The key
    lands in a 0600 file of ours and in no file of gemini's."""
    from tests.e2e.test_waaah_agent import cli_env, spawn

    key = "typed-waaah-key-0123456789"
    ws = workspace_for(tmp_path)
    home = tmp_path / "home"
    with FakeModel([], default=Text("OK")) as model, WaaahServer(api_key=key) as server:
        env = cli_env("gemini", home, ws, model.url)
        env.pop("WAAAH_SERVER_URL", None)
        env.pop("WAAAH_API_KEY", None)
        child = spawn(ws, env, "--start=gemini")
        child.expect_exact("WAAAH server address [http://localhost:3456]: ")
        child.sendline(server.url)
        child.expect_exact("WAAAH API key (optional, not shown, Enter for none): ")
        child.sendline(key)
        child.expect("kept the WAAAH server address and API key")
        pump_until(child, lambda: any(e["event"] == "server" for e in events(ws)), 60)
        (first,) = [e for e in events(ws) if e["event"] == "server"]
        assert first["ok"] is True, first
        child.send("\x03")
        child.expect("save and exit")
        child.send("s")
        child.expect(pexpect.EOF, timeout=30)
        kept = home / ".config" / "waaah-agent"
        assert (kept / "api-key").read_text() == key + "\n"
        assert (kept / "api-key").stat().st_mode & 0o777 == 0o600 and kept.stat().st_mode & 0o777 == 0o700
        assert (kept / "server").read_text() == server.url + "\n"
        assert key not in (home / ".gemini" / "settings.json").read_text()

        again = subprocess.Popen(
            [WAAAH_BIN, "agent", "--start=gemini"],
            cwd=ws,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            retry_until(lambda: len([e for e in all_events(ws) if e["event"] == "server"]) >= 2, timeout=60)
        finally:
            os.killpg(again.pid, signal.SIGTERM)
            out = again.communicate(timeout=30)[0].decode(errors="replace")
        second = [e for e in all_events(ws) if e["event"] == "server"][-1]
        assert second["ok"] is True and second["source"] == "the address typed at an earlier start", (
            second,
            out,
        )
        assert key not in out


def all_events(ws: Path) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for path in sorted((ws / ".waaah" / "sessions").glob("*/events.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(found, key=lambda e: str(e["ts"]))  # two sessions may start within one second
