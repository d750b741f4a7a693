"""A supervisor SIGKILLed at the worst moment of a delivery: no prompt duplicated, none lost.

The in-process proof kills the machine before each of its actions (tests/unit/test_machine.py);
this is the same through a real PTY, at the one moment that used to duplicate the workflow: the
CLI has taken the Enter (the prompt is in its transcript) but the screen has not shown it yet,
so the supervisor has not confirmed the delivery when it dies.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pexpect

from tests.conftest import pid_alive
from tests.runtime.helpers import (
    WAAAH,
    events,
    pump_for,
    pump_until,
    retry_until,
    session_dirs,
    sim_env,
    sim_messages,
    spawn_waaah,
    state,
)
from waaah_agent.core.mcp.inbox_records import ControlCommand, ControlRecord
from waaah_agent.core.supervise.policy import CONTINUE_PROMPT
from waaah_agent.runtime.night.control import tell
from waaah_agent.runtime.workspace import find_workflow


def noted(ws, note: str) -> bool:
    """A delivery step with this note is in events.jsonl."""
    return bool(session_dirs(ws)) and any(e["event"] == "delivery" and e["note"] == note for e in events(ws))


def test_a_sigkill_between_the_enter_and_its_confirmation_neither_repeats_nor_loses_the_workflow(
    workspace, fake_home
):
    workflow = find_workflow("waaah-orc", workspace).text.strip()
    env = sim_env(fake_home, SIM_SUBMIT_LAG="30")  # taken at once, shown 30 s later
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=env)
    retry_until(
        lambda: noted(workspace, "enter") and sim_messages(workspace, state(workspace)["native_session_id"])
    )
    before = state(workspace)
    assert before["workflow_pending"] is True and before["workflow_delivered"] is False
    os.kill(child.pid, signal.SIGKILL)
    retry_until(lambda: not pid_alive(before["agent_pid"]), timeout=5)  # it dies with the supervisor
    child.close(force=True)

    again = spawn_waaah(workspace, "--start=simulated", "--resume", "--no-nudge", env=sim_env(fake_home))
    sid = before["native_session_id"]
    again.expect("Resumed session " + sid)
    retry_until(lambda: len(sim_messages(workspace, sid)) >= 2)
    assert sim_messages(workspace, sid) == [workflow, CONTINUE_PROMPT]
    settled = [e for e in events(workspace) if e["event"] == "workflow-settled"]
    assert settled and settled[0]["delivered"] is True
    after = json.loads((workspace / ".waaah" / "sessions" / before["id"] / "session.json").read_text())
    assert after["workflow_delivered"] is True
    again.send("\x03")
    again.expect("save and exit")
    again.send("s")
    again.expect(pexpect.EOF, timeout=15)


def test_a_sigkill_before_the_enter_types_the_workflow_again_once(workspace, fake_home):
    """Pasted but never submitted: the CLI's transcript does not have it, so it is typed again."""
    workflow = find_workflow("waaah-orc", workspace).text.strip()
    env = sim_env(fake_home)
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=env)
    retry_until(lambda: noted(workspace, "pasted"))
    before = state(workspace)
    os.kill(child.pid, signal.SIGKILL)
    retry_until(lambda: not pid_alive(before["agent_pid"]), timeout=5)
    child.close(force=True)
    sid = before["native_session_id"]
    taken = bool(sim_messages(workspace, sid))  # rarely, the Enter (0.2 s after the paste) beat the kill
    again = spawn_waaah(workspace, "--start=simulated", "--resume", "--no-nudge", env=env)
    retry_until(lambda: state(workspace)["workflow_delivered"])
    retry_until(lambda: len(sim_messages(workspace, sid)) == (2 if taken else 1))
    assert sim_messages(workspace, sid) == ([workflow, CONTINUE_PROMPT] if taken else [workflow])
    again.send("\x03")
    again.expect("save and exit")
    again.send("s")
    again.expect(pexpect.EOF, timeout=15)


def test_sends_a_killed_supervisor_never_read_are_typed_once_after_resume(workspace, fake_home):
    """The supervisor frozen (SIGSTOP) while prompts are sent (each "queued"), with a stop and a
    pause among them, then SIGKILLed: --resume types each prompt once, in order, and leaves the
    dead run's stop and pause alone; a second resume types none of them again."""
    env = sim_env(fake_home)
    child = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", env=env)
    retry_until(lambda: noted(workspace, "confirmed"))
    before = state(workspace)
    sid = before["native_session_id"]
    os.kill(child.pid, signal.SIGSTOP)
    folder = session_dirs(workspace)[-1]
    try:
        for i in (1, 2, 3):
            done = subprocess.run(
                [WAAAH, "send", f"killed-{i}"],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert done.returncode == 0 and "queued" in done.stdout, done.stdout + done.stderr
            # What `waaah stop` and `waaah pause` write (they would wait for the frozen supervisor).
            tell(folder, ControlRecord(time.time(), ControlCommand.STOP if i == 1 else ControlCommand.PAUSE))
    finally:
        os.kill(child.pid, signal.SIGKILL)
    retry_until(lambda: not pid_alive(before["agent_pid"]), timeout=5)
    child.close(force=True)
    sent = ["killed-1", "killed-2", "killed-3"]

    def took() -> list[str]:
        return [m for m in sim_messages(workspace, sid) if m.startswith("killed-")]

    again = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", "--resume", env=env)
    again.expect("Resumed session " + sid)
    pump_until(again, lambda: took() == sent, timeout=60)
    pump_for(again, 2)
    assert took() == sent
    after = state(workspace)
    assert after["paused"] is False and after["status"] == "running", after["status"]
    again.send("\x03")
    again.expect("save and exit")
    again.send("s")
    again.expect(pexpect.EOF, timeout=15)

    third = spawn_waaah(workspace, "--start=simulated", "--no-mcp", "--no-nudge", "--resume", env=env)
    third.expect("Resumed session " + sid)
    pump_until(third, lambda: noted_twice(workspace), timeout=30)
    pump_for(third, 3)
    assert took() == sent, "typed again by a later supervisor"
    third.send("\x03")
    third.expect("save and exit")
    third.send("s")
    third.expect(pexpect.EOF, timeout=15)


def noted_twice(ws) -> bool:
    """The third supervisor's start is recorded (the session has three)."""
    return len([e for e in events(ws) if e["event"] == "start"]) >= 3
