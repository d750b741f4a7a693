"""A whole night of supervision in-process: the pure machine, a model CLI and a fake clock.

``ModelCli`` is a model of an agent CLI as the supervisor sees it: an input box, a busy
spell after each prompt, a transcript of what it took, a wait_for_prompt loop it keeps or
leaves, and faults a test switches on (a hang, a limit banner, a login screen, a crash).
``Night`` plays the shell's part with a clock that jumps from one deadline to the next:
it turns the model's screen into readings, applies the machine's actions to the model,
and starts the next run with the same pure decisions the runtime uses
(``core/lifecycle.py``). Nothing in it sleeps.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from waaah_agent.core.mcp.inbox_records import TapEvent, TapOutcome, TapRecord
from waaah_agent.core.supervise import events as ev
from waaah_agent.core.supervise.backoff import BackoffConfig, Restarts
from waaah_agent.core.supervise.delivery import ENTER, PASTE_END, PASTE_START
from waaah_agent.core.supervise.detect import Reading
from waaah_agent.core.supervise.lifecycle import first_prompt, restart_decision
from waaah_agent.core.supervise.machine import Machine, MachineConfig, Saved
from waaah_agent.core.supervise.policy import PolicyConfig

WORKFLOW = "You are the orchestrator agent of this workspace.\nRegister, then call wait_for_prompt forever."
EVENING = datetime(2026, 11, 23, 20, 0, tzinfo=timezone.utc)

READY = Reading(input_ready=True, input_empty=True, title="◇  Ready", fingerprint="> Type your message")
BUSY = Reading(
    busy="screen: busy marker", input_ready=True, input_empty=True, fingerprint="⠋ Thinking (esc to cancel)"
)


@dataclass(frozen=True)
class Exit:
    code: int | None = 1
    signal: int | None = None

    @property
    def ok(self) -> bool:
        return self.code == 0

    def describe(self) -> str:
        return f"exit code {self.code}" if self.signal is None else f"killed by signal {self.signal}"


@dataclass
class ModelCli:
    """The agent CLI as the supervisor sees it."""

    busy_for: float = 5.0  # a turn's length
    task_for: float = 60.0  # working on a task the server gave
    loops: bool = True  # after a turn it calls wait_for_prompt (else it ends its turn at the prompt)
    hung: bool = False  # busy forever, deaf to Esc
    limit: str | None = None  # a usage-limit banner on the screen
    login: bool = False
    dialog: bool = False
    loop_dialog: int = 0  # its loop detector asks (answers it ignores before taking one)
    loop_halted: bool = False  # its loop detector's halt message is on the screen
    box: str = ""  # the input box
    transcript: list[str] = field(default_factory=list)  # prompts it took (its own session file)
    busy_until: float | None = None
    waiting: int = 0  # wait_for_prompt calls made, ids of the calls
    in_wait: bool = False
    wait_ends_at: float | None = None  # a wait_for_prompt call returns (idle) after its timeout
    wait_timeout: float = 290.0
    last_output: float = 0.0
    alive: bool = True

    def take(self, data: bytes, now: float) -> None:
        """Bytes written to its PTY."""
        if not self.alive:
            return
        if self.loop_dialog and data == b"2":
            self.loop_dialog -= 1
            if not self.loop_dialog:  # turned off for this session: it retries the request
                self.busy_until = now + self.busy_for
        elif data.startswith(PASTE_START) and data.endswith(PASTE_END):
            self.box += data[len(PASTE_START) : -len(PASTE_END)].decode()
        elif data == ENTER and self.limit is not None:
            self.limit = None  # its "keep trying"
        elif data == ENTER:
            if self.box and not self.busy(now) and not self.in_wait:
                self.transcript.append(self.box)
                self.box = ""
                self.busy_until = now + self.busy_for
        elif data == b"\x1b":
            if self.busy(now) and not self.hung:
                self.busy_until = now
        elif data not in (b"\x03",):
            self.box += data.decode(errors="replace")
        self.last_output = now

    def busy(self, now: float) -> bool:
        return self.hung or (self.busy_until is not None and now < self.busy_until)

    def reading(self, now: float) -> Reading:
        if self.login:
            return Reading(login="│ How would you like to authenticate for this project?")
        if self.limit is not None:
            return replace(BUSY, limit=self.limit)
        if self.loop_dialog:
            return Reading(loop_dialog="│   2. Disable loop detection for this session", fingerprint="loop?")
        if self.busy(now) or self.in_wait:
            return BUSY
        if self.dialog:
            return replace(READY, dialog="Allow execution")
        if self.box:
            return replace(READY, input_empty=False, fingerprint=f"> {self.box}")
        if self.loop_halted:
            return replace(READY, loop_halted="ℹ A potential loop was detected.")
        return READY


@dataclass
class Night:
    """The shell's part, on a fake clock that jumps from one deadline to the next."""

    cli: ModelCli = field(default_factory=ModelCli)
    policy: PolicyConfig | None = field(default_factory=PolicyConfig)
    backoff: BackoffConfig = field(default_factory=lambda: BackoffConfig(base=1.0))
    limit_resume_keys: bytes = b"\r"
    interactive: bool = True  # a terminal with a person at it
    t: float = 0.0
    saved: dict[str, Any] = field(
        default_factory=lambda: {"workflow_delivered": False, "workflow_pending": False}
    )
    log: list[tuple[float, ev.Event, list[ev.Action]]] = field(default_factory=list)
    looks: list[float] = field(default_factory=list)
    machine: Machine | None = None
    outcome: ev.Outcome | None = None
    runs: int = 0
    restarts: Restarts | None = None
    gave_up: bool = False
    crash_after: list[int] = field(default_factory=list)  # kill the supervisor after these events
    server_down: str = ""  # the WAAAH server is unreachable when a run begins: why
    events_told: int = 0
    workflow_again: bool = False  # the machine knows the workflow's text (sends it again)

    # -- runs ----------------------------------------------------------------------------
    def start(self, resumed: bool = False) -> Machine:
        """Spawn the CLI (native resume when it has a transcript) and a new machine."""
        native = resumed and bool(self.cli.transcript)
        first = first_prompt(
            WORKFLOW,
            0.5,
            native_resume=native,
            workflow_delivered=bool(self.saved.get("workflow_delivered")),
            workflow_pending=bool(self.saved.get("workflow_pending")),
            transcript_has_workflow=WORKFLOW in self.cli.transcript if native else None,
            paused=bool(self.saved.get("paused")),
        )
        if first.settled:
            self.saved.update(workflow_delivered=True, workflow_pending=False)
        if not native:
            self.cli.transcript.clear()
        cli = self.cli  # a new process: nothing typed, not busy, not hung
        cli.alive, cli.box, cli.busy_until, cli.in_wait, cli.hung = True, "", None, False, False
        self.cli.last_output = self.t
        cfg = MachineConfig(
            agent="gemini",
            interactive=self.interactive,
            enter_delay=0.5,
            limit_resume_keys=self.limit_resume_keys,
            loop_dialog_keys=b"2",
            login_hint="gemini",
            workflow=WORKFLOW if self.workflow_again else "",
            policy=self.policy,
            server_down=self.server_down,
        )
        saved = Saved(
            bool(self.saved.get("workflow_delivered")),
            str(self.saved.get("limit_until", "")),
            str(self.saved.get("next_heartbeat", "")),
            bool(self.saved.get("paused")),
            tuple(self.saved.get("queued", ())),
        )
        self.machine = Machine(cfg, first.delivery, saved, self.t, strict=True)
        self.outcome, self.looks = None, []
        self.runs += 1
        if self.restarts is None:
            self.restarts = Restarts(self.backoff)
        self.restarts.on_start(self.t)
        self.tell(ev.Began())
        self.look(self.t + 0.1)  # its first screen
        return self.machine

    def instant(self) -> ev.Instant:
        return ev.Instant(self.t, EVENING + timedelta(seconds=self.t))

    def tell(self, event: ev.Event) -> list[ev.Action]:
        assert self.machine is not None
        actions = self.machine.handle(event, self.instant())
        self.log.append((self.t, event, actions))
        self.events_told += 1
        for action in actions:
            self.apply(action)
        return actions

    def apply(self, action: ev.Action) -> None:
        match action:
            case ev.Type(data):
                was_waiting = self.cli.in_wait
                self.cli.take(data, self.t)
                if data == b"\x1b" and was_waiting and not self.cli.hung:
                    self.wait_ends("error")  # Esc cancels the tool call: the proxy reports its end
                self.look(self.t + 0.03)
            case ev.Look(at):
                self.look(at)
            case ev.Save(changes):
                self.saved.update(changes)
            case ev.Enqueue(text):  # the queue file, as the saved state sees it
                self.saved["queued"] = [*self.saved.get("queued", ()), text]
            case ev.Dequeue():
                self.saved["queued"] = list(self.saved.get("queued", ()))[1:]
            case ev.SignalAgent(kill):
                if not self.cli.hung or kill:  # a hung CLI ignores SIGTERM
                    self.exit(Exit(None, 9 if kill else 15))
            case ev.Finish(outcome):
                self.outcome = outcome

    def look(self, at: float) -> None:
        heapq.heappush(self.looks, max(at, self.t))

    def exit(self, status: Exit) -> None:
        """The CLI died: the shell reaps it and tells the machine."""
        if self.cli.alive:
            self.cli.alive = False
            self.cli.in_wait = False
            self.tell(ev.ChildExited(status))

    # -- time ----------------------------------------------------------------------------
    def run_until(self, end: float, on_tick: Any = None) -> None:
        """Let time pass to ``end``: deadlines fire, the model CLI moves, runs restart."""
        while self.t < end and not self.gave_up:
            if self.outcome is not None:
                if not self.next_run():
                    return
                continue
            assert self.machine is not None
            candidates = [end]
            if self.looks:
                candidates.append(self.looks[0])
            if (due := self.machine.next_due()) is not None:
                candidates.append(due)
            if self.cli.busy_until is not None and self.cli.busy_until > self.t:
                candidates.append(self.cli.busy_until)
            if self.cli.in_wait and self.cli.wait_ends_at is not None:
                candidates.append(self.cli.wait_ends_at)
            self.t = max(self.t, min(candidates))
            if on_tick is not None:
                on_tick(self)
                if self.outcome is not None:
                    continue
            self.cli_moves()
            if (due := self.machine.next_due()) is not None and due <= self.t:
                self.tell(ev.Tick())
            if self.looks and self.looks[0] <= self.t and self.outcome is None:
                while self.looks and self.looks[0] <= self.t:
                    heapq.heappop(self.looks)
                self.tell(ev.Observed(self.cli.reading(self.t), self.cli.last_output))

    def cli_moves(self) -> None:
        """A turn that just ended: the CLI calls wait_for_prompt (in its loop) or sits at the prompt."""
        cli = self.cli
        if cli.in_wait and cli.wait_ends_at is not None and cli.wait_ends_at <= self.t:
            self.wait_ends("idle")
            self.wait_starts()  # straight back into the loop
        if cli.busy_until is not None and cli.busy_until <= self.t and not cli.hung:
            cli.busy_until = None
            cli.last_output = self.t
            if cli.loops:
                self.wait_starts()
            self.look(self.t + 0.03)

    def wait_starts(self) -> None:
        self.cli.waiting += 1
        self.cli.in_wait = True
        self.cli.wait_ends_at = self.t + self.cli.wait_timeout
        self.tell(TapRecord(self.t, TapEvent.START, "wait_for_prompt", self.cli.waiting, pid=4242))

    def wait_ends(self, outcome: str = "idle", evict_action: str | None = None) -> None:
        """The current wait_for_prompt call returns; with a task, the agent works on it a while."""
        self.cli.in_wait, self.cli.wait_ends_at = False, None
        if outcome == "task":
            self.cli.busy_until = self.t + self.cli.task_for
        end = TapRecord(self.t, TapEvent.END, "wait_for_prompt", self.cli.waiting, pid=4242, duration_ms=1000)
        self.tell(replace(end, outcome=TapOutcome(outcome), evict_action=evict_action))

    def next_run(self) -> bool:
        """After a run ended: restart (after the backoff) or stop, as the runtime does."""
        assert self.outcome is not None and self.restarts is not None
        decision = restart_decision(self.outcome, self.restarts, self.t, 0.5)
        if decision is None or not decision.restart:
            self.gave_up = decision is not None
            return False
        self.t += decision.delay
        self.start(resumed=True)
        return True

    # -- what happened -------------------------------------------------------------------
    def actions(self, kind: type[Any]) -> list[Any]:
        return [a for _, _, acts in self.log for a in acts if isinstance(a, kind)]

    def records(self, name: str) -> list[dict[str, Any]]:
        return [dict(a.fields) for a in self.actions(ev.Record) if a.name == name]

    def pastes(self) -> list[str]:
        return [
            a.data[len(PASTE_START) : -len(PASTE_END)].decode()
            for a in self.actions(ev.Type)
            if a.data.startswith(PASTE_START)
        ]


