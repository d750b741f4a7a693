"""The supervised session, end to end through a real PTY, over the simulated agent."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

from tests.conftest import pid_alive
from tests.runtime.helpers import (
    WAAAH,
    cast_size,
    delivered,
    events,
    pump_for,
    pump_until,
    retry_until,
    session_dirs,
    sim_env,
    sim_messages,
    spawn_waaah,
    state,
    typed,
    unchanged_for,
)
from waaah_agent.core.supervise.policy import CONTINUE_PROMPT, HEARTBEAT_PROMPT
from waaah_agent.runtime.clis import CHECKOUT
from waaah_agent.runtime.supervise.logfiles import replay
from waaah_agent.runtime.supervise.overlay import LEAVE_MODES
from waaah_agent.runtime.supervise.session.ending import headless_line
from waaah_agent.runtime.workspace import find_workflow

pytestmark = pytest.mark.timeout(60)


def start_and_deliver(ws: Path, env: dict[str, str], *args: str, nudge: bool = False) -> pexpect.spawn:
    """Start a session and wait until the agent has answered the workflow (idle again).

    Nudges (continue prompts, heartbeats) are off unless a test is about them, so that what the
    test types is all the agent gets.
    """
    child = spawn_waaah(ws, "--start=simulated", *args, *([] if nudge else ["--no-nudge"]), env=env)
    retry_until(lambda: session_dirs(ws) and delivered(ws))
    retry_until(lambda: sim_messages(ws, state(ws)["native_session_id"], role="model"))
    return child


def wait_exit(child: pexpect.spawn, timeout: float = 15) -> int:
    child.expect(pexpect.EOF, timeout=timeout)
    child.close()
    return child.exitstatus if child.exitstatus is not None else 128 + child.signalstatus


def save_and_exit(child: pexpect.spawn) -> int:
    child.send("\x03")
    child.expect("save and exit")
    child.send("s")
    return wait_exit(child)


def test_workflow_arrives_once_and_is_submitted(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home))
    sid = state(workspace)["native_session_id"]
    expected = find_workflow("waaah-orc", workspace).text.strip()
    retry_until(lambda: sim_messages(workspace, sid))
    # "Once" is a claim about a stretch of time: a duplicate paste or a re-sent Enter would show
    # up within it. Nothing is awaited here; the quiet stretch is the check.
    pump_for(child, 1.5)
    assert sim_messages(workspace, sid) == [expected]
    assert state(workspace)["workflow_delivered"] is True
    phases = [e["phase"] for e in events(workspace) if e["event"] == "delivery"]
    assert phases == ["pasted", "entered", "confirmed"]
    assert save_and_exit(child) == 0


LOST_PASTE = [
    "pasted",
    "paste never appeared in the input box: pasting again in 5 s",
    "pasted again (1)",
    "enter",
    "confirmed",
]
LOST_ENTERS = [
    "pasted",
    "enter",
    "enter re-sent (1)",
    "enter re-sent (2)",
    "enter re-sent (3): the prompt is still in the input box; again in 5 s if it stays",
    "enter re-sent (4): the prompt is still in the input box; again in 10 s if it stays",
    "confirmed",
]


@pytest.mark.parametrize(
    ("knob", "notes"),
    [({"SIM_DROP_PASTES": "1"}, LOST_PASTE), ({"SIM_DROP_ENTERS": "1,2,3,4"}, LOST_ENTERS)],
    ids=["paste-lost", "four-enters-lost"],
)
def test_a_workflow_the_agent_missed_goes_again_and_arrives_once(workspace, fake_home, knob, notes):
    """A CLI too busy drawing (gemini on a loaded machine) can miss a paste: nothing shows in
    its box; one that drops Enters leaves the text in it (the first and the three quick
    re-sends lost here). Given up on, the workflow never reached the agent, and nothing nudges
    an agent that never had it: it sat at its prompt all night."""
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=sim_env(fake_home, **knob))
    pump_until(child, lambda: session_dirs(workspace) and delivered(workspace), timeout=60)
    sid = state(workspace)["native_session_id"]
    pump_until(child, lambda: sim_messages(workspace, sid, role="model"))
    pump_for(child, 1.5)  # a duplicate paste or Enter would show within this stretch
    expected = find_workflow("waaah-orc", workspace).text.strip()
    assert sim_messages(workspace, sid) == [expected]  # once: only what was lost went again
    assert [e["note"] for e in events(workspace) if e["event"] == "delivery"] == notes
    assert state(workspace)["workflow_delivered"] is True
    assert save_and_exit(child) == 0


def test_a_sent_prompt_whose_paste_never_showed_is_typed_later_not_dropped(workspace, fake_home):
    env = sim_env(fake_home, SIM_DROP_PASTES="2")  # the workflow is the first paste
    child = start_and_deliver(workspace, env)
    sid = state(workspace)["native_session_id"]
    sent = subprocess.run(
        [WAAAH, "send", "the prompt sent"], cwd=workspace, env=env, capture_output=True, text=True, timeout=60
    )
    assert sent.returncode == 0, sent.stderr
    pump_until(child, lambda: len(sim_messages(workspace, sid, role="model")) >= 2, timeout=40)
    pump_for(child, 1.5)
    assert sim_messages(workspace, sid)[1:] == ["the prompt sent"]
    sends = [e["note"] for e in events(workspace) if e["event"] == "delivery" and e["kind"] == "send"]
    assert sends[:3] == [
        "pasted",
        "paste never appeared in the input box: pasting again in 5 s",
        "pasted again (1)",
    ]
    assert sends[-1] == "confirmed"
    assert (session_dirs(workspace)[-1] / "queue.jsonl").read_text() == ""  # left the queue once typed
    assert save_and_exit(child) == 0


def test_typed_keys_and_resize_reach_the_agent(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home))
    sid = state(workspace)["native_session_id"]
    retry_until(lambda: sim_messages(workspace, sid, role="model"))
    typed(child, "hello from the keyboard")
    retry_until(lambda: "hello from the keyboard" in sim_messages(workspace, sid))
    child.setwinsize(30, 100)
    child.expect("SIZE=100x30")
    assert any(e["event"] == "resize" and e["cols"] == 100 for e in events(workspace))
    assert save_and_exit(child) == 0


def test_logs_are_clean_and_the_cast_replays_the_same_bytes(workspace, fake_home):
    env = sim_env(fake_home, GEMINI_API_KEY="AIzaSyD-secret-value-1234567890abcdefgh")
    child = start_and_deliver(workspace, env)
    seen = bytearray()
    typed(child, "print the key AIzaSyD-secret-value-1234567890abcdefgh please")
    child.expect("Received")
    assert save_and_exit(child) == 0
    seen += child.before or b""
    st = state(workspace)
    text = Path(st["log_path"]).read_text()
    lines = text.splitlines()
    assert all(line[:4].isdigit() and line[10] == "T" for line in lines), lines[:3]
    assert "\x1b" not in text
    assert any("SIMULATED AGENT" in line for line in lines)
    assert "secret-value" not in text and "[REDACTED]" in text
    # Spinner frames collapse: far fewer "Thinking" lines than frames drawn.
    assert sum("Thinking" in line for line in lines) <= 4
    cast = Path(st["cast_path"])
    header = json.loads(cast.read_text().splitlines()[0])
    assert header["version"] == 2 and header["width"] == 120 and header["height"] == 40
    assert b"SIMULATED AGENT" in replay(cast)


def test_cast_is_lossless(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home))
    chunks = bytearray()
    child.logfile_read = _Collector(chunks)
    typed(child, "/quit")
    child.expect(pexpect.EOF)
    child.close()
    recorded = replay(Path(state(workspace)["cast_path"]))
    # Everything the agent wrote after we started collecting is in the record, byte for byte.
    # (What follows is ours: the modes reset at the end, then the exit text.)
    agent_part = bytes(chunks).split(LEAVE_MODES)[0].rstrip(b"\r\n")
    assert agent_part and agent_part in recorded


class _Collector:
    def __init__(self, buf: bytearray) -> None:
        self.buf = buf

    def write(self, data: bytes) -> None:
        self.buf += data

    def flush(self) -> None:
        pass


def test_ctrl_c_menu_choices(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home))
    sid = state(workspace)["native_session_id"]
    # continue: the menu goes away and the agent keeps working with our keys
    child.send("\x03")
    child.expect(r"\[c\] continue")
    child.send("c")
    typed(child, "still here")
    retry_until(lambda: "still here" in sim_messages(workspace, sid))
    # pass Ctrl+C to the agent: it sees the key
    child.send("\x03")
    child.expect(r"\[p\] pass Ctrl\+C")
    child.send("p")
    child.expect("Press Ctrl\\+C again to exit")
    assert state(workspace)["status"] == "running"
    # save and exit
    child.send("\x03")
    child.expect("save and exit")
    child.send("s")
    # waaah is not on this PATH (the checkout's .venv): the command names it in full, so it runs pasted
    child.expect(f"Resume with: {WAAAH} agent --start=simulated --as=waaah-orc --resume")
    assert wait_exit(child) == 0
    st = state(workspace)
    assert st["status"] == "stopped"
    assert not pid_alive(st["agent_pid"])
    choices = [e["action"] for e in events(workspace) if e["event"] == "menu"]
    assert choices == ["open", "continue", "open", "pass Ctrl+C", "open", "save and exit"]


def test_resume_continues_the_same_session(workspace, fake_home):
    env = sim_env(fake_home)
    child = start_and_deliver(workspace, env)
    first = state(workspace)
    retry_until(lambda: sim_messages(workspace, first["native_session_id"], role="model"))
    assert save_and_exit(child) == 0

    child = spawn_waaah(workspace, "--start=simulated", "--resume", env=env)
    child.expect("Resumed session " + first["native_session_id"])
    again = state(workspace)
    assert len(session_dirs(workspace)) == 1
    assert again["id"] == first["id"] and again["native_session_id"] == first["native_session_id"]
    assert again["argv"][-2:] == ["--resume", first["native_session_id"]]
    # The conversation already has the workflow: not typed again; a continue prompt instead.
    retry_until(lambda: len(sim_messages(workspace, first["native_session_id"])) == 2)
    assert sim_messages(workspace, first["native_session_id"])[1] == CONTINUE_PROMPT
    assert save_and_exit(child) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_save_and_exit(workspace, fake_home, signum):
    child = start_and_deliver(workspace, sim_env(fake_home))
    agent_pid = state(workspace)["agent_pid"]
    os.kill(child.pid, signum)
    assert wait_exit(child) == 0
    st = state(workspace)
    assert st["status"] == "stopped"
    assert not pid_alive(agent_pid)
    stop = [e for e in events(workspace) if e["event"] == "stop"]
    assert stop and signal.Signals(signum).name in stop[0]["detail"]


@pytest.mark.parametrize("stubborn", [False, True])
def test_sigkill_of_the_supervisor_leaves_no_agent(workspace, fake_home, stubborn):
    env = sim_env(fake_home, SIM_IGNORE_TERM="1" if stubborn else "0")
    child = start_and_deliver(workspace, env)
    agent_pid = state(workspace)["agent_pid"]
    assert pid_alive(agent_pid)
    os.kill(child.pid, signal.SIGKILL)
    started = time.monotonic()
    retry_until(lambda: not pid_alive(agent_pid), timeout=5)
    print(f"agent gone {time.monotonic() - started:.3f}s after the supervisor's SIGKILL")
    child.close(force=True)


def test_agent_that_ignores_sigterm_is_killed_after_the_grace(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home, SIM_IGNORE_TERM="1"), "--stop-grace", "1")
    agent_pid = state(workspace)["agent_pid"]
    os.kill(child.pid, signal.SIGTERM)
    assert wait_exit(child) == 0
    assert not pid_alive(agent_pid)
    assert any(e["event"] == "kill" for e in events(workspace))


def test_crash_restarts_with_backoff_and_the_native_resume(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home), nudge=True)
    native = state(workspace)["native_session_id"]
    old_pid = state(workspace)["agent_pid"]
    typed(child, "/crash 3")
    child.expect("restarting in")
    child.expect("Resumed session " + native)
    # The notice is one row, taken back before the restarted agent draws: nothing of ours stays.
    between = child.before
    assert between.index(b"\r\x1b[2K") < between.index(b"\x1b]0;"), between[:300]
    st = state(workspace)
    assert st["restarts"] == 1 and st["agent_pid"] != old_pid and st["status"] == "running"
    assert st["argv"][-2:] == ["--resume", native]
    restart = [e for e in events(workspace) if e["event"] == "restart"]
    assert restart and "exit code 3" in restart[0]["after"] and 0.5 <= restart[0]["delay"] <= 1.0
    # Back in business: the agent is asked to continue its loop.
    retry_until(lambda: CONTINUE_PROMPT in sim_messages(workspace, native))
    assert save_and_exit(child) == 0


def test_restart_budget_exhausted_stops_with_a_message(workspace, fake_home):
    env = sim_env(fake_home, SIM_CRASH_AT_START="7", WAAAH_RESTART_BASE_SECONDS="0.05")
    child = spawn_waaah(workspace, "--start=simulated", "--restart-budget", "2", env=env)
    child.expect("keeps stopping \\(last: exit code 7\\)")
    assert wait_exit(child) == 11
    st = state(workspace)
    assert st["status"] == "failed" and st["restarts"] == 2
    assert [e["event"] for e in events(workspace)].count("start") == 3


def test_user_quit_is_a_clean_exit(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home))
    typed(child, "/quit")
    child.expect("Goodbye")
    assert wait_exit(child) == 0
    assert state(workspace)["status"] == "exited"
    assert state(workspace)["exit_code"] == 0


def test_headless_runs_without_a_terminal(workspace, fake_home):
    proc = subprocess.Popen(
        [WAAAH, "agent", "--start=simulated"],
        cwd=workspace,
        env=sim_env(fake_home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        retry_until(lambda: session_dirs(workspace) and delivered(workspace))
        sid = state(workspace)["native_session_id"]
        retry_until(lambda: sim_messages(workspace, sid))
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.decode()
    assert proc.returncode == 0, text
    assert re.search(r"^\[waaah\] \S+ start: pid \d+ \(fresh\); session simulated-", text, re.MULTILINE), text
    # One line per event a person reads, in the order written, each once (docs/supervisor.md).
    shown = [line for line in text.splitlines() if line.startswith("[waaah] ")]
    expected = [line for line in map(headless_line, events(workspace)) if line is not None]
    assert shown == expected, (shown, expected)
    kinds = {line.split()[2] for line in shown}
    assert {"start:", "state:", "delivery:", "stop:", "end:"} <= kinds, kinds
    assert all(
        re.match(r"^\[waaah\] \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d \S+: ", line)
        for line in shown
    )
    assert "\x1b[" not in text  # no TUI frames on a non-terminal stdout
    assert state(workspace)["status"] == "stopped"
    cast = json.loads(Path(state(workspace)["cast_path"]).read_text().splitlines()[0])
    assert (cast["width"], cast["height"]) == (120, 40)


def run_once(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAAAH, "agent", *args],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_missing_cli_says_how_to_install(workspace, fake_home):
    env = sim_env(fake_home)
    env["PATH"] = "/nonexistent"
    env["WAAAH_CLI_DIR"] = "/nonexistent"  # nor installed beside the checkout
    result = run_once(workspace, env, "--start=gemini")
    assert result.returncode == 3
    assert f"gemini CLI not found. Install with: {CHECKOUT}/scripts/install_clis.sh gemini (" in result.stderr
    result = run_once(workspace, env, "--start=claude")
    assert result.returncode == 3
    assert f"claude CLI not found. Install with: {CHECKOUT}/scripts/install_clis.sh claude (" in result.stderr


def test_unknown_workflow_names_the_places_searched(workspace, fake_home):
    result = run_once(workspace, sim_env(fake_home), "--start=simulated", "--as=nope")
    assert result.returncode == 4
    line = result.stderr.strip()
    assert "\n" not in line
    assert ".agent/workflows/nope.md" in line and "available: waaah-orc" in line


def test_workspace_workflow_wins_and_slash_names_work(workspace, fake_home):
    folder = workspace / ".agent" / "workflows"
    folder.mkdir(parents=True)
    (folder / "mine.md").write_text("---\nname: mine\n---\nMY OWN WORKFLOW TEXT\n")
    child = start_and_deliver(workspace, sim_env(fake_home), "--as=/mine")
    sid = state(workspace)["native_session_id"]
    retry_until(lambda: sim_messages(workspace, sid) == ["MY OWN WORKFLOW TEXT"])
    assert save_and_exit(child) == 0


def test_outside_git_headless_warns_and_carries_on(tmp_path, fake_home):
    plain = tmp_path / "plain"
    plain.mkdir()
    env = sim_env(fake_home)
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path)
    proc = subprocess.Popen(
        [WAAAH, "agent", "--start=simulated"],
        cwd=plain,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    retry_until(lambda: session_dirs(plain) and delivered(plain))
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 0
    assert b"not in a git repository; git is recommended" in out
    assert not (plain / ".git").exists()


def test_corrupt_session_file_is_moved_aside(workspace, fake_home):
    env = sim_env(fake_home)
    child = start_and_deliver(workspace, env)
    assert save_and_exit(child) == 0
    bad = session_dirs(workspace)[0] / "session.json"
    bad.write_text("{ this is not json")
    proc = subprocess.Popen(
        [WAAAH, "agent", "--start=simulated", "--resume"],
        cwd=workspace,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    retry_until(lambda: len(session_dirs(workspace)) == 2 and delivered(workspace))
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 0
    first_line = out.decode().splitlines()[0]
    assert f"session file {bad} is unreadable" in first_line and "starting a fresh session" in first_line
    assert list(bad.parent.glob("session.json.corrupt-*")), "the bad file is kept for inspection"


def test_two_supervisors_never_drive_one_session(workspace, fake_home):
    env = sim_env(fake_home)
    child = start_and_deliver(workspace, env)
    result = run_once(workspace, env, "--start=simulated", "--resume")
    assert result.returncode == 5
    assert "being supervised by another waaah process" in result.stderr
    assert save_and_exit(child) == 0


def test_spawn_size_comes_from_the_terminal(workspace, fake_home):
    # A COLUMNS/LINES the user's shell exported is not the agent's terminal: its PTY is.
    child = start_and_deliver(workspace, sim_env(fake_home, COLUMNS="80", LINES="24"))
    typed(child, "/size")
    child.expect("SIZE=120x40")
    assert save_and_exit(child) == 0


def test_terminal_is_restored_after_every_exit(workspace, fake_home):
    env = sim_env(fake_home)
    script = f"stty -a; {WAAAH} agent --start=simulated; echo EXIT=$?; stty -a"
    child = pexpect.spawn("bash", ["-c", script], cwd=str(workspace), env=env, dimensions=(40, 120))
    child.delaybeforesend = None
    child.expect("icanon")
    retry_until(lambda: session_dirs(workspace) and delivered(workspace))
    retry_until(lambda: sim_messages(workspace, state(workspace)["native_session_id"], role="model"))
    typed(child, "/quit")
    child.expect("EXIT=0")
    child.expect(pexpect.EOF)
    after = child.before.decode()
    assert " icanon" in after and " echo" in after and "-icanon" not in after


def test_a_stalled_terminal_does_not_freeze_the_supervisor(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home))
    typed(child, "/flood 30000")  # ~3 MB: far more than the terminal buffers hold
    # Nobody reads the terminal: wait until the supervisor holds far more than the terminal
    # takes (~70 KB) and has stopped taking the agent's output (its queue is full).
    stopped_reading = unchanged_for(lambda: cast_size(workspace), 0.5)
    retry_until(lambda: cast_size(workspace) > 512 * 1024 and stopped_reading())
    os.kill(child.pid, signal.SIGTERM)
    # The loop is not stuck in a write: it handles the signal and saves the state.
    retry_until(lambda: state(workspace)["status"] == "stopped", timeout=15)
    assert not pid_alive(state(workspace)["agent_pid"])
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    assert child.exitstatus == 0


def test_the_screen_catches_up_after_a_flood(workspace, fake_home):
    """A reply preceded by ~3 MB at once outruns the screen model (its backlog is cut); once
    the agent is quiet the screen is current again: the turn's end is seen and answered."""
    env = sim_env(fake_home, SIM_REPLY_FLOOD="30000")
    child = spawn_waaah(workspace, "--start=simulated", env=env)
    pump_until(child, lambda: session_dirs(workspace) and delivered(workspace))
    native = state(workspace)["native_session_id"]
    pump_until(child, lambda: sim_messages(workspace, native, role="model"))
    flooded_at = time.monotonic()
    pump_until(child, lambda: CONTINUE_PROMPT in sim_messages(workspace, native), 30)
    assert time.monotonic() - flooded_at < 15  # seconds, not the minutes of a 1 % share
    assert save_and_exit(child) == 0


