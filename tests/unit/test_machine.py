"""The supervisor machine in-process: exact actions for each situation, and whole nights on a fake clock."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.unit.night import (
    BUSY,
    DRAFT_AT,
    EVENING,
    HOUR,
    READY,
    WORKFLOW,
    Exit,
    ModelCli,
    Night,
    whole_night,
)
from waaah_agent.core.supervise import events as ev
from waaah_agent.core.supervise.backoff import Restarts
from waaah_agent.core.supervise.delivery import ENTER, PASTE_END, PASTE_START
from waaah_agent.core.supervise.lifecycle import SessionStatus, final_status, first_prompt, restart_decision
from waaah_agent.core.supervise.machine import Machine, MachineConfig, Saved
from waaah_agent.core.supervise.policy import CONTINUE_PROMPT, PolicyConfig, workflow_again


def acts_of(night: Night, kind: type, pick=lambda a: True) -> list[tuple[float, list[ev.Action]]]:
    """(time, all actions of that step) for each step that emitted an action of ``kind``."""
    return [(t, acts) for t, _, acts in night.log if any(isinstance(a, kind) and pick(a) for a in acts)]


def test_the_workflow_is_saved_as_intent_then_pasted_then_entered_then_confirmed():
    night = Night()
    night.start()
    night.run_until(20)
    paste = PASTE_START + WORKFLOW.encode() + PASTE_END
    steps = [acts for _, acts in acts_of(night, ev.Type)]
    assert steps[0] == [
        ev.Save({"workflow_pending": True}),  # before a single byte is typed
        ev.Type(paste),
        ev.Record("delivery", {"kind": "workflow", "phase": "pasted", "note": "pasted"}),
        ev.Notice("workflow prompt: pasted"),
        ev.Look(1.3),
    ]
    assert steps[1] == [
        ev.Type(ENTER),
        ev.Record("delivery", {"kind": "workflow", "phase": "entered", "note": "enter"}),
        ev.Notice("workflow prompt: enter"),
        ev.Look(4.3),
    ]
    [(_, confirmed)] = acts_of(night, ev.Save, lambda a: "workflow_delivered" in a.changes)
    assert confirmed[-3:] == [
        ev.Record("delivery", {"kind": "workflow", "phase": "confirmed", "note": "confirmed"}),
        ev.Notice("workflow prompt: confirmed"),
        ev.Save({"workflow_delivered": True, "workflow_pending": False}),
    ]
    assert night.cli.transcript == [WORKFLOW] and night.cli.in_wait


def test_the_first_prompt_waits_for_a_quiet_screen():
    m = Machine(
        MachineConfig("gemini", True, settle=0.8),
        first_prompt(
            WORKFLOW,
            0.5,
            native_resume=False,
            workflow_delivered=False,
            workflow_pending=False,
            transcript_has_workflow=None,
        ).delivery,
        Saved(),
        now=0.0,
    )
    at = ev.Instant(1.0, Night().instant().wall)
    assert m.handle(ev.Observed(READY, last_output=0.5), at)[-1] == ev.Look(1.3)  # 0.5 s quiet only
    assert not [a for a in m.handle(ev.Observed(READY, last_output=0.5), at) if isinstance(a, ev.Type)]


def test_never_types_over_a_draft_into_a_dialog_or_a_busy_agent():
    for reading in (replace(READY, input_empty=False), replace(READY, dialog="Allow execution"), BUSY):
        night = Night()
        night.start()
        night.tell(ev.Observed(reading, last_output=-10))
        night.t = 50
        actions = night.tell(ev.Observed(reading, last_output=-10))
        assert not any(isinstance(a, ev.Type) for a in actions), reading


def test_ctrl_c_menu_continue_save_pass_and_timeout():
    night = Night()
    night.start()
    menu_open = [ev.Menu(True), ev.Record("menu", {"action": "open"})]
    assert night.tell(ev.Keys(b"\x03")) == menu_open
    assert night.tell(ev.Keys(b"c")) == [
        ev.Menu(False),
        ev.Record("menu", {"action": "continue"}),
        ev.Notice("Ctrl+C menu: continue"),
    ]
    assert night.tell(ev.Keys(b"ab\x03\x03")) == [
        ev.Type(b"ab"),
        *menu_open,
        ev.Menu(False),
        ev.Record("menu", {"action": "pass Ctrl+C"}),
        ev.Notice("Ctrl+C menu: pass Ctrl+C"),
        ev.Type(b"\x03"),
    ]
    night.tell(ev.Keys(b"\x1b[99;5u"))  # the kitty keyboard protocol's Ctrl+C
    night.t += 20
    assert night.tell(ev.Tick()) == [
        ev.Menu(False),
        ev.Record("menu", {"action": "continue (no choice made)"}),
        ev.Notice("Ctrl+C menu: continue (no choice made)"),
    ]
    night.tell(ev.Keys(b"\x03"))
    stop = night.tell(ev.Keys(b"s"))
    assert stop[:3] == [
        ev.Menu(False),
        ev.Record("menu", {"action": "save and exit"}),
        ev.Notice("Ctrl+C menu: save and exit"),
    ]
    assert stop[-1] == ev.SignalAgent(kill=False)
    assert night.outcome == ev.Outcome(ev.StopReason.USER, Exit(None, 15), "you chose save and exit")
    assert restart_decision(night.outcome, Restarts(), 0, 0.5) is None
    assert final_status(night.outcome.reason) is SessionStatus.STOPPED


def at(seconds: float) -> ev.Instant:
    return ev.Instant(seconds, EVENING + timedelta(seconds=seconds))


def test_keys_the_machine_only_passes_on_may_go_before_it_hears_of_them():
    """The shell writes such keys at once and says so (``typed``): nothing is typed twice, the
    user still counts as typing, and Ctrl+C or an open menu is always the machine's to decide."""
    night = Night()
    night.start()
    assert night.machine.passes(b"hello")
    assert not night.machine.passes(b"ab\x03") and not night.machine.passes(b"\x1b[99;5u")
    night.t = 30
    assert night.tell(ev.Keys(b"hello", typed=True)) == []
    assert night.machine.seen.last_user_input == 30
    night.tell(ev.Keys(b"\x03"))  # the menu is open: its keys are not the agent's
    assert not night.machine.passes(b"c")
    night.tell(ev.Keys(b"c"))  # continue: the menu closed
    assert night.machine.passes(b"c")


