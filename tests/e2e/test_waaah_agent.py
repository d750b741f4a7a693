"""`waaah agent` over the real gemini and claude CLIs, offline, exactly as a user starts it.

The fake model API scripts the model's side (register, wait, end the turn); the WAAAH
server double records what reaches it through our MCP proxy, which `waaah agent`
configures itself (gemini: its user settings; claude: a per-run --mcp-config).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.doubles.cli_homes import CLI_BIN_DIR, claude_env, gemini_env
from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import with_cli_path, workspace_for
from tests.runtime.helpers import WAAAH, events, pump_for, pump_until, state, state_or_none
from waaah_agent.core.supervise.screen import Screen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

MARKER = "stay in the loop"  # a phrase of the bundled waaah-orc workflow
CONTINUE_MARKER = "Continue the WAAAH workflow loop"  # the supervisor's continue prompt
REGISTER_ARGS = {
    "displayName": "waaah-orc",
    "capabilities": ["general-purpose"],
    "workspaceContext": {"type": "local", "repoId": "ws"},
}


#: claude 2.1.200 may start the first turn before its MCP servers are connected; the tool result
#: then is its own error "No such tool available: ... The MCP server 'waaah' is still connecting",
#: and a model tries again (gemini and later claude releases wait for their MCP servers).
NO_TOOL = "No such tool available"  # claude: also while its MCP servers connect


def loop_script() -> list[Rule]:
    """Workflow -> register_agent -> wait_for_prompt -> end the turn with a marker text."""
    return [
        # claude 2.1.200 may begin the turn before its MCP servers are connected ("is still
        # connecting", then, while the tools are listed, "No such tool available"): the model
        # asks again until the registration went through (a wait in between could be the first
        # call to get through, and the turn would end unregistered).
        Rule(ToolCall("register_agent", REGISTER_ARGS), tool_result="register_agent", result_has=NO_TOOL),
        Rule(ToolCall("register_agent", REGISTER_ARGS), marker=MARKER),
        Rule(ToolCall("wait_for_prompt", {"timeout": 2}), tool_result="register_agent"),
        Rule(Text("LOOP-TURN-DONE"), tool_result="wait_for_prompt"),
        Rule(Text("CONTINUED-ANSWER"), marker=CONTINUE_MARKER),
    ]


def cli_env(
    cli: str,
    home: Path,
    ws: Path,
    model_url: str,
    api_key: str | None = "default",
    bin_dir: Path = CLI_BIN_DIR,
) -> dict[str, str]:
    kwargs: dict[str, Any] = {} if api_key == "default" else {"api_key": api_key}
    if cli == "gemini":
        env = gemini_env(home, model_url, **kwargs)
    else:
        env = claude_env(home, model_url, ws, **kwargs)
    return with_cli_path(env, bin_dir)


def spawn(ws: Path, env: dict[str, str], *args: str) -> pexpect.spawn:
    child = pexpect.spawn(WAAAH, ["agent", *args], cwd=str(ws), env=env, dimensions=(40, 120), timeout=90)
    child.delaybeforesend = None
    return child


def save_and_exit(child: pexpect.spawn) -> int:
    child.send("\x03")
    child.expect("save and exit")
    child.send("s")
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    return int(child.exitstatus)


def resumed_with(argv: list[str]) -> str | None:
    return argv[argv.index("--resume") + 1] if "--resume" in argv else None


def states_since_start(ws: Path) -> list[str]:
    """Screen states of the current run only (a resumed session's events.jsonl has the old run's too)."""
    found: list[str] = []
    for event in events(ws):
        if event["event"] == "start":
            found = []
        elif event["event"] == "state":
            found.append(event["state"])
    return found


def continue_requests(model: FakeModel) -> list[dict[str, Any]]:
    return [r for r in model.main_requests() if CONTINUE_MARKER in r["last_user_text"]]


def workflow_requests(model: FakeModel) -> list[dict[str, Any]]:
    return [r for r in model.main_requests() if MARKER in r["last_user_text"]]


def inbox_lines(ws: Path) -> list[dict[str, Any]]:
    inbox = next((ws / ".waaah" / "sessions").glob("*/inbox.jsonl"), None)
    return [json.loads(line) for line in inbox.read_text().splitlines()] if inbox else []


def test_start_workflow_mcp_loop_and_clean_exit(cli, tmp_path):
    workflow_loop_exit_and_continue(cli, tmp_path, CLI_BIN_DIR)


#: The WAAAH server's key in the loop test: the proxy the CLI starts must reach the server with
#: it, and no file written for the run may hold it.
WAAAH_KEY = "waaah-key-for-the-loop-test-0123456789"


def workflow_loop_exit_and_continue(cli: str, tmp_path: Path, bin_dir: Path) -> None:
    """The workflow is delivered once; the turn ends outside wait_for_prompt: one continue prompt."""
    ws = workspace_for(tmp_path)
    with FakeModel(loop_script(), default=Text("OK")) as model, WaaahServer(api_key=WAAAH_KEY) as server:
        env = cli_env(cli, tmp_path / "home", ws, model.url, bin_dir=bin_dir)
        env["WAAAH_API_KEY"] = WAAAH_KEY
        child = spawn(ws, env, f"--start={cli}", f"--server={server.url}")
        shown = Collector()
        child.logfile_read = shown
        child.expect("LOOP-TURN-DONE")
        pump_until(child, lambda: server.tool_calls("wait_for_prompt"))
        register = server.wait_for_call("register_agent")
        wait = server.wait_for_call("wait_for_prompt")
        st = state(ws)
        assert register.body["source"] == "CLI"
        assert register.body["agentId"] == st["agent_id"]
        assert wait.body["agentId"] == st["agent_id"]

        # Our proxy reported each call to the session inbox (the loop's strongest evidence).
        def tapped() -> list[tuple[str, str]]:
            return [(e["event"], e["tool"]) for e in inbox_lines(ws) if e["source"] == "mcp"]

        pump_until(child, lambda: ("tool_end", "wait_for_prompt") in tapped())
        assert ("tool_start", "wait_for_prompt") in tapped()
        # The model ended its turn without calling wait_for_prompt: the supervisor noticed, and
        # the next request carries its continue prompt (once).
        pump_until(child, lambda: continue_requests(model), 60)
        # The workflow went to the model exactly once, with its full text: a second copy would
        # have reached the model before the continue prompt typed after it.
        sent = workflow_requests(model)
        assert len(sent) == 1, [r["last_user_text"][:80] for r in model.main_requests()]
        assert "register_agent" in sent[0]["last_user_text"]
        # The answer to the continue prompt ends the turn again; a second continue prompt would
        # come 2 s (the settle time) later, the next one may not come before 10 s. Nothing is
        # awaited here: the quiet stretch is the check.
        pump_until(child, lambda: b"CONTINUED-ANSWER" in shown.data, 60)
        pump_for(child, 3)
        assert len(continue_requests(model)) == 1
        nudges = [e for e in events(ws) if e["event"] == "nudge"]
        assert nudges and nudges[0]["kind"] == "continue"
        if cli == "claude":  # its hooks, given per run with --settings, report to the inbox
            hooks = [e for e in events(ws) if e["event"].startswith("hook-")]
            names = {e["event"] for e in hooks}
            assert {"hook-SessionStart", "hook-UserPromptSubmit", "hook-Stop"} <= names, names
            assert all(e["session_id"] == state(ws)["native_session_id"] for e in hooks if "session_id" in e)
        pasted = [e for e in events(ws) if e["event"] == "delivery" and e["phase"] == "pasted"]
        assert [e["kind"] for e in pasted] == ["workflow", "continue"]
        assert save_and_exit(child) == 0
        assert state(ws)["status"] == "stopped"
        # Tokens come from the CLI's own transcript: the fake model's fixed numbers per reply.
        tokens = state(ws)["tokens"]
        replies = len(model.main_requests())
        assert tokens["output"] == 34 * replies and tokens["input"] >= 1200 * replies, (tokens, replies)
        assert "Tokens this session: input" in child.before.decode()
    # The key reached the server through the CLI's environment (registered above), never a file:
    # claude's per-run --mcp-config and gemini's per-run settings name ${WAAAH_API_KEY}.
    holding = [p for p in tmp_path.rglob("*") if p.is_file() and WAAAH_KEY.encode() in p.read_bytes()]
    assert holding == [], holding


class Collector:
    """A pexpect logfile keeping everything the terminal showed."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def flush(self) -> None:
        pass