def test_loop_left_gets_one_continue_prompt(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home), nudge=True)
    native = state(workspace)["native_session_id"]
    retry_until(lambda: len(sim_messages(workspace, native)) >= 2)
    # The agent answers the continue prompt and its turn ends again, as the supervisor sees.
    pump_until(child, lambda: turn_ended_after_nudge(workspace))
    # A second continue prompt would come 2 s (the settle time) after that turn end; the next
    # nudge must wait at least 10 s. Nothing is awaited here: the quiet stretch is the check.
    pump_for(child, 3)
    assert sim_messages(workspace, native)[1:] == [CONTINUE_PROMPT]
    nudges = [e for e in events(workspace) if e["event"] == "nudge"]
    assert [n["kind"] for n in nudges] == ["continue"]
    assert save_and_exit(child) == 0


def turn_ended_after_nudge(ws: Path) -> bool:
    """The supervisor saw the agent busy, then ready, after its last nudge."""
    found = events(ws)
    nudges = [i for i, e in enumerate(found) if e["event"] == "nudge"]
    states = [e["state"] for e in found[nudges[-1] :] if e["event"] == "state"] if nudges else []
    return "busy" in states and states[-1] == "ready"


def test_silence_at_the_prompt_gets_a_heartbeat(workspace, fake_home):
    child = start_and_deliver(workspace, sim_env(fake_home), "--heartbeat", "3", nudge=True)
    native = state(workspace)["native_session_id"]
    retry_until(lambda: HEARTBEAT_PROMPT in sim_messages(workspace, native), timeout=30)
    assert save_and_exit(child) == 0