def test_sigterm_ignored_gets_sigkill_after_the_grace_then_again():
    m = Machine(MachineConfig("gemini", True, stop_grace=5.0), None, Saved(), 0.0)
    assert m.handle(ev.StopAsked(ev.StopReason.SIGNAL, "received SIGTERM"), at(0)) == [
        ev.Record("stop", {"reason": "signal", "detail": "received SIGTERM"}),
        ev.Notice("stopping the agent: received SIGTERM"),
        ev.SignalAgent(),
    ]
    assert m.next_due() == 5.0 and m.handle(ev.Tick(), at(4.9)) == []
    assert m.handle(ev.Tick(), at(5.0)) == [
        ev.Record("kill", {"signal": "SIGKILL", "after_seconds": 5.0}),
        ev.Notice("the agent ignored SIGTERM for 5s: SIGKILL"),
        ev.SignalAgent(kill=True),
    ]
    assert m.next_due() == 6.0
    assert m.handle(ev.StopAsked(ev.StopReason.USER, "again"), at(5.5)) == []  # one stop at a time
    assert m.handle(ev.ChildExited(Exit(None, 9)), at(5.6)) == [
        ev.SignalAgent(),  # the rest of its process group
        ev.Finish(ev.Outcome(ev.StopReason.SIGNAL, Exit(None, 9), "received SIGTERM")),
    ]
    assert m.next_due() is None and m.handle(ev.ChildExited(None), at(6)) == []


def test_headless_a_login_screen_stops_with_the_setup_command_and_is_never_restarted():
    night = Night(cli=ModelCli(login=True), interactive=False)
    night.start()
    night.run_until(5)
    assert night.outcome.reason is ev.StopReason.LOGIN
    assert night.outcome.detail == "gemini requires login. Run: gemini"
    assert night.pastes() == [] and night.runs == 1
    assert final_status(night.outcome.reason) is SessionStatus.LOGIN_REQUIRED


