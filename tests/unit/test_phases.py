"""The supervisor's phases (core/supervise/phases.py): the table of legal moves, the order a
phase is read in, and the machine moving through them on a fake night."""

from __future__ import annotations

import pytest

from tests.unit.night import Night
from tests.unit.test_machine import at
from waaah_agent.core.supervise import events as ev
from waaah_agent.core.supervise.machine import Machine, MachineConfig, Saved
from waaah_agent.core.supervise.phases import (
    ALLOWED,
    Facts,
    IllegalTransition,
    RunPhase,
    phase_of,
    transition,
)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (RunPhase.STOPPED, RunPhase.IDLE),  # the run is over: nothing follows
        (RunPhase.STOPPED, RunPhase.STOPPING),
        (RunPhase.STOPPING, RunPhase.DELIVERING),  # a stop under way only ends
        (RunPhase.STOPPING, RunPhase.MENU),
        (RunPhase.IDLE, RunPhase.STARTING),  # never back to starting
        (RunPhase.LIMITED, RunPhase.STARTING),
    ],
)
def test_an_illegal_transition_is_refused(old: RunPhase, new: RunPhase) -> None:
    with pytest.raises(IllegalTransition, match=f"from {old.value} to {new.value}"):
        transition(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (RunPhase.STARTING, RunPhase.DELIVERING),
        (RunPhase.STARTING, RunPhase.STOPPED),  # the CLI may die at once
        (RunPhase.DELIVERING, RunPhase.WAITING),
        (RunPhase.WAITING, RunPhase.WORKING),
        (RunPhase.LIMITED, RunPhase.IDLE),
        (RunPhase.STOPPING, RunPhase.STOPPED),
        (RunPhase.IDLE, RunPhase.IDLE),  # staying put
    ],
)
def test_a_legal_transition_is_taken(old: RunPhase, new: RunPhase) -> None:
    assert transition(old, new) is new


def test_every_phase_has_a_row_and_stopped_is_final() -> None:
    assert set(ALLOWED) == set(RunPhase)
    assert ALLOWED[RunPhase.STOPPED] == frozenset()
    assert all(RunPhase.STARTING not in after for after in ALLOWED.values())
    assert all(RunPhase.STOPPED in ALLOWED[p] for p in RunPhase if p is not RunPhase.STOPPED)


def test_the_phase_is_the_first_that_holds() -> None:
    assert phase_of(Facts()) is RunPhase.STARTING
    assert phase_of(Facts(past_start=True)) is RunPhase.IDLE
    assert phase_of(Facts(working=True, wait_in_flight=True)) is RunPhase.WAITING
    assert phase_of(Facts(limited=True, menu_open=True, typing=True)) is RunPhase.LIMITED
    assert phase_of(Facts(stopping=True, limited=True, awaiting_login=True)) is RunPhase.STOPPING
    assert phase_of(Facts(finished=True, stopping=True)) is RunPhase.STOPPED


def test_a_night_moves_through_the_phases_in_order() -> None:
    night = Night()
    seen: list[RunPhase] = []
    machine = night.start()
    night.run_until(60, on_tick=lambda n: seen.append(machine.phase))
    machine.handle(ev.StopAsked(ev.StopReason.SIGNAL, "received SIGTERM"), night.instant())
    seen.append(machine.phase)
    machine.handle(ev.ChildExited(None), night.instant())
    seen.append(machine.phase)
    order = [p for i, p in enumerate(seen) if i == 0 or seen[i - 1] is not p]
    assert order == [
        RunPhase.STARTING,
        RunPhase.IDLE,  # ready; the screen must be quiet a moment before the workflow is typed
        RunPhase.DELIVERING,
        RunPhase.WORKING,
        RunPhase.WAITING,  # in wait_for_prompt: its loop
        RunPhase.STOPPING,
        RunPhase.STOPPED,
    ]


def test_an_illegal_move_raises_when_strict_and_is_recorded_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(ALLOWED, RunPhase.STARTING, frozenset({RunPhase.STOPPED}))  # a broken table
    strict = Machine(MachineConfig("gemini", True), None, Saved(), 0.0, strict=True)
    with pytest.raises(IllegalTransition):
        strict.handle(ev.StopAsked(ev.StopReason.SIGNAL, "received SIGTERM"), at(1))
    lenient = Machine(MachineConfig("gemini", True), None, Saved(), 0.0)
    actions = lenient.handle(ev.StopAsked(ev.StopReason.SIGNAL, "received SIGTERM"), at(1))
    assert actions[-1] == ev.Record("phase-illegal", {"previous": "starting", "phase": "stopping"})
    assert lenient.phase is RunPhase.STOPPING  # the run goes on