def test_a_hang_gets_esc_then_a_restart(workspace, fake_home):
    child = spawn_waaah(
        workspace, "--start=simulated", "--stall-timeout", "2", env=sim_env(fake_home, SIM_HANG="hard")
    )
    # The workflow reply never comes (the agent hangs): Esc after 2 s, restart 2 s later.
    retry_until(
        lambda: session_dirs(workspace) and any(e["event"] == "restart" for e in events(workspace)), 30
    )
    stall = [e for e in events(workspace) if e["event"] == "stall"]
    assert stall and stall[0]["action"] == "esc"
    assert "stalled" in [e for e in events(workspace) if e["event"] == "restart"][0]["after"]
    pump_until(child, lambda: [e["event"] for e in events(workspace)].count("start") == 2)
    assert state(workspace)["argv"][-2] == "--resume"
    assert save_and_exit(child) == 0


def test_sessions_and_status_show_a_live_session(workspace, fake_home):
    env = sim_env(fake_home)
    child = start_and_deliver(workspace, env, "--heartbeat", "600", nudge=True)

    def ask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [WAAAH, *args, "--json"], cwd=workspace, env=env, capture_output=True, text=True, timeout=30
        )

    live = json.loads(ask("status").stdout)
    assert len(live) == 1 and live[0]["live"] is True and live[0]["status"] == "running"
    assert live[0]["agent_state"] == "ready" and live[0]["id"] == state(workspace)["id"]
    assert live[0]["next_heartbeat"]  # when the heartbeat is due if the agent stays idle
    assert [r["id"] for r in json.loads(ask("sessions").stdout)] == [state(workspace)["id"]]
    assert save_and_exit(child) == 0
    after = json.loads(ask("status").stdout)
    assert after[0]["live"] is False and after[0]["status"] == "stopped"