def test_on_a_terminal_the_login_screen_is_the_user_s_then_the_workflow_follows():
    night = Night(cli=ModelCli(login=True))
    night.start()
    night.run_until(600)  # the user takes ten minutes to log in
    assert night.outcome is None and night.pastes() == [] and not night.actions(ev.SignalAgent)
    assert [r["screen"] for r in night.records("login-wait")] == [
        "│ How would you like to authenticate for this project?"
    ]
    assert ev.Title("waaah: log in to gemini on its screen (waaah waits)", hold=True) in night.actions(
        ev.Title
    )
    night.cli.login = False  # logged in: gemini shows its prompt
    night.look(night.t)
    night.run_until(660)
    assert night.records("login-done") and night.pastes() == [WORKFLOW]
    assert night.cli.transcript == [WORKFLOW] and night.saved["workflow_delivered"]


def test_a_limit_banner_holds_every_prompt_until_its_reset_then_continues():
    night = Night()
    night.start()
    night.run_until(60)  # in its loop
    night.wait_ends("task")
    night.cli.busy_until = night.t + 10
    night.cli.loops = False
    night.cli.limit = "│ You have exhausted your daily quota. resets 3am"  # 20:01 now: 7 hours
    night.look(night.t)
    night.run_until(60 + 10 * HOUR)
    [limit] = night.records("limit")
    assert limit["until"] == "2026-11-24T03:01:00+00:00" and "resets 3am" in limit["banner"]
    over = [t for t, _, acts in night.log if ev.Record("limit-over", {}) in acts]
    assert over == [pytest.approx(7 * HOUR + 60)]
    typed = [t for t, acts in acts_of(night, ev.Type)]
    assert not [t for t in typed if 70 < t < over[0]]  # nothing typed while limited
    assert night.records("limit-resume") == [{"keys": "\r"}]
    assert CONTINUE_PROMPT in night.pastes()
    assert night.saved["limit_until"] == ""


def test_a_limit_saved_by_an_earlier_supervisor_is_waited_for_and_a_bad_one_is_ignored():
    cfg = MachineConfig("gemini", True, policy=PolicyConfig())
    wall = Night().instant().wall
    m = Machine(cfg, None, Saved(True, "2026-11-23T21:00:00+00:00"), 0.0)
    acts = m.handle(ev.Began(), ev.Instant(0.0, wall))
    assert ev.Save({"limit_until": "2026-11-23T21:00:00+00:00"}) in acts and m.next_due() == 3600.0
    bad = Machine(cfg, None, Saved(True, "next tuesday-ish"), 0.0)
    assert bad.handle(ev.Began(), ev.Instant(0.0, wall)) == [
        ev.Record("limit-ignored", {"until": "next tuesday-ish", "why": "not an ISO time"}),
        ev.Save({"limit_until": ""}),
    ]
    naive = Machine(cfg, None, Saved(True, "2026-11-23T20:30:00"), 0.0)  # no zone: the local one
    naive.handle(ev.Began(), ev.Instant(0.0, wall))
    assert naive.next_due() == 1800.0


def test_a_reset_the_cli_states_elsewhere_ends_a_wait_its_banner_left_open():
    """codex's banner says "try again later"; its session file names the reset (LimitStated)."""
    night = Night()
    night.start()
    night.run_until(60)
    night.wait_ends("task")
    night.cli.busy_until = night.t + 10
    night.cli.loops = False
    night.cli.limit = "■ You've hit your usage limit. Upgrade to Pro or try again later."
    night.look(night.t)
    night.run_until(100)
    [guessed] = night.records("limit")
    assert guessed["how"].startswith("default: no reset time stated")
    stated = night.instant().wall + timedelta(minutes=5)
    night.tell(ev.LimitStated(stated, "codex's session file"))
    night.tell(ev.LimitStated(stated, "codex's session file"))  # told again: nothing new
    guessed, told = night.records("limit")
    assert told["how"].startswith("stated in codex's session file: resets ")
    assert told["until"] == (stated + timedelta(seconds=60)).isoformat(timespec="seconds")
    night.run_until(100 + 10 * 60)
    over = [t for t, _, acts in night.log if ev.Record("limit-over", {}) in acts]
    assert over == [pytest.approx(100 + 6 * 60, abs=2)]  # at the stated reset + 60 s, not 30 min


