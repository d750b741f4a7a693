"""gemini signed in with Google: the code prompt of a login without a browser, and an account
Google refuses (personal accounts moved to its Antigravity CLI on 2026-06-18).

The real gemini, offline: the model API and Google's Code Assist API are fakes on 127.0.0.1
(tests/doubles/fake_model.py, tests/doubles/fake_code_assist.py). The refusal is gemini's own
IneligibleTierError, thrown by its own code from the Code Assist answer; only the reason text
is the fake's (its end as reported: "... migrate to the Antigravity suite").
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.doubles.cli_homes import ScreenFeed, gemini_env
from tests.doubles.fake_code_assist import FakeCodeAssist, code_assist_env
from tests.doubles.fake_model import FakeModel, Text
from tests.e2e.conftest import with_cli_path, workspace_for
from tests.e2e.test_waaah_agent import spawn
from tests.runtime.helpers import WAAAH, events, state

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def google_home(tmp_path: Path, model_url: str) -> dict[str, str]:
    """A home where "Sign in with Google" was chosen (gemini's default), with no key."""
    env = with_cli_path(gemini_env(tmp_path / "home", model_url, api_key=None))
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    data = json.loads(settings.read_text(encoding="utf-8"))
    data["security"]["auth"]["selectedType"] = "oauth-personal"
    settings.write_text(json.dumps(data), encoding="utf-8")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


def waaah_run(ws: Path, env: dict[str, str], prompt: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [WAAAH, "run", prompt, "--agent", "gemini"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    return done.returncode, json.loads(done.stdout or "{}"), done.stderr


def test_waaah_run_where_sign_in_with_google_was_chosen_is_a_login_failure(tmp_path):
    ws = workspace_for(tmp_path)
    with FakeModel([], default=Text("Hello.")) as model:
        code, out, err = waaah_run(ws, google_home(tmp_path, model.url), "Say hello")
    print(json.dumps({k: out.get(k) for k in ("error_type", "recoverable", "error")}))
    assert code == 6, (out, err)
    # Another CLI has its own login: worth a fallback, so the caller's hint says recoverable.
    assert out["error_kind"] == "auth" and out["error_type"] == "provider_error"
    assert out["recoverable"] is True
    assert "FatalAuthenticationError: Manual authorization is required" in json.dumps(out)
    assert model.main_requests() == []


def test_waaah_run_with_a_refused_google_account_says_what_works_instead(tmp_path):
    ws = workspace_for(tmp_path)
    with FakeModel([], default=Text("Hello.")) as model, FakeCodeAssist() as code_assist:
        env = {**google_home(tmp_path, model.url), **code_assist_env(code_assist.url)}
        code, out, err = waaah_run(ws, env, "Say hello")
        asked = [r["method"] for r in code_assist.requests]
    assert code == 6, (out, err)
    # Another CLI has its own login: worth a fallback, so the caller's hint says recoverable.
    assert out["error_kind"] == "auth" and out["error_type"] == "provider_error"
    assert out["recoverable"] is True
    said = json.dumps(out)
    assert "IneligibleTierError" in said and "Antigravity CLI (agy), which waaah cannot supervise" in said
    assert "GEMINI_API_KEY" in said
    assert "loadCodeAssist" in asked and model.main_requests() == []
    # One attempt: a refused account is not retried, nor is another model tried for it.
    assert len(out.get("attempts", [1])) == 1, out.get("attempts")


def test_agent_with_a_refused_google_account_stops_once_with_the_login_exit_code(tmp_path):
    ws = workspace_for(tmp_path)
    with FakeModel([], default=Text("Hello.")) as model, FakeCodeAssist() as code_assist:
        env = {**google_home(tmp_path, model.url), **code_assist_env(code_assist.url)}
        child = spawn(ws, env, "--start=gemini", "--no-mcp")
        child.expect(pexpect.EOF, timeout=120)
        child.close()
        out = child.before.decode("utf-8", "replace")
    assert child.exitstatus == 6, out[-2000:]
    assert "gemini cannot log in (Failed to sign in. Message: This Google account" in out
    assert "Antigravity CLI (agy), which waaah cannot supervise" in out and "GEMINI_API_KEY" in out
    names = [e["event"] for e in events(ws)]
    assert names.count("start") == 1 and "restart" not in names, names  # one stop, no restart loop
    assert "login-refused" in names
    assert state(ws)["status"] == "login-required"
    assert model.main_requests() == []


def test_the_authorization_code_prompt_is_a_login_wait(tmp_path):
    """ "Sign in with Google" with no browser: gemini prints an OAuth URL and waits for the code.
    A person must finish it: waaah types nothing, keeps the title and the status on the login,
    and the night's report counts the wait as "needs someone"."""
    ws = workspace_for(tmp_path)
    with FakeModel([], default=Text("Hello.")) as model:
        env = google_home(tmp_path, model.url)
        child = spawn(ws, env, "--start=gemini", "--no-mcp")
        screen = ScreenFeed(120, 40)

        def look() -> str:
            try:
                screen.feed(child.read_nonblocking(65536, timeout=0.2))
            except pexpect.TIMEOUT:
                pass
            return screen.view().text

        deadline = time.monotonic() + 90
        while "Enter the authorization code:" not in look() or not [
            e for e in events(ws) if e["event"] == "login-wait"
        ]:
            assert time.monotonic() < deadline and child.isalive(), screen.view().text[-1500:]
        started = time.monotonic()
        while time.monotonic() - started < 6:  # waaah neither types nor moves on meanwhile
            look()
        names = [e["event"] for e in events(ws)]
        assert "login-done" not in names and "delivery" not in names and "stop" not in names, names
        (wait,) = [e for e in events(ws) if e["event"] == "login-wait"]
        assert wait["screen"] == "Enter the authorization code:"
        assert "log in to gemini" in screen.view().title
        status = subprocess.run(
            [WAAAH, "status"], cwd=ws, env=env, capture_output=True, text=True, timeout=60
        )
        assert "screen state login" in status.stdout, status.stdout
        assert model.main_requests() == []
        child.send("\x03")
        child.expect("save and exit")
        child.send("s")
        child.expect(pexpect.EOF, timeout=30)
    # The night's report: the wait at the code prompt, up to the end, is time that needed someone.
    report = subprocess.run([WAAAH, "report"], cwd=ws, env=env, capture_output=True, text=True, timeout=60)
    print(report.stdout)
    assert "needs someone" in report.stdout, report.stdout