def test_a_usage_limit_is_waited_out_then_the_agent_continues(workspace, fake_home):
    env = sim_env(fake_home, WAAAH_LIMIT_MARGIN_SECONDS="1")
    child = start_and_deliver(workspace, env, nudge=True)
    native = state(workspace)["native_session_id"]
    seen = bytearray()
    child.logfile_read = _Collector(seen)
    typed(child, "/limit try again in 3 seconds")
    pump_until(child, lambda: state(workspace)["limit_until"], 10)
    pump_until(child, lambda: b"\x1b]0;waaah: simulated usage limit, waiting until" in seen, 10)  # the title
    limit = [e for e in events(workspace) if e["event"] == "limit"][0]
    assert limit["how"].startswith("parsed") and "try again in 3 seconds" in limit["banner"]
    started = time.monotonic()
    quota = subprocess.run([WAAAH, "quota", "--json"], cwd=workspace, env=env, capture_output=True, text=True)
    simulated = json.loads(quota.stdout)["simulated"]  # what `waaah quota` knows from the session
    assert simulated["state"] == "limited" and simulated["reset_at"][:19] == limit["until"][:19]
    assert simulated["source"] == f"session {state(workspace)['id']}"
    # Nothing is typed while the limit lasts; then the agent is asked to carry on.
    pump_until(child, lambda: CONTINUE_PROMPT in sim_messages(workspace, native), 30)
    assert time.monotonic() - started >= 2.5
    assert state(workspace)["limit_until"] == ""
    assert save_and_exit(child) == 0


