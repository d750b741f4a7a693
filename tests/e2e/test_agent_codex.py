"""`waaah agent --start=codex` over the real codex (the pinned release), offline, as a user starts it.

codex talks to the fake OpenAI Responses API on 127.0.0.1 (tests/doubles/fake_openai.py), which
scripts the model's side: register, wait, end the turn. The WAAAH server double records what
reaches it through our MCP proxy, which `waaah agent` gives codex per run with ``-c`` overrides
(its config.toml is not touched). The same core scenarios as gemini and claude
(tests/e2e/test_waaah_agent.py): the workflow, the loop, a loop exit, a crash and codex's own
resume of the same session.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.doubles.cli_homes import CLI_BIN_DIR, cli_bin, codex_env
from tests.doubles.fake_openai import (
    CODEX_QUOTA,
    FakeOpenAI,
    HttpError,
    McpCall,
    Rule,
    Text,
    Usage,
    codex_limit_headers,
)
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import with_cli_path, workspace_for
from tests.e2e.test_waaah_agent import (
    CONTINUE_MARKER,
    MARKER,
    REGISTER_ARGS,
    Collector,
    inbox_lines,
    save_and_exit,
    spawn,
)
from tests.runtime.helpers import WAAAH, events, pump_for, pump_until, state
from waaah_agent.core.supervise.screen import Screen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

#: Token numbers the fake reports for every model reply.
USAGE = Usage(input_tokens=1200, output_tokens=34, cached_tokens=0)


@pytest.fixture(autouse=True)
def _codex_installed() -> None:
    cli_bin("codex")  # `make test` installs it: missing is a failure naming the install command


def loop_script() -> list[Rule]:
    """Workflow -> register_agent -> wait_for_prompt -> end the turn with a marker text."""
    return [
        Rule(MARKER, McpCall("waaah", "register_agent", REGISTER_ARGS)),
        Rule("", McpCall("waaah", "wait_for_prompt", {"timeout": 2}), after_tool="register_agent"),
        Rule("", Text("LOOP-TURN-DONE"), after_tool="wait_for_prompt"),
        Rule(CONTINUE_MARKER, Text("CONTINUED-ANSWER")),
    ]


def start(
    tmp_path: Path, model: FakeOpenAI, server: WaaahServer, bin_dir: Path = CLI_BIN_DIR
) -> tuple[Path, dict[str, str], pexpect.spawn]:
    ws = workspace_for(tmp_path)
    env = with_cli_path(codex_env(tmp_path / "home", f"{model.url}/v1", ws), bin_dir)
    return ws, env, spawn(ws, env, "--start=codex", f"--server={server.url}")


def typed_requests(model: FakeOpenAI, marker: str) -> list[dict[str, Any]]:
    """Requests carrying a newly typed prompt with ``marker`` (a request answering a tool result
    carries the same last user text)."""
    return [r for r in model.main_requests() if marker in r["last_user_text"] and r["tool_result"] is None]


def continue_requests(model: FakeOpenAI) -> list[dict[str, Any]]:
    return typed_requests(model, CONTINUE_MARKER)


def workflow_requests(model: FakeOpenAI) -> list[dict[str, Any]]:
    return typed_requests(model, MARKER)


def resumed_with(argv: list[str]) -> str | None:
    """The session ``codex resume <id>`` was started with (None: a fresh start)."""
    return argv[argv.index("resume") + 1] if "resume" in argv else None


def rollouts(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env["CODEX_HOME"]).glob("sessions/*/*/*/rollout-*.jsonl"))


def test_workflow_loop_and_continue_prompt_through_codex(tmp_path):
    workflow_loop_and_continue_through_codex(tmp_path)


def workflow_loop_and_continue_through_codex(tmp_path: Path, bin_dir: Path = CLI_BIN_DIR) -> None:
    """The workflow, the loop, a loop exit answered by one continue prompt (also run over the
    older releases: tests/e2e/test_older_releases.py)."""
    with FakeOpenAI(loop_script(), usage=USAGE) as model, WaaahServer() as server:
        ws, env, child = start(tmp_path, model, server, bin_dir)
        config = Path(env["CODEX_HOME"]) / "config.toml"
        before = config.read_bytes()
        shown = Collector()
        child.logfile_read = shown
        child.expect("LOOP-TURN-DONE", timeout=120)
        register = server.wait_for_call("register_agent")
        wait = server.wait_for_call("wait_for_prompt")
        st = state(ws)
        assert register.body["source"] == "CLI"
        assert register.body["agentId"] == st["agent_id"] == wait.body["agentId"]

        # Our proxy (given with -c overrides, its variables by name) reported each call.
        def tapped() -> list[tuple[str, str]]:
            return [(e["event"], e["tool"]) for e in inbox_lines(ws) if e["source"] == "mcp"]

        pump_until(child, lambda: ("tool_end", "wait_for_prompt") in tapped())
        # The turn ended outside wait_for_prompt: one continue prompt, answered.
        pump_until(child, lambda: continue_requests(model), 60)
        pump_until(child, lambda: b"CONTINUED-ANSWER" in shown.data, 60)
        pump_for(child, 3)
        assert len(continue_requests(model)) == 1
        sent = workflow_requests(model)
        assert len(sent) == 1 and "register_agent" in sent[0]["last_user_text"]
        pasted = [e for e in events(ws) if e["event"] == "delivery" and e["phase"] == "pasted"]
        assert [e["kind"] for e in pasted] == ["workflow", "continue"]
        # codex chose its session id; the supervisor learned it from codex's own session file.
        native = state(ws)["native_session_id"]
        assert [p.name.endswith(f"-{native}.jsonl") for p in rollouts(env)] == [True]
        assert any(e["event"] == "native-session-id" for e in events(ws))
        argv = state(ws)["argv"]
        assert "features.daemon_auto_start=false" in argv and not any("WAAAH_API" in a for a in argv[1:-1:2])
        assert save_and_exit(child) == 0
        assert state(ws)["status"] == "stopped"
        # Nothing of ours in the user's codex config (codex itself appends its own [tui] notes).
        after = config.read_bytes()
        assert after.startswith(before) and b"waaah" not in after and b"mcp_servers" not in after
        # Tokens from codex's session file: the fake's fixed numbers per model reply.
        tokens = state(ws)["tokens"]
        replies = len(model.main_requests())
        assert tokens == {"input": 1200 * replies, "output": 34 * replies, "cached": 0}, (tokens, replies)
        assert "Tokens this session: input" in child.before.decode()


def test_killed_codex_is_restarted_with_its_own_resume(tmp_path):
    killed_codex_resumes_natively(tmp_path)


def killed_codex_resumes_natively(tmp_path: Path, bin_dir: Path = CLI_BIN_DIR) -> None:
    with FakeOpenAI(loop_script(), usage=USAGE) as model, WaaahServer() as server:
        ws, env, child = start(tmp_path, model, server, bin_dir)
        shown = Collector()
        child.logfile_read = shown
        child.expect("LOOP-TURN-DONE", timeout=120)
        pump_until(child, lambda: continue_requests(model), 60)  # the conversation is under way
        pump_until(
            child,
            lambda: len(rollouts(env)) == 1 and any(e["event"] == "native-session-id" for e in events(ws)),
            30,
        )
        first = state(ws)
        before = len(continue_requests(model))
        os.kill(first["agent_pid"], signal.SIGKILL)
        pump_until(child, lambda: (st := state(ws))["restarts"] == 1 and st["status"] == "running", 60)
        again = state(ws)
        assert resumed_with(again["argv"]) == first["native_session_id"]
        assert again["agent_pid"] != first["agent_pid"]
        assert "SIGKILL" in [e for e in events(ws) if e["event"] == "restart"][0]["after"]
        pump_until(child, lambda: len(continue_requests(model)) > before, 120)
        # The same conversation: the request after the restart carries the earlier turns, and
        # codex goes on in the same session file.
        history = json.dumps(continue_requests(model)[-1]["body"])
        assert "LOOP-TURN-DONE" in history
        assert len(workflow_requests(model)) == 1
        assert len(rollouts(env)) == 1
        screen = Screen(120, 40)
        screen.feed(bytes(shown.data))
        assert "[waaah]" not in (text := screen.view().text()), text
        assert save_and_exit(child) == 0
        assert len(state(ws)["token_files"]) == 1


def test_save_then_resume_continues_codex_s_own_session(tmp_path):
    with FakeOpenAI(loop_script(), usage=USAGE) as model, WaaahServer() as server:
        ws, env, child = start(tmp_path, model, server)
        child.expect("LOOP-TURN-DONE", timeout=120)
        pump_until(child, lambda: any(e["event"] == "native-session-id" for e in events(ws)), 30)
        native = state(ws)["native_session_id"]
        # Drawn first, written to the rollout a moment later (save and exit stops a turn, and
        # what codex had not written yet with it): the answer is in the conversation first.
        pump_until(
            child, lambda: any("LOOP-TURN-DONE" in p.read_text(errors="replace") for p in rollouts(env)), 30
        )
        assert save_and_exit(child) == 0

        child = spawn(ws, env, "--start=codex", f"--server={server.url}", "--resume")
        pump_until(
            child, lambda: state(ws)["status"] == "running" and resumed_with(state(ws)["argv"]) == native
        )
        # Resumed natively: the workflow is not typed again; the continue prompt carries on the
        # same conversation, and the model sees the earlier turns.
        before = len(continue_requests(model))
        pump_until(child, lambda: len(continue_requests(model)) > before, 120)
        assert "LOOP-TURN-DONE" in json.dumps(continue_requests(model)[-1]["body"])
        assert len(workflow_requests(model)) == 1 and len(rollouts(env)) == 1
        assert save_and_exit(child) == 0


def test_a_freeze_right_after_a_wait_is_a_stall_then_codex_s_own_resume(tmp_path):
    """The wait returns, codex's whole process group is stopped (SIGSTOP) before the model's next
    answer: Esc after the stall timeout, a restart after the grace, the same conversation."""
    script = [
        *loop_script()[:2],
        Rule("", Text("AFTER-THE-WAIT", delay=120), after_tool="wait_for_prompt"),  # never in time
        Rule(CONTINUE_MARKER, Text("CONTINUED-ANSWER")),
    ]
    ws = workspace_for(tmp_path)
    with FakeOpenAI(script, usage=USAGE) as model, WaaahServer() as server:
        env = with_cli_path(codex_env(tmp_path / "home", f"{model.url}/v1", ws))
        child = spawn(ws, env, "--start=codex", f"--server={server.url}", "--stall-timeout", "4")

        def wait_ended() -> bool:
            return any(
                e.get("tool") == "wait_for_prompt" and e["event"] == "tool_end" for e in inbox_lines(ws)
            )

        pump_until(child, wait_ended, 120)
        first = state(ws)
        os.killpg(first["agent_pid"], signal.SIGSTOP)
        try:
            pump_until(child, lambda: any(e["event"] == "stall" for e in events(ws)), 60)
            pump_until(child, lambda: (st := state(ws))["restarts"] == 1 and st["status"] == "running", 60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(first["agent_pid"], signal.SIGCONT)
        assert "stalled" in [e for e in events(ws) if e["event"] == "restart"][0]["after"]
        # codex's own id, learned from its session file (at the latest before the restart).
        native = state(ws)["native_session_id"]
        assert resumed_with(state(ws)["argv"]) == native
        assert [p.name.endswith(f"-{native}.jsonl") for p in rollouts(env)] == [True]
        pump_until(child, lambda: continue_requests(model), 120)  # back in its loop's conversation
        assert len(workflow_requests(model)) == 1
        assert save_and_exit(child) == 0


def no_login_env(tmp_path: Path, ws: Path, base_url: str) -> dict[str, str]:
    """codex with its OpenAI provider, no key and no stored login."""
    env = with_cli_path(codex_env(tmp_path / "home", base_url, ws, api_key=None))
    config = Path(env["CODEX_HOME"]) / "config.toml"
    lines = config.read_text(encoding="utf-8").splitlines()
    config.write_text("\n".join(ln for ln in lines if not ln.startswith("model_provider")) + "\n")
    return env


def test_no_login_headless_says_how_to_log_in(tmp_path):
    ws = workspace_for(tmp_path)
    with FakeOpenAI(loop_script()) as model:
        env = no_login_env(tmp_path, ws, f"{model.url}/v1")
        done = subprocess.run(
            [WAAAH, "agent", "--start=codex", "--no-mcp"],
            cwd=ws,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 6, done.stderr
        assert "codex requires login. Run: codex login, or set OPENAI_API_KEY" in done.stderr
        assert model.requests == []


def test_codex_s_sign_in_screen_is_left_to_the_user(tmp_path):
    """On a terminal the sign-in screen is the user's: nothing is typed into it."""
    ws = workspace_for(tmp_path)
    with FakeOpenAI(loop_script()) as model:
        env = no_login_env(tmp_path, ws, f"{model.url}/v1")
        child = spawn(ws, env, "--start=codex", "--no-mcp")
        child.expect("Sign in with ChatGPT", timeout=60)
        pump_until(
            child, lambda: "login" in [e.get("state") for e in events(ws) if e["event"] == "state"], 30
        )
        pump_for(child, 2)
        assert not [e for e in events(ws) if e["event"] == "delivery"]
        assert model.requests == []
        assert save_and_exit(child) == 0