def test_evict_shutdown_stops_and_evict_restart_restarts():
    for action, reason, again in (
        ("SHUTDOWN", ev.StopReason.EVICT, False),
        ("RESTART", ev.StopReason.RESTART, True),
    ):
        night = Night()
        night.start()
        night.run_until(30)
        night.wait_ends("evict", action)
        assert night.outcome.reason is reason
        assert (restart_decision(night.outcome, Restarts(), night.t, 0.5) is not None) is again


def test_heartbeats_ignored_space_out_then_a_wait_resets_them():
    night = Night(cli=ModelCli(loops=False))
    night.start()
    night.run_until(4 * HOUR)
    nudges = night.records("nudge")
    gaps = [n["next_gap"] for n in nudges]
    assert gaps[:6] == [10.0, 20.0, 40.0, 80.0, 160.0, 320.0] and max(gaps) == 600.0
    assert 20 < len(nudges) < 40  # about one every 10 minutes once backed off, not a flood
    night.cli.loops = True  # the next nudge brings it back into its loop
    night.run_until(5 * HOUR)
    last = night.records("nudge")[-1]
    assert night.cli.in_wait and night.machine.nudger.gap == 10.0 and last["next_gap"] == 600.0


def test_a_hang_gets_esc_then_a_restart_with_native_resume_and_the_continue_prompt():
    night = Night(policy=PolicyConfig(stall_timeout=900, stall_grace=30))
    night.start()
    night.run_until(60)
    night.wait_ends("task")
    night.cli.hung = True
    night.look(night.t)
    night.run_until(60 + 1000)
    assert night.records("stall") == [{"action": "esc", "minutes": 15.0}]
    assert night.runs == 2 and night.pastes().count(WORKFLOW) == 1
    assert night.pastes()[-1] == CONTINUE_PROMPT


def test_a_freeze_right_after_a_wait_returned_is_a_stall():
    """The wait ends, the agent prints nothing more: the screen is looked at again, the clock runs."""
    night = Night(policy=PolicyConfig(stall_timeout=60, stall_grace=30))
    night.start()
    night.run_until(100)
    assert night.cli.in_wait
    night.cli.hung = True  # frozen the moment the wait returns: no output, no tap, no hook
    night.wait_ends("idle")
    ended = night.t
    night.run_until(ended + 200)
    assert night.records("stall") == [{"action": "esc", "minutes": 1.0}]
    esc_at = next(t for t, _, acts in night.log for a in acts if isinstance(a, ev.Type) and a.data == b"\x1b")
    assert ended + 60 <= esc_at <= ended + 61
    stop = night.actions(ev.Finish)[0].outcome
    assert stop.reason is ev.StopReason.STALLED and night.runs == 2


def test_a_wait_is_exempt_only_for_the_tool_s_own_timeout():
    night = Night(policy=PolicyConfig(stall_timeout=60, stall_grace=30, wait_timeout=330))
    night.cli.wait_timeout = 10_000.0  # the call never comes back (a lost response, a dead proxy)
    night.start()
    night.run_until(100)
    started = max(night.machine.reports.waits.values())
    night.run_until(started + 330 + 59)
    assert night.records("stall") == []  # a long wait sits still legitimately
    night.run_until(started + 330 + 61)
    assert night.records("stall") == [{"action": "esc", "minutes": 1.0}]


def test_an_agent_alive_in_its_loop_is_never_a_stall():
    night = Night(policy=PolicyConfig(stall_timeout=60, stall_grace=30))
    night.start()
    night.run_until(4 * HOUR)  # 290 s waits back to back, each a minute past the stall timeout
    assert night.cli.waiting > 40 and night.records("stall") == [] and night.runs == 1


def server(ok: bool) -> ev.ServerChanged:
    return ev.ServerChanged(
        ok, "ok" if ok else "unreachable: [Errno 111] Connection refused", "http://127.0.0.1:1"
    )