@pytest.mark.parametrize("stop", ["agent-exit", "sigterm"])
def test_cast_keeps_every_byte_of_a_flood(workspace, fake_home, stop):
    """Under a flood (the relay's fastest path), the .cast holds every byte the terminal got,
    whether the agent ends by itself or the supervisor is stopped by SIGTERM mid-flood."""
    env = sim_env(fake_home, SIM_MODE="blast", SIM_MB="6" if stop == "agent-exit" else "500")
    child = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env)
    shown = bytearray()
    child.logfile_read = _Collector(shown)
    if stop == "sigterm":
        pump_until(child, lambda: len(shown) > 4 * 1024 * 1024)
        os.kill(child.pid, signal.SIGTERM)
    while True:  # read fast: pexpect's expect() would search megabytes again and again
        try:
            child.read_nonblocking(1 << 20, timeout=30)
        except pexpect.EOF:
            break
    child.close()
    recorded = replay(Path(state(workspace)["cast_path"]))
    agent_part = recorded[recorded.index(b"START blast") :]
    at = bytes(shown).index(b"START blast")
    assert len(agent_part) > 4 * 1024 * 1024
    assert bytes(shown[at : at + len(agent_part)]) == agent_part
    trailer = bytes(shown[at + len(agent_part) :])
    assert len(trailer) < 2000 and b"Reading" not in trailer, trailer[:200]
    if stop == "agent-exit":
        assert b"BLAST-END" in agent_part