def test_codex_s_usage_limit_is_waited_out_until_the_reset_its_session_file_states(tmp_path):
    """codex's limit line says only "try again later"; its session file holds the plan's windows
    (`rate_limits.resets_at`, from the API's x-codex-* headers). The wait ends at that reset
    (+ the margin), not after the default for a limit that states no time (an hour here)."""
    import time

    reset = int(time.time()) + 40
    refused = HttpError(429, body=CODEX_QUOTA, headers=codex_limit_headers(reset))
    ws = workspace_for(tmp_path)
    with FakeOpenAI([Rule(MARKER, refused)], usage=USAGE) as model:
        env = with_cli_path(codex_env(tmp_path / "home", f"{model.url}/v1", ws))
        env.update(WAAAH_LIMIT_DEFAULT_SECONDS="3600", WAAAH_LIMIT_MARGIN_SECONDS="2")
        child = spawn(ws, env, "--start=codex", "--no-mcp")
        pump_until(child, lambda: list(ws.glob(".waaah/sessions/*/events.jsonl")), 60)
        pump_until(child, lambda: len([e for e in events(ws) if e["event"] == "limit"]) >= 2, 90)
        first, stated = [e for e in events(ws) if e["event"] == "limit"][:2]
        print("limit events:", first["how"], "|", stated["how"])
        assert first["how"].startswith("default: no reset time stated")
        assert "stated in codex's session file" in stated["how"]
        ends = datetime.fromisoformat(stated["until"]).timestamp()
        assert reset + 1 <= ends <= reset + 4, (stated["until"], reset)
        pump_until(child, lambda: any(e["event"] == "limit-over" for e in events(ws)), 90)
        over = next(e for e in events(ws) if e["event"] == "limit-over")
        assert datetime.fromisoformat(over["ts"]).timestamp() >= reset
        assert save_and_exit(child) == 0
