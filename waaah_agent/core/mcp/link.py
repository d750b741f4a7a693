"""The session link's decisions: the agent's WAAAH connection belongs to the session, not to one
CLI process.

The CLI's MCP proxy asks the supervisor's link (runtime/mcp/link.py) for ``wait_for_prompt`` and
``ack_task``; the link makes the server's long polls. What a wait returns lands in the session
even when the CLI that asked is gone: a task is kept (persisted first, then ACKed so the server
does not requeue it) until a CLI instance takes it and acks it, or waits again without acking it
(it moved on). A CLI instance is one MCP proxy process, named by its pid.

* A wait in flight is never abandoned: a new instance's wait joins it, and its answer goes to
  whoever waits when it comes, else it is kept.
* A kept task goes to the next instance's first wait, and again to a later instance if the one it
  went to never acked it (it died first); never twice to one instance.
* An EVICT is handed to one wait, then done. An EVICT RESTART that arrived while no instance waited
  and is asked for by another instance than the last one is served by the restart under way:
  dropped, said once, never a second restart.
* A task the server shows reserved for this agent (PENDING_ACK, its last history entry "Reserved
  for agent <id> ...") in two task-list reads in a row was never sent to us (a delivery reaches the
  link and is ACKed within milliseconds): it is taken like a task a wait returned.

Pure: the runtime feeds events (with the time where a pace matters) and carries out the actions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from waaah_agent.core.kinds import StrEnum
from waaah_agent.core.mcp.link_wire import Reserved, is_int

#: Seconds between reads of the server's task list while the agent waits (the server requeues an
#: un-ACKed task after 30-40 s: every reservation is seen at least once).
POLL_EVERY = 20.0
#: Seconds before a reservation seen once is looked at again (a real delivery is ACKed long before).
CONFIRM_AFTER = 3.0


class Kind(StrEnum):
    TASK = "task"
    EVICT = "evict"


class AckOutcome(StrEnum):
    OK = "ok"
    REFUSED = "refused"  # the server answered no (not PENDING_ACK, another agent's)
    UNREACHABLE = "unreachable"  # no answer: the agent's own ack_task goes to the server


@dataclass(frozen=True)
class Held:
    """A wait's answer kept by the session: a task (``key`` is its id) or an EVICT."""

    key: str
    kind: Kind
    texts: tuple[str, ...]  # the tool result as the server gave it
    agent_id: str  # the id the server gave it to (ACKs are sent as it)
    acked: bool = False  # the server has our ACK (tasks)
    handed_to: int | None = None  # the instance it was last handed to
    instance: int | None = None  # an EVICT's: the last instance that had waited when it came
    restart: bool = False  # an EVICT RESTART
    recovered: bool = False  # found reserved on the server, not returned by a wait

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind.value,
            "texts": list(self.texts),
            "agent_id": self.agent_id,
            "acked": self.acked,
            "handed_to": self.handed_to,
            "instance": self.instance,
            "restart": self.restart,
            "recovered": self.recovered,
        }

    @classmethod
    def from_json(cls, obj: object) -> Held | None:
        """The record a saved object holds, or None when any field is of the wrong type."""
        if not isinstance(obj, dict):
            return None
        key, kind, texts, agent = obj.get("key"), obj.get("kind"), obj.get("texts"), obj.get("agent_id")
        if not isinstance(key, str) or not key or kind not in (Kind.TASK.value, Kind.EVICT.value):
            return None
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return None
        flags = [obj.get(k, False) for k in ("acked", "restart", "recovered")]
        pids = [obj.get(k) for k in ("handed_to", "instance")]
        if not isinstance(agent, str) or not all(isinstance(f, bool) for f in flags):
            return None
        if not all(p is None or is_int(p) for p in pids):
            return None
        return cls(key, Kind(kind), tuple(texts), agent, flags[0], pids[0], pids[1], flags[1], flags[2])


@dataclass(frozen=True)
class Answer:
    """How a server wait ended (``outcome``: task, evict, idle, ok or error)."""

    outcome: str
    texts: tuple[str, ...]
    is_error: bool = False
    task_id: str | None = None
    evict_action: str | None = None


# ----- actions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartWait:
    body: Mapping[str, Any]  # as the client sent it (agentId, timeout)


@dataclass(frozen=True)
class SendAck:
    key: str
    agent_id: str


@dataclass(frozen=True)
class Reply:
    ticket: int
    texts: tuple[str, ...]
    is_error: bool = False
    held: Held | None = None  # the kept answer it hands out (kept again if it cannot be sent)


@dataclass(frozen=True)
class Forward:
    """The agent's ack_task goes to the server; ``key`` when it is of a task we keep."""

    ticket: int
    body: Mapping[str, Any]
    key: str | None = None


@dataclass(frozen=True)
class Persist:
    held: tuple[Held, ...]