def test_a_slow_terminal_gets_the_agent_s_last_output_in_full(workspace, fake_home):
    """The agent ends with up to 1 MB still queued for a slow terminal: the supervisor stays
    until the terminal has taken all of it (not a fixed second), at the terminal's pace."""
    env = sim_env(fake_home, SIM_MODE="blast", SIM_MB="2")
    child = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env)
    shown = bytearray()
    child.logfile_read = _Collector(shown)
    child.expect("START blast")
    # Nobody reads: the supervisor's queue for the terminal fills up until it stops taking the
    # agent's output (the .cast stops growing, with far more in it than the terminal holds).
    stopped_reading = unchanged_for(lambda: cast_size(workspace), 0.5)
    retry_until(lambda: cast_size(workspace) > 512 * 1024 and stopped_reading())
    started = time.monotonic()
    taken = 0
    while True:  # then a slow reader: 32 KB, a pause of 50 ms, and so on (~640 KB/s)
        try:
            taken += len(child.read_nonblocking(65536, timeout=30))
        except pexpect.EOF:
            break
        if taken >= 32768:
            taken = 0
            time.sleep(0.05)  # the slow reader's pace is the behaviour under test
    child.close()
    assert child.exitstatus == 0
    end = re.search(rb"BLAST-END (\d+) (\d+)", bytes(shown))
    assert end, bytes(shown[-300:])
    sent, newlines = int(end.group(1)), int(end.group(2))
    agent_part = bytes(shown[shown.index(b"START blast") :])
    body = agent_part[agent_part.index(b"\n") + 1 : end.start()]
    assert len(body) >= sent + newlines  # every byte (each \n arrives as \r\n)
    assert time.monotonic() - started > 1.5  # the drain outlasted the old fixed second


