"""A running `waaah agent` over the real gemini and claude, controlled from another shell:
`waaah send` reaches an agent waiting in its loop once, `pause` holds the continue prompts,
`resume` gives one, `tail` shows the log, `stop` saves and exits.

gemini 0.61.0 does not cancel an MCP call on Esc: it drops the turn once the call returns, so a
prompt sent to an agent in a wait is typed when that wait ends (here within its 30 s timeout)."""

from __future__ import annotations

import subprocess
import time

import pexpect
import pytest

from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_agent import (
    CONTINUE_MARKER,
    MARKER,
    REGISTER_ARGS,
    cli_env,
    continue_requests,
    spawn,
)
from tests.runtime.helpers import WAAAH, events, pump_for, pump_until, state

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SENT = "From another shell: list the files you changed today."


def waaah(ws, env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([WAAAH, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=90)


def test_send_pause_resume_tail_and_stop_from_another_shell(cli, tmp_path):
    ws = workspace_for(tmp_path)
    wait = ToolCall("wait_for_prompt", {"timeout": 30})
    script = [
        Rule(ToolCall("register_agent", REGISTER_ARGS), marker=MARKER),
        Rule(wait, tool_result="register_agent"),
        Rule(Text("SENT-PROMPT-ANSWERED"), marker=SENT),  # ends its turn outside the loop
        Rule(wait, marker=CONTINUE_MARKER),
        Rule(wait, tool_result="wait_for_prompt"),
    ]
    with FakeModel(script, default=Text("OK")) as model, WaaahServer() as server:
        env = cli_env(cli, tmp_path / "home", ws, model.url)
        child = spawn(ws, env, f"--start={cli}", f"--server={server.url}")
        pump_until(child, lambda: server.tool_calls("wait_for_prompt"), 90)
        paused = waaah(ws, env, "pause")
        assert paused.returncode == 0 and "nudges held" in paused.stdout, paused.stderr
        sent = waaah(ws, env, "send", SENT)
        assert sent.returncode == 0 and "queued" in sent.stdout, sent.stderr
        # The wait in flight is ended, the prompt typed once; the agent answers and ends its turn.
        pump_until(child, lambda: any(SENT in r["last_user_text"] for r in model.main_requests()), 90)
        pump_for(child, 15)  # paused: no continue prompt however long it sits there
        assert continue_requests(model) == []
        assert sum(SENT in r["last_user_text"] for r in model.main_requests()) == 1
        st = state(ws)
        assert st["paused"] is True and st["queued"] == []
        log = waaah(ws, env, "tail", "-n", "200")
        assert log.returncode == 0 and "waaah send" in log.stdout, log.stdout[-2000:]
        # The model may end its turn after the sent prompt (gemini here) or go back to its loop
        # (claude here, its cancelled wait in the same request): idle at its prompt, it gets
        # one continue prompt on resume; in its loop, none.
        idle = [e["state"] for e in events(ws) if e["event"] == "state"][-1] == "ready"
        resumed = waaah(ws, env, "unpause")
        assert resumed.returncode == 0
        if idle:
            pump_until(child, lambda: continue_requests(model), 60)
        else:
            pump_for(child, 5)
        nudges = [e for e in events(ws) if e["event"] == "nudge"]
        assert [n["reason"] for n in nudges] == (["nudges resumed (waaah unpause)"] if idle else []), nudges
        stopping = subprocess.Popen([WAAAH, "stop"], cwd=ws, env=env, stdout=subprocess.PIPE, text=True)
        child.expect(pexpect.EOF, timeout=60)
        child.close()
        out = stopping.communicate(timeout=60)[0]
        assert stopping.returncode == 0 and f"--resume {st['id']}" in out, out
        assert child.exitstatus == 0 and state(ws)["status"] == "stopped"
        controls = [e["command"] for e in events(ws) if e["event"] == "control" and "action" not in e]
        assert controls == ["pause", "send", "resume", "stop"]
        assert SENT not in (ws / ".waaah" / "sessions" / st["id"] / "events.jsonl").read_text()


def test_control_without_a_running_session_says_so(tmp_path):
    ws = workspace_for(tmp_path)
    for args in (["send", "hi"], ["pause"], ["stop"], ["tail"], ["attach"]):
        done = subprocess.run([WAAAH, *args], cwd=ws, capture_output=True, text=True, timeout=30)
        assert done.returncode == 7 and "no running session" in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
    time.sleep(0)


@pytest.mark.parametrize(("cli", "kind"), [("gemini", "token"), ("claude", "cost")])
def test_a_budget_stops_the_session_after_the_task_with_an_alert(cli, kind, tmp_path):
    """--max-tokens with the real gemini, --max-cost with the real claude (its transcript's
    tokens at the user's prices): the totals pass the budget during the first turns; the session
    stops once the agent is back in its wait, saved, exit code 17."""
    from tests.runtime.test_alerts import Endpoint

    ws = workspace_for(tmp_path)
    wait = ToolCall("wait_for_prompt", {"timeout": 20})
    script = [
        Rule(ToolCall("register_agent", REGISTER_ARGS), marker=MARKER),
        Rule(wait, tool_result="register_agent"),
        Rule(wait, tool_result="wait_for_prompt"),
    ]
    endpoint = Endpoint()
    try:
        with FakeModel(script, default=Text("OK")) as model, WaaahServer() as server:
            env = cli_env(cli, tmp_path / "home", ws, model.url)
            env["WAAAH_TOKENS_CHECK_SECONDS"] = "1"
            if kind == "token":
                budget = ("--max-tokens", "2000")
            else:  # $1 per thousand tokens of any model
                prices = tmp_path / "home" / ".config" / "waaah-agent" / "prices.toml"
                prices.parent.mkdir(parents=True, exist_ok=True)
                prices.write_text('["*"]\ninput = 1000.0\noutput = 1000.0\n')
                budget = ("--max-cost", "2")
            args = (f"--start={cli}", f"--server={server.url}", *budget, "--notify", endpoint.url)
            child = spawn(ws, env, *args)
            child.expect(pexpect.EOF, timeout=120)
            child.close()
            assert child.exitstatus == 17, child.before.decode(errors="replace")[-2000:]
            assert f"reached its {kind} budget" in child.before.decode(errors="replace")
            assert len(model.main_requests()) >= 2
    finally:
        endpoint.close()
    st = state(ws)
    assert st["status"] == "stopped" and st["tokens"]["input"] + st["tokens"]["output"] >= 2000
    budget_events = [e for e in events(ws) if e["event"] == "budget"]
    if kind == "token":
        assert budget_events and budget_events[0]["limit"] == 2000
    else:
        assert budget_events and budget_events[0]["cost_limit"] == 2.0 and budget_events[0]["cost_usd"] >= 2.0
        assert [list(models) for models in st["token_models"].values()] == [["claude-opus-5-5"]]
        assert st["options"]["max_cost"] == 2.0  # kept for --resume
    assert [e["reason"] for e in events(ws) if e["event"] == "end"] == ["budget"]
    assert not [e for e in events(ws) if e["event"] == "nudge"]
    assert [a["title"] for a in endpoint.received] == [f"waaah: {cli} reached its {kind} budget"]
