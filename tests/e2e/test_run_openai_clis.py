"""`waaah run --agent codex|opencode` end to end: the installed `waaah` entry point drives the real
pinned CLI (installed by `scripts/install_clis.sh extra` into .cache/clis) against the fake
OpenAI API on 127.0.0.1, in a throwaway HOME / CODEX_HOME / XDG set-up and git workspace.

These CLIs are not part of the standard install (codex alone is ~400 MB): without them the tests
skip, naming the install command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.cli_homes import base_env, cli_bin
from tests.doubles.fake_openai import FAKE_KEY, FakeOpenAI
from tests.e2e.conftest import with_cli_path, workspace_for
from tests.envelope_schema import check

KEY_ENV = "FAKE_OPENAI_API_KEY"
MODEL = {"codex": "gpt-5.5", "opencode": "gpt-fake"}  # codex needs a slug from its own catalogue
ANSWER_TOKENS = {"input": 123, "output": 45, "cached": 7, "total": 168}
FIRST = "FAKE-ANSWER Say hello."
SECOND = "FAKE-ANSWER What did I ask you before?"
# Variables of the caller that would point a CLI (or waaah) elsewhere.
_SCRUB = ("OPENAI_", "CODEX_", "OPENCODE_", "WAAAH_")


def waaah_command() -> list[str]:
    entry = Path(sys.executable).parent / "waaah"
    return [str(entry)] if entry.exists() else [sys.executable, "-m", "waaah_agent.commands.app"]


@pytest.fixture(params=["codex", "opencode"])
def cli(request: pytest.FixtureRequest) -> str:
    """`make test` installs both: a missing install is a failure, never a skip (as for gemini/claude)."""
    cli_bin(str(request.param))  # raises with the install command when absent
    return str(request.param)


def cli_env(cli: str, root: Path, ws: Path, base_url: str) -> dict[str, str]:
    """A throwaway home and the CLI's config pointing at the fake (``base_url`` ends in /v1)."""
    home = root / "home"
    home.mkdir(parents=True)
    env = {k: v for k, v in base_env(home).items() if not k.startswith(_SCRUB)}
    env[KEY_ENV] = FAKE_KEY
    if cli == "codex":
        codex_home = root / "codex-home"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            f'model = "{MODEL["codex"]}"\n'
            'model_provider = "fake"\n'
            "check_for_update_on_startup = false\n\n"
            "[model_providers.fake]\n"
            'name = "Fake OpenAI"\n'
            f'base_url = "{base_url}"\n'
            f'env_key = "{KEY_ENV}"\n'
            'wire_api = "responses"\n\n'
            f'[projects."{ws}"]\n'
            'trust_level = "trusted"\n\n'
            "[features]\ndaemon_auto_start = false\n\n"
            "[analytics]\nenabled = false\n",
            encoding="utf-8",
        )
        env["CODEX_HOME"] = str(codex_home)
    else:
        config = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "model": f"fake/{MODEL['opencode']}",
            "small_model": f"fake/{MODEL['opencode']}",
            "provider": {
                "fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fake OpenAI",
                    "options": {"baseURL": base_url, "apiKey": f"{{env:{KEY_ENV}}}"},
                    "models": {MODEL["opencode"]: {"name": "GPT Fake"}},
                }
            },
            "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
        }
        path = Path(env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        env.update(OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1")
    return with_cli_path(env)


def waaah_run(args: list[str], env: dict[str, str], ws: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [*waaah_command(), "run", *args],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.stdout.strip(), f"no envelope; exit {proc.returncode}, stderr:\n{proc.stderr[-3000:]}"
    envelope: dict[str, Any] = json.loads(proc.stdout)
    assert proc.returncode == envelope["exit_code"], proc.stderr[-3000:]
    return envelope


def logged_requests(log: Path) -> list[dict[str, Any]]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [r for r in map(json.loads, lines) if r.get("kind") == "main"]


def test_answer_then_session_continues(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    log = tmp_path / "requests.jsonl"
    with FakeOpenAI(api_key=FAKE_KEY, log_path=log) as fake:
        env = cli_env(cli, tmp_path, ws, f"{fake.url}/v1")

        first = waaah_run([FIRST, "--agent", cli, "--timeout", "120"], env, ws)
        assert first["ok"], first
        assert first["agent"] == cli and first["response"] == "Hello from the fake model."
        assert {k: first["tokens"][k] for k in ANSWER_TOKENS} == ANSWER_TOKENS
        session = first["session_id"]
        assert session and session != first["log_id"]  # the CLI's own id; the log id is ours
        assert Path(first["log_path"]).name == f"{first['log_id']}.jsonl"
        # The prompt reaches the model exactly as written (opencode takes it on stdin).
        assert logged_requests(log)[-1]["user_texts"] == [FIRST]

        second = waaah_run([SECOND, "--session", session, "--timeout", "120"], env, ws)
        assert second["ok"], second
        assert second["agent"] == cli and second["session_id"] == session
        assert second["log_id"] == first["log_id"] and second["log_path"] == first["log_path"]
        # This run's usage only (codex reports the thread's running total; waaah takes off the
        # earlier run's total from the log).
        assert {k: second["tokens"][k] for k in ANSWER_TOKENS} == ANSWER_TOKENS
        # The CLI's own resume: the model sees the earlier turn.
        assert logged_requests(log)[-1]["user_texts"] == [FIRST, SECOND]

        # The log id continues the same session too.
        third = waaah_run([SECOND, "--session", first["log_id"], "--timeout", "120"], env, ws)
        assert third["ok"] and third["session_id"] == session, third
        assert logged_requests(log)[-1]["user_texts"] == [FIRST, SECOND, SECOND]


def test_reasoning_tokens_used_and_stream_lines(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeOpenAI(api_key=FAKE_KEY) as fake:  # FAKE-THINK: a reasoning summary, then the answer
        env = cli_env(cli, tmp_path, ws, f"{fake.url}/v1")
        proc = subprocess.run(
            [
                *waaah_command(),
                "run",
                "FAKE-THINK Say hello.",
                "--agent",
                cli,
                "--stream",
                "--timeout",
                "120",
            ],
            cwd=ws,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    start, session, envelope = (json.loads(line) for line in proc.stdout.splitlines())
    assert start["record"] == "start" and start["agent"] == cli and start["log_id"] == envelope["log_id"]
    assert session == {"record": "session", "session_id": envelope["session_id"], "agent": cli, "attempt": 1}
    assert envelope["response"] == "Hello from the fake model."
    assert envelope["reasoning"] == "The user asks for a greeting. A short one will do."
    assert envelope["reasoning_source"] == "stream"
    assert envelope["tokens_used"] == {
        "input_tokens": 123,
        "output_tokens": 45,
        "estimated_output_tokens": len("Hello from the fake model.") // 4,
        "total_tokens": 168,
        "cost_usd": 0.0,  # opencode prices the fake model at 0; codex reports no cost: 0 too
        "cache_read_input_tokens": 7,
        "cache_creation_input_tokens": 0,
    }
    assert ("cost_usd" in envelope["tokens"]) == (cli == "opencode")  # ours says which reported one
    check(envelope)


def test_codex_s_usage_limit_carries_the_reset_its_session_file_states(tmp_path: Path) -> None:
    """codex exec says only "try again later"; the reset noted for `waaah quota` and `waaah
    route` is the one codex wrote in its session file (`rate_limits.resets_at`)."""
    import time
    from datetime import datetime

    from tests.doubles.fake_openai import CODEX_QUOTA, HttpError, Rule, codex_limit_headers

    reset = int(time.time()) + 3 * 3600
    ws = workspace_for(tmp_path)
    refused = HttpError(429, body=CODEX_QUOTA, headers=codex_limit_headers(reset))
    with FakeOpenAI([Rule("LIMIT-MARKER", refused)]) as fake:
        env = cli_env("codex", tmp_path, ws, f"{fake.url}/v1")
        env["XDG_STATE_HOME"] = str(tmp_path / "state")
        out = waaah_run(["LIMIT-MARKER go", "--agent", "codex", "--timeout", "60"], env, ws)
        assert out["error_type"] in ("quota", "rate_limit"), out
        quota = subprocess.run(
            [*waaah_command(), "quota", "--json"], cwd=ws, env=env, capture_output=True, text=True, timeout=60
        )
    codex = json.loads(quota.stdout)["codex"]
    print(json.dumps(codex))
    assert codex["state"] == "limited" and codex["reset_at"] is not None, codex
    assert datetime.fromisoformat(codex["reset_at"]).timestamp() == reset