def test_a_full_disk_costs_log_lines_not_the_session(workspace, fake_home):
    """Files may not grow past 2 MB (RLIMIT_FSIZE, as a full disk): the agent's 6 MB still
    reach the terminal, one line in the text log says what happened, the .cast holds whole lines up to the
    failure, the text log says how much is missing, and the supervisor exits 0."""

    def two_mb_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, resource.RLIM_INFINITY))

    env = sim_env(fake_home, SIM_MODE="blast", SIM_MB="6")
    child = spawn_waaah(
        workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env, preexec_fn=two_mb_files
    )
    shown = bytearray()
    child.logfile_read = _Collector(shown)
    while True:
        try:
            child.read_nonblocking(1 << 20, timeout=30)
        except pexpect.EOF:
            break
    child.close()
    assert child.exitstatus == 0
    seen = bytes(shown)
    assert b"cannot write" not in seen  # never over the agent's screen: the warning is in the log
    assert re.search(rb"BLAST-END \d+ \d+", seen)
    st = state(workspace)
    recorded = replay(Path(st["cast_path"]))  # every line is whole JSON
    assert 1_000_000 < len(recorded) <= 2_000_000
    assert seen.startswith(recorded[recorded.index(b"START blast") :], seen.index(b"START blast"))
    log = Path(st["log_path"]).read_text()
    assert len(re.findall(r"\[waaah\] WARNING [\w.]+: cannot write .*\.cast \(", log)) == 1
    assert re.search(r"\[waaah\] \d+ bytes could not be written to .*\.cast", log)