def test_while_the_server_is_down_no_prompt_goes_toward_the_loop_then_one_continue():
    night = Night(cli=ModelCli(loops=False))
    night.start()
    night.run_until(60)  # the workflow went in; the agent ended its turn and got its nudges
    night.tell(server(False))
    down_at, before = night.t, len(night.records("nudge"))
    night.run_until(down_at + 2 * HOUR)
    assert len(night.records("nudge")) == before  # no paid turns asking for a tool that cannot work
    assert night.saved["server_down"].startswith("unreachable") and night.saved["server_down_since"]
    titles = [a.text for a in night.actions(ev.Title)]
    assert (
        titles[-1] == "waaah: gemini waits for the WAAAH server (unreachable: [Errno 111] Connection refused)"
    )
    night.tell(server(False))  # the next failed check changes nothing
    assert night.saved["server_down_since"] == "2026-11-23T20:01:00+00:00"
    night.tell(server(True))
    back = night.t
    night.run_until(back + 5)
    after = night.records("nudge")[before:]
    assert after == [{"kind": "continue", "reason": "the WAAAH server is reachable again", "next_gap": 10.0}]
    assert night.saved["server_down"] == "" and night.actions(ev.Title)[-1].text == "waaah: gemini"
    night.run_until(back + 12)  # then the usual spacing, from that prompt
    assert len(night.records("nudge")) == before + 2


def test_a_server_down_at_the_start_holds_the_nudges_not_the_workflow():
    night = Night(cli=ModelCli(loops=False), server_down="unreachable: timed out")
    night.start()
    night.run_until(HOUR)
    assert night.pastes() == [WORKFLOW] and night.records("nudge") == []


def test_a_server_back_while_the_agent_works_owes_nothing():
    night = Night()
    night.start()
    night.run_until(60)
    night.tell(server(False))
    night.run_until(600)
    night.wait_ends("task")  # a task was already on its way: the agent works on it
    night.tell(server(True))
    night.run_until(700)
    assert night.records("nudge") == [] and night.cli.in_wait


def test_the_cli_s_loop_detector_question_is_answered_off_and_its_halt_is_a_cause():
    night = Night()
    night.start()
    night.run_until(100)
    # Identical waits tripped gemini's detector twice: it asks (the first key is not heard).
    night.wait_ends("idle")
    night.cli.loop_dialog = 2
    night.look(night.t)
    asked = night.t
    night.run_until(asked + 10)
    answers = [t for t, a in acts_of(night, ev.Type, lambda a: a.data == b"2")]
    assert len(answers) == 2 and asked <= answers[0] < asked + 1 and answers[1] - answers[0] >= 3
    assert [r["action"] for r in night.records("loop-detector")] == ["turned off for this session"] * 2
    assert night.pastes() == [WORKFLOW]  # nothing else was typed into the question
    # Another run where a person chose "keep it": the halt message, then a continue prompt.
    night.cli.loops, night.cli.loop_halted = False, True
    night.wait_ends("idle")
    night.run_until(night.t + 20)
    nudge = night.records("nudge")[0]
    assert nudge["reason"] == "gemini's loop detector halted the turn"
    assert night.records("loop-detector")[-1]["action"] == "halted the turn"


def test_a_whole_night_in_well_under_a_second():
    """Eight hours: tasks, loop exits, ignored nudges, a crash, a hang, a limit, an eviction, a draft."""
    started = time.perf_counter()
    night = whole_night()
    elapsed = time.perf_counter() - started

    assert elapsed < 1.0, f"an 8-hour night took {elapsed:.2f}s"
    assert night.t == 8 * HOUR and not night.gave_up
    assert [f.outcome.reason for f in night.actions(ev.Finish)] == [
        ev.StopReason.AGENT_EXIT,  # the crash
        ev.StopReason.STALLED,  # the hang: Esc, then a restart
        ev.StopReason.RESTART,  # the eviction
    ]
    assert night.runs == 4
    # the workflow exactly once; every restart resumed the conversation with the continue prompt
    assert night.cli.transcript.count(WORKFLOW) == 1 and night.pastes().count(WORKFLOW) == 1
    assert night.records("stall") == [{"action": "esc", "minutes": 15.0}]
    banner, saved = night.records("limit")
    assert "resets 3am" in banner["banner"] and saved["how"] == "saved by an earlier run"
    assert len(night.records("limit-over")) == 1
    for t, event, acts in night.log:
        for a in acts:
            if isinstance(a, ev.Type) and a.data.startswith(PASTE_START):
                # every prompt went into a ready agent with an empty box, never during the limit
                assert isinstance(event, ev.Observed) and event.reading.ready and event.reading.input_empty
                assert event.reading.limit is None and not 5 * HOUR < t < 7 * HOUR + 60
    assert night.cli.box == "half a thought"  # the user's draft is still there at dawn, untouched
    assert not [
        t for t, _ in acts_of(night, ev.Type, lambda a: a.data.startswith(PASTE_START)) if t > DRAFT_AT + 1
    ]