def test_ctrl_c_save_then_resume_continues_the_native_session(cli, tmp_path):
    ws = workspace_for(tmp_path)
    with FakeModel(loop_script(), default=Text("OK")) as model, WaaahServer() as server:
        env = cli_env(cli, tmp_path / "home", ws, model.url)
        child = spawn(ws, env, f"--start={cli}", f"--server={server.url}")
        child.expect("LOOP-TURN-DONE")
        native = state(ws)["native_session_id"]

        def in_transcript() -> bool:  # drawn first, written to the CLI's own file a moment later
            return any("LOOP-TURN-DONE" in p.read_text(errors="replace") for p in home.rglob("*.json*"))

        home = tmp_path / "home"
        pump_until(child, in_transcript, 30)
        assert save_and_exit(child) == 0
        if cli == "gemini":
            # The resume starts in another minute than the session did, as it does at night:
            # gemini then leaves a file of that minute (its start, no turns) beside the
            # conversation's, which it goes on in.
            (first,) = tmp_path.rglob(f"chats/session-*-{native[:8]}.jsonl")
            began = first.name.split("-", 1)[1][: len("2026-11-25T20-48")]
            while time.strftime("%Y-%m-%dT%H-%M", time.gmtime()) == began:
                time.sleep(0.5)

        child = spawn(ws, env, f"--start={cli}", f"--server={server.url}", "--resume")
        pump_until(
            child, lambda: state(ws)["status"] == "running" and resumed_with(state(ws)["argv"]) == native
        )
        # Resumed natively: the workflow is not typed again; the continue prompt carries on the
        # same conversation, and the model sees the earlier turns.
        before = len(continue_requests(model))
        pump_until(child, lambda: len(continue_requests(model)) > before, 90)
        history = json.dumps(continue_requests(model)[-1]["body"])
        assert "LOOP-TURN-DONE" in history, "the resumed request carries the earlier conversation"
        assert len(workflow_requests(model)) == 1
        assert save_and_exit(child) == 0
        assert_tokens_of_every_reply(ws, model)
        if cli == "gemini":
            # The file of the resume's minute, holding no conversation, is gone: set aside after
            # the run (gemini would remove the whole session at another start because of it),
            # or removed by gemini itself when it ended before the resumed conversation loaded.
            assert list(tmp_path.rglob(f"chats/session-*-{native[:8]}.jsonl")) == [first]
            assert Path(next(iter(state(ws)["token_files"]))).name == first.name