def test_a_quiet_agent_never_wakes_the_supervisor(workspace, fake_home):
    """Nothing runs while the agent is silent: no polling, no periodic flush."""
    env = sim_env(fake_home, SIM_MODE="silent", SIM_SECONDS="8")
    child = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env)
    child.expect("START silent")
    # The first output's work is over once its log flush, the last of its timers, has written
    # the .cast (only that flush, or the end, writes it).
    retry_until(lambda: "START silent" in Path(state(workspace)["cast_path"]).read_text())

    def wakeups() -> int:
        status = Path(f"/proc/{child.pid}/status").read_text()
        return int(re.search(r"voluntary_ctxt_switches:\s+(\d+)", status).group(1))

    before = wakeups()
    pump_for(child, 4)  # the quiet stretch is the check: nothing must wake the supervisor
    assert wakeups() - before <= 1
    child.expect("SILENT-END")
    assert wait_exit(child) == 0


WAIT_STREAM = (
    Path(__file__).resolve().parents[1] / "fixtures" / "streams" / "gemini-0.61.0" / "wait-loop.jsonl.gz"
)


def test_an_agent_waiting_in_its_loop_costs_the_supervisor_almost_nothing(workspace, fake_home):
    """gemini's recorded wait_for_prompt redraws (~20 frames, ~68 KB a second) at their pace:
    the supervisor relays and records every byte, yet spends little CPU (it took 9-11 % of a
    core feeding each repeated frame to its screen model and text log; ~1.5 % now)."""
    env = sim_env(fake_home, SIM_MODE="replay", SIM_REPLAY=str(WAIT_STREAM), SIM_SECONDS="9")
    child = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env)
    child.expect("START replay")
    pump_for(child, 1)

    def cpu() -> float:
        fields = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before, started = cpu(), time.monotonic()
    pump_for(child, 6)
    share = (cpu() - before) / (time.monotonic() - started)
    child.expect("REPLAY-END")
    assert wait_exit(child) == 0
    assert share < 0.05, f"{share:.1%} of a core"
    # Lossless all the same: the .cast holds every byte the agent wrote.
    cast = Path(state(workspace)["cast_path"])
    assert replay(cast).count(b"\x1b[2K\x1b[1A") > 100
