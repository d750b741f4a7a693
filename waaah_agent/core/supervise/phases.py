"""The supervisor machine's phases, and the one checked way from one to the next.

A run of the agent is always in exactly one phase: the first that holds in the order of
:data:`PRECEDENCE` (a stop under way outranks a usage limit, which outranks the Ctrl+C menu,
and so on down to the agent's own activity). :func:`transition` is the only way the machine
moves from one phase to another; :data:`ALLOWED` says which moves are legal, and an illegal
one is refused (:class:`IllegalTransition`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class RunPhase(str, Enum):
    """What the supervisor is doing with the agent now."""

    STARTING = "starting"  # the CLI has not shown its prompt nor worked yet
    LOGIN = "login"  # the CLI's own login screen is up; the user answers it
    LIMITED = "limited"  # a usage limit is waited out: nothing typed until it ends
    MENU = "menu"  # the Ctrl+C menu is open: nothing typed until a choice
    DELIVERING = "delivering"  # a prompt (workflow, continue, heartbeat, waaah send) is being typed
    PAUSED = "paused"  # `waaah pause`: no continue prompts or heartbeats
    WAITING = "waiting"  # the agent sits in wait_for_prompt: in its loop
    WORKING = "working"  # the agent is busy with a turn
    IDLE = "idle"  # the agent is at its prompt (a nudge may follow)
    STOPPING = "stopping"  # SIGTERM sent to the agent's group; SIGKILL at the deadline
    STOPPED = "stopped"  # the agent exited: the run is over


@dataclass(frozen=True)
class Facts:
    """What the phase is read from (the machine's parts, at the end of an event)."""

    finished: bool = False
    stopping: bool = False
    awaiting_login: bool = False
    limited: bool = False
    menu_open: bool = False
    typing: bool = False  # a prompt's delivery is past waiting for the agent
    paused: bool = False
    wait_in_flight: bool = False
    working: bool = False  # the screen shows the agent busy or in a tool call
    past_start: bool = False  # the CLI showed its prompt or worked, or the run left STARTING


#: The order the phases are read in: the first that holds is the run's phase.
PRECEDENCE: tuple[tuple[RunPhase, str], ...] = (
    (RunPhase.STOPPED, "finished"),
    (RunPhase.STOPPING, "stopping"),
    (RunPhase.LOGIN, "awaiting_login"),
    (RunPhase.LIMITED, "limited"),
    (RunPhase.MENU, "menu_open"),
    (RunPhase.DELIVERING, "typing"),
    (RunPhase.PAUSED, "paused"),
    (RunPhase.WAITING, "wait_in_flight"),
    (RunPhase.WORKING, "working"),
)


def phase_of(facts: Facts) -> RunPhase:
    for phase, name in PRECEDENCE:
        if getattr(facts, name):
            return phase
    return RunPhase.IDLE if facts.past_start else RunPhase.STARTING


_RUNNING = frozenset(
    {
        RunPhase.LOGIN,
        RunPhase.LIMITED,
        RunPhase.MENU,
        RunPhase.DELIVERING,
        RunPhase.PAUSED,
        RunPhase.WAITING,
        RunPhase.WORKING,
        RunPhase.IDLE,
    }
)
_ENDING = frozenset({RunPhase.STOPPING, RunPhase.STOPPED})

#: Which phase may follow which. Never back to STARTING once the CLI showed itself; a stop
#: under way only ends (the agent exits); STOPPED is final. The agent may exit at any time.
ALLOWED: dict[RunPhase, frozenset[RunPhase]] = {
    RunPhase.STARTING: _RUNNING | _ENDING,
    **{phase: _RUNNING | _ENDING for phase in _RUNNING},
    RunPhase.STOPPING: frozenset({RunPhase.STOPPED}),
    RunPhase.STOPPED: frozenset(),
}


class IllegalTransition(ValueError):
    """A phase change the table does not allow: a bug in the machine."""

    def __init__(self, old: RunPhase, new: RunPhase) -> None:
        super().__init__(f"the supervisor cannot go from {old.value} to {new.value}")
        self.old, self.new = old, new


def transition(old: RunPhase, new: RunPhase) -> RunPhase:
    """``new`` if the table allows it after ``old`` (staying put always is); else raise."""
    if new is not old and new not in ALLOWED[old]:
        raise IllegalTransition(old, new)
    return new