HOUR = 3600.0
DRAFT_AT = 7.6 * HOUR


def user_types_a_draft(at: float) -> Any:
    drafted = []

    def act(night: Night) -> None:
        if night.t >= at and not night.cli.box and not drafted:
            drafted.append(night.t)
            night.tell(ev.Keys(b"half a thought"))
            night.look(night.t + 0.03)

    return act


def whole_night() -> Night:
    """Eight hours: tasks, loop exits, ignored nudges, a crash, a hang, a limit, an eviction, a draft."""
    night = Night(backoff=BackoffConfig(base=1.0, budget=5, window=1800))
    night.start()
    script = [
        (0.5 * HOUR, lambda n: n.wait_ends("task")),  # a task: works, back into its loop
        (1.0 * HOUR, lambda n: (setattr(n.cli, "loops", False), n.wait_ends("task"))),  # leaves its loop
        (1.5 * HOUR, lambda n: setattr(n.cli, "loops", True)),  # the next nudge brings it back
        (3.0 * HOUR, lambda n: n.exit(Exit(1))),  # crash
        (4.0 * HOUR, lambda n: (n.wait_ends("task"), setattr(n.cli, "hung", True))),  # hangs
        (
            5.0 * HOUR,
            lambda n: setattr(n.cli, "limit", "│ Usage limit reached for gemini-2.5-pro. resets 3am"),
        ),
        (7.0 * HOUR, lambda n: n.wait_ends("evict", "RESTART")),  # during the limit wait
        (7.5 * HOUR, lambda n: (setattr(n.cli, "loops", False), n.wait_ends("task"))),
    ]
    for when, fault in script:
        night.run_until(when)
        fault(night)
        night.look(night.t)
    night.run_until(DRAFT_AT)
    night.run_until(8 * HOUR, on_tick=user_types_a_draft(DRAFT_AT))
    return night