def test_killed_cli_is_restarted_with_its_native_resume(cli, tmp_path):
    killed_cli_resumes_natively(cli, tmp_path, CLI_BIN_DIR)


def killed_cli_resumes_natively(cli: str, tmp_path: Path, bin_dir: Path) -> None:
    """SIGKILL of the CLI: a restart with its native resume goes on in the same conversation."""
    ws = workspace_for(tmp_path)
    with FakeModel(loop_script(), default=Text("OK")) as model, WaaahServer() as server:
        env = cli_env(cli, tmp_path / "home", ws, model.url, bin_dir=bin_dir)
        child = spawn(ws, env, f"--start={cli}", f"--server={server.url}")
        shown = Collector()
        child.logfile_read = shown
        child.expect("LOOP-TURN-DONE")
        first = state(ws)
        pump_until(child, lambda: continue_requests(model), 60)  # the conversation is under way
        before = len(continue_requests(model))
        os.kill(first["agent_pid"], signal.SIGKILL)
        pump_until(child, lambda: (st := state(ws))["restarts"] == 1 and st["status"] == "running", 30)
        again = state(ws)
        # A release that takes no session id of ours (gemini 0.34.0): the id it picked, read back.
        learned = [e["id"] for e in events(ws) if e["event"] == "native-session-id"]
        if first["cli_release"].get("own_session_ids") is False:
            assert learned, events(ws)
        assert resumed_with(again["argv"]) == (learned[-1] if learned else first["native_session_id"])
        assert again["agent_pid"] != first["agent_pid"]
        restart = [e for e in events(ws) if e["event"] == "restart"]
        assert "SIGKILL" in restart[0]["after"]
        pump_until(child, lambda: len(continue_requests(model)) > before, 90)
        # The restart notice was taken back: the agent's screen holds only the agent's output.
        screen = Screen(120, 40)
        screen.feed(bytes(shown.data))
        assert "[waaah]" not in (text := screen.view().text()), text
        history = json.dumps(continue_requests(model)[-1]["body"])
        assert "LOOP-TURN-DONE" in history, "the request after the restart carries the earlier conversation"
        assert len(workflow_requests(model)) == 1
        assert save_and_exit(child) == 0
        assert_tokens_of_every_reply(ws, model)