@dataclass(frozen=True)
class Note:
    """A line for the text log; with ``event``, also an event of that kind with ``fields``."""

    text: str
    event: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)


Action = StartWait | SendAck | Reply | Forward | Persist | Note


# ----- the state machine -------------------------------------------------------------------------


class Link:
    """Wait in flight, waiting clients (by ticket), kept answers, ACKs in flight, the task-list pace."""

    def __init__(
        self,
        agent_id: str,
        held: Sequence[Held] = (),
        *,
        poll_every: float = POLL_EVERY,
        confirm_after: float = CONFIRM_AFTER,
    ) -> None:
        self.agent_id = agent_id
        self.held = list(held)
        self.waiters: dict[int, tuple[int, Mapping[str, Any]]] = {}  # ticket -> (instance, body)
        self.in_flight = False
        self.last_instance: int | None = None
        self.acking: set[str] = set()
        self.suspects: set[str] = set()
        self.poll_every, self.confirm_after = poll_every, confirm_after
        self.polling = False
        self.poll_off = False
        self.last_poll: float | None = None

    def find(self, key: object) -> Held | None:
        return next((h for h in self.held if h.key == key), None)

    # -- events --------------------------------------------------------------------------------

    def start(self) -> list[Action]:
        """What an earlier supervisor kept goes to this one's first instance; an ACK it had not
        sent is sent now."""
        self.held = [replace(h, handed_to=None, instance=None) for h in self.held]
        acts: list[Action] = []
        for h in self.held:
            acts.append(
                Note(f"{_what(h)} kept by the session before it was resumed: for the agent's next wait")
            )
            if h.kind is Kind.TASK and not h.acked:
                acts += self._ack(h)
        return acts

    def wait(self, ticket: int, instance: int, body: Mapping[str, Any]) -> list[Action]:
        """An instance calls wait_for_prompt."""
        acts: list[Action] = []
        self.last_instance = instance
        agent = body.get("agentId")
        if isinstance(agent, str) and agent:
            self.agent_id = agent
        for h in list(self.held):
            if h.handed_to == instance:
                self.held.remove(h)
                acts.append(Note(f"{_what(h)} was handed to the agent, which waited again without acking it"))
            elif h.restart and h.instance is not None and h.instance != instance:
                self.held.remove(h)
                text = "an EVICT RESTART arrived while the agent was being restarted: that restart serves it"
                acts.append(Note(text, "evict-dropped", {"action": "RESTART"}))
        if acts:
            acts.append(self._persist())
        self.waiters[ticket] = (instance, dict(body))
        return acts + self._deliver()

    def gone(self, ticket: int) -> list[Action]:
        """A waiting client went away before its answer (the CLI died or cancelled the call)."""
        self.waiters.pop(ticket, None)
        return []

    def unsent(self, h: Held) -> list[Action]:
        """A reply handing out ``h`` could not be written: it is kept for the next wait."""
        kept = self.find(h.key)
        if kept is None:  # an EVICT (done once handed): back at the front
            self.held.insert(0, replace(h, handed_to=None))
        else:
            self.held[self.held.index(kept)] = replace(kept, handed_to=None)
        return [self._persist(), *self._deliver()]

    def answered(self, answer: Answer) -> list[Action]:
        """The server wait ended."""
        self.in_flight = False
        acts: list[Action] = []
        if answer.outcome == "task" and answer.task_id:
            acts += self._arrived(answer.task_id, answer.texts, recovered=False)
        elif answer.outcome == "evict":
            restart = (answer.evict_action or "SHUTDOWN").upper() == "RESTART"
            n = 1
            while self.find(f"evict-{n}"):
                n += 1
            key = f"evict-{n}"
            h = Held(key, Kind.EVICT, answer.texts, self.agent_id, True, None, self.last_instance, restart)
            self.held.append(h)
            acts.append(self._persist())
            if not self.waiters:
                acts.append(self._kept(h))
        else:
            acts += [Reply(t, answer.texts, answer.is_error) for t in self.waiters]
            self.waiters.clear()
        return acts + self._deliver()

    def acked(self, key: str, outcome: AckOutcome, detail: str = "") -> list[Action]:
        """Our ACK of a task came back."""
        self.acking.discard(key)
        h = self.find(key)
        if h is None:
            return self._deliver()
        acts: list[Action] = []
        if outcome is AckOutcome.OK and not h.acked:
            self.held[self.held.index(h)] = replace(h, acked=True)
            acts.append(self._persist())
        elif outcome is AckOutcome.REFUSED and not h.acked:
            self.held.remove(h)
            acts.append(self._persist())
            acts.append(
                Note(f"the server refused the ACK of task {key} ({detail}): it has taken the task back")
            )
        elif outcome is AckOutcome.UNREACHABLE:
            acts.append(
                Note(f"could not ACK task {key} ({detail}): the agent's own ack_task will go to the server")
            )
        return acts + self._deliver()

    def agent_ack(self, ticket: int, body: Mapping[str, Any]) -> list[Action]:
        """The agent calls ack_task: a task we keep and ACKed is answered here, once."""
        h = self.find(body.get("taskId"))
        if h is None or h.kind is not Kind.TASK:
            return [Forward(ticket, body)]
        if not h.acked:
            return [Forward(ticket, body, h.key)]
        self.held.remove(h)
        answer = json.dumps({"acknowledged": True, "taskId": h.key})
        return [self._persist(), Reply(ticket, (answer,))]

    def forwarded(self, key: str | None, outcome: AckOutcome) -> list[Action]:
        """The agent's own ACK of a kept task reached the server: the task is the agent's now."""
        h = self.find(key)
        if h is None or outcome is AckOutcome.UNREACHABLE:
            return []
        self.held.remove(h)
        return [self._persist()]

    # -- the server's task list ----------------------------------------------------------------

    def poll_due(self) -> float | None:
        """When to read the task list next (monotonic seconds), None for not now: at the start,
        then while the agent waits, sooner to confirm a reservation seen once."""
        if self.poll_off or self.polling:
            return None
        if self.last_poll is None:
            return 0.0
        if self.suspects:
            return self.last_poll + self.confirm_after
        return self.last_poll + self.poll_every if self.waiters else None

    def poll_started(self, now: float) -> None:
        self.polling, self.last_poll = True, now

    def polled(self, found: Sequence[Reserved] | None, off: str = "") -> list[Action]:
        """The task list was read (``found``: reserved for this agent); None: it could not be
        read this time; ``off``: it never can be (no key, no such endpoint), said once."""
        self.polling = False
        if off:
            self.poll_off = True
            return [
                Note(
                    f"cannot read the WAAAH server's task list ({off}): a task it reserves for this agent without sending it cannot be noticed"
                )
            ]
        if found is None:
            return []
        acts: list[Action] = []
        confirmed = {r.task_id for r in found if r.task_id in self.suspects or self.find(r.task_id)}
        for r in found:
            if r.task_id in confirmed:
                acts += self._arrived(r.task_id, r.texts, recovered=True)
        self.suspects = {r.task_id for r in found} - confirmed
        return acts + self._deliver()

    # -- helpers -------------------------------------------------------------------------------

    def _arrived(self, task_id: str, texts: tuple[str, ...], *, recovered: bool) -> list[Action]:
        h = self.find(task_id)
        if h is not None:  # the server gave it to us again: ACK it again, hand nothing more
            return [] if task_id in self.acking else self._ack(h)
        h = Held(task_id, Kind.TASK, texts, self.agent_id, recovered=recovered)
        self.held.append(h)
        acts: list[Action] = [self._persist()]
        if recovered:
            text = (
                f"task {task_id} was reserved for this agent on the WAAAH server but never sent to it: "
                "taken, ACKed and handed to the agent's wait"
            )
            acts.append(Note(text, "task-recovered", {"task_id": task_id}))
        elif not self.waiters:
            acts.append(self._kept(h))
        return acts + self._ack(h)

    def _ack(self, h: Held) -> list[Action]:
        self.acking.add(h.key)
        return [SendAck(h.key, h.agent_id)]

    def _kept(self, h: Held) -> Note:
        text = f"{_what(h)} came while no agent was waiting for it (being restarted?): kept for its next wait"
        fields = (
            {"task_id": h.key} if h.kind is Kind.TASK else {"evict": "RESTART" if h.restart else "SHUTDOWN"}
        )
        return Note(text, "task-kept", fields)

    def _deliver(self) -> list[Action]:
        """Kept answers to waiting clients, oldest first; the rest of the waiters join (or start)
        the server wait."""
        acts: list[Action] = []
        for ticket, (instance, _) in list(self.waiters.items()):
            h = next((x for x in self.held if x.key not in self.acking and x.handed_to != instance), None)
            if h is None:
                break
            del self.waiters[ticket]
            if h.kind is Kind.EVICT:  # handed once, then done
                self.held.remove(h)
            else:
                if h.handed_to is not None:
                    acts.append(Note(f"{_what(h)} handed again: the agent it went to never acked it"))
                self.held[self.held.index(h)] = replace(h, handed_to=instance)
            acts += [self._persist(), Reply(ticket, h.texts, False, h)]
        if self.waiters and not self.in_flight and not self.acking:  # an ACK back may hand one out
            self.in_flight = True
            acts.append(StartWait(next(iter(self.waiters.values()))[1]))
        return acts

    def _persist(self) -> Persist:
        return Persist(tuple(self.held))


def _what(h: Held) -> str:
    if h.kind is Kind.EVICT:
        return f"an EVICT {'RESTART' if h.restart else 'SHUTDOWN'}"
    return f"task {h.key}"