class SupervisorKilled(Exception):
    """SIGKILL of the supervisor: what was applied stays, nothing after it happens."""


class KilledAt(Night):
    """A night whose supervisor is killed just before it applies its ``kill_at``-th action."""

    def __init__(self, kill_at: int) -> None:
        super().__init__()
        self.kill_at, self.applied = kill_at, 0

    def apply(self, action: ev.Action) -> None:
        if self.applied == self.kill_at:
            self.kill_at = -1
            raise SupervisorKilled
        self.applied += 1
        super().apply(action)


def test_a_supervisor_killed_at_any_point_of_a_delivery_neither_duplicates_nor_loses_the_workflow():
    whole = KilledAt(kill_at=-1)
    whole.start()
    whole.run_until(30)
    boundaries = whole.applied
    assert boundaries > 15
    for kill_at in range(boundaries + 1):
        night = KilledAt(kill_at)
        try:
            night.start()
            night.run_until(30)
        except SupervisorKilled:
            night.cli.alive, night.cli.box, night.cli.in_wait = False, "", False  # it dies with us
            night.log.clear()
            night.t += 5
            night.start(resumed=True)  # waaah agent --resume
            night.run_until(night.t + 60)
        assert night.cli.transcript.count(WORKFLOW) == 1, f"killed before action {kill_at}"
        assert night.saved["workflow_delivered"] and not night.saved["workflow_pending"]
        assert night.cli.in_wait, f"killed before action {kill_at}: not back in its loop"


def test_two_ignored_continue_prompts_then_the_workflow_again():
    """A bare "continue" an agent keeps ignoring has lost its task: the third prompt is the
    workflow itself (its role and loop), then continue prompts again."""
    night = Night(cli=ModelCli(loops=False), workflow_again=True)
    night.start()
    night.run_until(200)
    again = workflow_again(WORKFLOW, "2 continue prompts in a row were ignored")
    assert night.pastes()[:5] == [WORKFLOW, CONTINUE_PROMPT, CONTINUE_PROMPT, again, CONTINUE_PROMPT]
    kinds = [n["kind"] for n in night.records("nudge")]
    assert kinds[:4] == ["continue", "continue", "workflow", "continue"]
    assert night.cli.transcript[3] == again  # typed, taken by the CLI


def test_a_wait_between_continue_prompts_means_none_was_ignored():
    night = Night(cli=ModelCli(loops=False), workflow_again=True)
    night.start()
    night.run_until(20)  # the workflow and one continue prompt, ignored
    night.cli.loops = True  # the next one brings it into its loop
    night.run_until(60)
    assert night.cli.in_wait
    night.wait_ends("task")
    night.cli.loops = False
    night.run_until(400)
    # One ignored before the answered one; two ignored after the wait: only then the workflow.
    kinds = [n["kind"] for n in night.records("nudge")][:5]
    assert kinds == ["continue", "continue", "continue", "continue", "workflow"], kinds


def test_after_a_compaction_the_next_prompt_is_the_workflow():
    night = Night(workflow_again=True)
    night.start()
    night.run_until(60)  # in its loop: nothing to type, however compacted
    night.tell(ev.Compacted("its transcript /t/s.jsonl"))
    night.run_until(120)
    assert night.pastes() == [WORKFLOW] and night.records("compacted")
    night.cli.loops = False
    night.wait_ends("task")  # it works on a task, then ends its turn outside the loop
    night.run_until(400)
    again = workflow_again(WORKFLOW, "gemini compacted its conversation")
    assert night.pastes()[1] == again and night.pastes()[2] == CONTINUE_PROMPT