def test_a_freeze_right_after_a_wait_is_a_stall_then_a_native_resume(cli, tmp_path):
    """The wait returns, the agent's whole process group is stopped (SIGSTOP) before it prints
    anything more: Esc after the stall timeout, a restart after the grace, the same conversation."""
    script = [
        Rule(ToolCall("register_agent", REGISTER_ARGS), marker=MARKER),
        Rule(ToolCall("wait_for_prompt", {"timeout": 2}), tool_result="register_agent"),
        Rule(Text("AFTER-THE-WAIT", delay=120), tool_result="wait_for_prompt"),  # never in time
        Rule(Text("CONTINUED-ANSWER"), marker=CONTINUE_MARKER),
    ]
    ws = workspace_for(tmp_path)
    with FakeModel(script, default=Text("OK")) as model, WaaahServer() as server:
        env = cli_env(cli, tmp_path / "home", ws, model.url)
        child = spawn(ws, env, f"--start={cli}", f"--server={server.url}", "--stall-timeout", "4")

        def wait_ended() -> bool:
            return any(
                e.get("tool") == "wait_for_prompt" and e["event"] == "tool_end" for e in inbox_lines(ws)
            )

        pump_until(child, wait_ended, 90)
        first = state(ws)
        os.killpg(first["agent_pid"], signal.SIGSTOP)
        frozen = time.monotonic()
        try:
            pump_until(child, lambda: any(e["event"] == "stall" for e in events(ws)), 60)
            esc_after = time.monotonic() - frozen
            pump_until(child, lambda: (st := state(ws))["restarts"] == 1 and st["status"] == "running", 60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(first["agent_pid"], signal.SIGCONT)
        assert 3 <= esc_after <= 30, esc_after
        restart = [e for e in events(ws) if e["event"] == "restart"]
        assert "stalled" in restart[0]["after"], restart
        again = state(ws)
        assert resumed_with(again["argv"]) == first["native_session_id"]
        pump_until(child, lambda: continue_requests(model), 90)  # back in its loop's conversation
        assert len(workflow_requests(model)) == 1
        assert save_and_exit(child) == 0


def test_a_workflow_pasted_into_a_frozen_cli_is_not_pasted_twice_and_goes_in_once_it_reads(cli, tmp_path):
    """The CLI is stopped (SIGSTOP) at its prompt, just before the workflow's paste: the paste
    waits unread in its terminal, the box stays empty. A second paste then would land beside
    the first once the CLI runs again; none goes, and once it reads and draws the first, the
    Enter follows: the model gets the workflow once."""
    ws = workspace_for(tmp_path)
    with FakeModel(loop_script(), default=Text("OK")) as model, WaaahServer() as server:
        env = cli_env(cli, tmp_path / "home", ws, model.url)
        child = spawn(ws, env, f"--start={cli}", f"--server={server.url}")

        def delivery_notes() -> list[str]:
            return [e["note"] for e in events(ws) if e["event"] == "delivery"]

        # Ready at its prompt: the paste follows once the screen has been quiet for 0.8 s.
        pump_until(child, lambda: state_or_none(ws) and "ready" in states_since_start(ws), 90)
        agent = state(ws)["agent_pid"]
        os.killpg(agent, signal.SIGSTOP)
        try:
            assert delivery_notes() == [], "pasted before the CLI was stopped: no test"
            pump_until(child, lambda: len(delivery_notes()) >= 2, 30)
            assert delivery_notes() == [
                "pasted",
                "paste never appeared in the input box: pasting again in 5 s,"
                " once the agent has read it (it has not yet)",
            ]
            pump_for(child, 8)  # past the 5 s: nothing goes in while the CLI has not read it
            assert len(delivery_notes()) == 2
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(agent, signal.SIGCONT)
        child.expect("LOOP-TURN-DONE")
        notes = delivery_notes()
        assert notes[2:] == ["the paste showed late: Enter follows", "enter", "confirmed"], notes
        sent = workflow_requests(model)
        assert len(sent) == 1, [r["last_user_text"][:80] for r in model.main_requests()]
        assert sent[0]["last_user_text"].count(MARKER) == 1  # one copy of the text, not two
        assert save_and_exit(child) == 0


def assert_tokens_of_every_reply(ws, model) -> None:
    """The totals count every reply of the night once, across resumes and restarts: the CLI
    goes on in the same transcript file, so it is read again, never added twice."""
    st = state(ws)
    replies = len(model.main_requests())
    # The last request may be cut off by the stop before its answer reaches the transcript.
    assert 34 * (replies - 1) <= st["tokens"]["output"] <= 34 * replies, (
        st["tokens"],
        replies,
        st["token_files"],
    )
    assert len(st["token_files"]) == 1, st["token_files"]


def test_no_key_in_a_fresh_home_headless_says_how_to_log_in(cli, tmp_path):
    """Nobody at a terminal to answer the CLI's login: stop at once with the command to run."""
    ws = workspace_for(tmp_path)
    home = tmp_path / "fresh-home"
    home.mkdir()
    with FakeModel([], default=Text("OK")) as model:
        env = cli_env(cli, home, ws, model.url, api_key=None)
        for path in (home / ".gemini" / "settings.json", home / ".claude.json"):
            path.unlink(missing_ok=True)  # a truly fresh HOME
        started = time.monotonic()
        done = subprocess.run(
            [WAAAH, "agent", f"--start={cli}", "--no-mcp"],
            cwd=ws,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 6, done.stderr
        assert f"{cli} requires login. Run: {cli}" in done.stderr
        assert time.monotonic() - started < 20
        assert model.main_requests() == []  # nothing was started, nothing restarted


def test_evict_shutdown_ends_the_session_cleanly(cli, tmp_path):
    ws = workspace_for(tmp_path)
    rules = [
        Rule(ToolCall("register_agent", REGISTER_ARGS), marker=MARKER),
        Rule(ToolCall("wait_for_prompt", {"timeout": 60}), tool_result="register_agent"),
        Rule(Text("EVICTED-BYE"), tool_result="wait_for_prompt"),
    ]
    with FakeModel(rules, default=Text("OK")) as model, WaaahServer() as server:
        env = cli_env(cli, tmp_path / "home", ws, model.url)
        child = spawn(ws, env, f"--start={cli}", f"--server={server.url}")
        pump_until(
            child, lambda: (st := state_or_none(ws)) and server.agent_status(st["agent_id"]) == "WAITING", 60
        )
        server.evict(state(ws)["agent_id"], "SHUTDOWN", reason="end of the night")
        child.expect("evicted this agent \\(SHUTDOWN\\)")
        child.expect(pexpect.EOF, timeout=30)
        child.close()
        assert child.exitstatus == 0
        st = state(ws)
        assert st["status"] == "evicted"
        ends = [e for e in events(ws) if e["event"] == "mcp-tool_end" and e.get("outcome") == "evict"]
        assert ends and ends[0]["evict_action"] == "SHUTDOWN"


def test_identical_waits_stay_in_the_loop_with_gemini_s_loop_detector_off_for_the_run(tmp_path):
    """An agent waiting in its loop calls wait_for_prompt with the same arguments every time;
    gemini's detector would halt the turn after five. The run's own settings turn it off: six
    and more identical waits in a row, no word of a loop to the model, no continue prompt, and
    the user's settings file byte for byte as it was (the entry and the switch are the run's)."""
    wait = ToolCall("wait_for_prompt", {"timeout": 1})
    script = [
        Rule(ToolCall("register_agent", REGISTER_ARGS), marker=MARKER),
        Rule(wait, tool_result="register_agent"),
        Rule(wait, tool_result="wait_for_prompt"),
    ]
    ws = workspace_for(tmp_path)
    home = tmp_path / "home"
    with FakeModel(script, default=Text("OK")) as model, WaaahServer() as server:
        env = cli_env("gemini", home, ws, model.url)
        user_settings = home / ".gemini" / "settings.json"
        before = user_settings.read_bytes()
        child = spawn(ws, env, "--start=gemini", f"--server={server.url}")
        pump_until(child, lambda: len(server.tool_calls("wait_for_prompt")) >= 8, 120)
        texts = [r["last_user_text"] for r in model.main_requests()]
        assert not any("loop detected" in t.lower() for t in texts), texts[-3:]
        assert not any(e["event"] in ("loop-detector", "nudge") for e in events(ws))
        assert continue_requests(model) == [] and len(workflow_requests(model)) == 1
        assert user_settings.read_bytes() == before
        assert save_and_exit(child) == 0
    assert user_settings.read_bytes() == before
    # The conversation is in the user's own gemini folder, where a plain `gemini --resume` finds it.
    native = state(ws)["native_session_id"]
    assert list((home / ".gemini" / "tmp").glob(f"*/chats/session-*-{native[:8]}*.json*"))
    assert not list((home / ".local" / "state" / "waaah-agent" / "homes").glob("*"))


def test_a_cli_that_refuses_its_command_line_is_a_configuration_error_not_a_crash(cli, tmp_path):
    """An option the installed CLI does not know (a wrong argument after `--`, or an older release
    without one waaah passes): one line with the CLI's own words, exit code 2, no restart."""
    ws = workspace_for(tmp_path)
    with FakeModel([], default=Text("OK")) as model:
        env = cli_env(cli, tmp_path / "home", ws, model.url)
        child = spawn(ws, env, f"--start={cli}", "--no-mcp", "--", "--no-such-flag")
        child.expect(pexpect.EOF, timeout=60)
        child.close()
        said = child.before.decode(errors="replace")
    assert child.exitstatus == 2, said
    line = next(ln for ln in said.splitlines() if "refused its command line" in ln)
    # gemini reads --no-X as "not X": its own words are "Unknown arguments: such-flag, suchFlag"
    own = {"gemini": "Unknown arguments: such-flag", "claude": "error: unknown option '--no-such-flag'"}
    assert f"waaah: {cli} refused its command line: {own[cli]}" in line and "--no-such-flag" in line
    assert [e["event"] for e in events(ws)].count("start") == 1  # never restarted
    assert not any(e["event"] == "restart" for e in events(ws))
    assert state(ws)["status"] == "failed"


def test_stopped_server_warns_and_the_session_carries_on(tmp_path):
    import socket

    ws = workspace_for(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with FakeModel([Rule(Text("WORKING-WITHOUT-SERVER"), marker=MARKER)], default=Text("OK")) as model:
        env = cli_env("gemini", tmp_path / "home", ws, model.url)
        env["WAAAH_SERVER_CHECK_SECONDS"] = "1"
        child = spawn(ws, env, "--start=gemini", f"--server={url}")
        child.logfile_read = seen = io.BytesIO()
        child.expect(f"Cannot connect to WAAAH server at {url}. Agent will run without MCP.")
        child.expect("WORKING-WITHOUT-SERVER")
        assert len(workflow_requests(model)) == 1
        # The turn ended outside the loop, but its tool cannot work: no continue prompt (the first
        # would come 2 s after the turn ended), the title and `waaah status` say what it waits for.
        # gemini sets its own title as its turn ends ("Ready"): ours follows it, and stays.
        child.expect("waaah: gemini waits for the WAAAH server")
        pump_for(child, 8)
        titles = re.findall(rb"\x1b\]0;([^\x07]*)\x07", seen.getvalue())
        assert any(b"Ready" in t for t in titles), titles
        assert titles[-1].startswith(b"waaah: gemini waits for the WAAAH server"), titles
        assert continue_requests(model) == []
        status = subprocess.run(
            [WAAAH, "status"], cwd=ws, env=env, capture_output=True, text=True, timeout=30
        )
        assert "waiting for the WAAAH server: unreachable" in status.stdout, status.stdout
        with WaaahServer(port=port):
            log = Path(state(ws)["log_path"])
            pump_until(child, lambda: f"WAAAH server at {url} is reachable again" in log.read_text(), 20)
            pump_until(child, lambda: continue_requests(model), 20)  # one, now that it can work
            pump_for(child, 5)
            assert len(continue_requests(model)) == 1
            assert state(ws)["server_down"] == ""
        assert save_and_exit(child) == 0


def test_gemini_usage_limit_is_waited_out_then_it_keeps_trying(tmp_path):
    from tests.doubles.fake_model import HttpError

    ws = workspace_for(tmp_path)
    rules = [Rule([HttpError(429, retryable=False), Text("AFTER-THE-LIMIT")], marker=MARKER)]
    with FakeModel(rules, default=Text("OK")) as model:
        env = cli_env("gemini", tmp_path / "home", ws, model.url)
        # gemini's limit dialog states no reset time: the default wait applies (short here).
        env.update(WAAAH_LIMIT_DEFAULT_SECONDS="3", WAAAH_LIMIT_MARGIN_SECONDS="0")
        child = spawn(ws, env, "--start=gemini", "--no-mcp")
        # The wait is saved in session.json first, then recorded in events.jsonl: both are awaited.
        pump_until(child, lambda: (st := state_or_none(ws)) and st["limit_until"], 60)
        pump_until(child, lambda: any(e["event"] == "limit" for e in events(ws)), 10)
        limit = [e for e in events(ws) if e["event"] == "limit"][0]
        assert "Usage limit reached" in limit["banner"] and limit["how"].startswith("default")
        started = time.monotonic()
        child.expect("AFTER-THE-LIMIT", timeout=60)
        assert time.monotonic() - started >= 2
        assert any(e["event"] == "limit-resume" for e in events(ws))
        assert len(workflow_requests(model)) == 2  # the one refused, and the retry after the wait
        assert save_and_exit(child) == 0
