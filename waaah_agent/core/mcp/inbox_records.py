"""The lines of a session's inbox (``.waaah/sessions/<id>/inbox.jsonl``), one typed record each.

Three writers append to the inbox and the supervisor loop reads it:

* the CLI's own hooks (``python -m waaah_agent.runtime.mcp.hook``, for a CLI whose adapter gives ``hooks``): a :class:`HookRecord`;
* our MCP proxy (``waaah mcp-proxy``), once when a tool call starts and once when it ends: a
  :class:`TapRecord`;
* the user from another shell (`waaah send`, `pause`, `resume`, `stop`): a :class:`ControlRecord`.
  The inbox is the user's own (0600 in a 0700 folder), so only they can append to it.

Every writer goes through :meth:`to_json`; the reader goes through :func:`parse`, which checks the
shape and the type of every field and answers None for anything else (never an exception), so a
damaged or foreign line cannot reach the loop. Pure: dicts in, dicts out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard

from waaah_agent.core.kinds import StrEnum

#: Longest text kept in a record field; a prompt can be long, the loop needs only a glimpse.
MAX_TEXT = 2000


class Source(StrEnum):
    HOOK = "hook"
    MCP = "mcp"
    CONTROL = "control"


class ControlCommand(StrEnum):
    SEND = "send"  # type a prompt into the agent, with the verified delivery, once it is ready
    PAUSE = "pause"  # hold continue prompts and heartbeats
    RESUME = "resume"  # release them
    STOP = "stop"  # save and exit


#: The longest prompt `waaah send` takes (it is typed as one bracketed paste).
MAX_PROMPT = 100_000
#: The most prompts of `waaah send` waiting to be typed, and their characters in all: a send past
#: either is refused (by `waaah send`, else dropped by the supervisor with one line in its log).
MAX_QUEUED = 10_000
MAX_QUEUED_CHARS = 4_000_000


def queue_full(count: int, chars: int, more: int) -> str:
    """Why a prompt of ``more`` characters cannot join ``count`` queued prompts of ``chars``
    characters ("" when it can)."""
    if count >= MAX_QUEUED:
        return f"{count:,} prompts wait already, the most the queue holds ({MAX_QUEUED:,})"
    if chars + more > MAX_QUEUED_CHARS:
        return (
            f"the prompts waiting hold {chars:,} characters; with this one of {more:,} that is over "
            f"the {MAX_QUEUED_CHARS:,} the queue holds"
        )
    return ""


#: How far a supervisor has taken the inbox's sends: (ts, n), the n-th send of that ts in the
#: inbox (two sends can share a ts). Kept with the send queue (runtime/send_queue.py), so a later
#: supervisor takes only the sends after it (a supervisor killed before it read them).
Mark = tuple[float, int]
#: Before every send: a session none was read from yet.
NO_SENDS: Mark = (0.0, 0)


def next_mark(last: Mark | None, ts: float) -> Mark:
    """The mark once a send of ``ts`` is taken after ``last``; never behind ``last``."""
    if last is not None and ts == last[0]:
        return (ts, last[1] + 1)
    return (ts, 1) if last is None or (ts, 1) > last else last


def marks_of(sends: list[float]) -> list[Mark]:
    """The mark of each of the inbox's sends (their ``ts``, in the file's order)."""
    seen: dict[float, int] = {}
    marks = []
    for ts in sends:
        seen[ts] = seen.get(ts, 0) + 1
        marks.append((ts, seen[ts]))
    return marks


class TapEvent(StrEnum):
    START = "tool_start"
    END = "tool_end"


class TapOutcome(StrEnum):
    """How a tool call ended: ``task``, ``idle`` and ``evict`` are wait_for_prompt's answers."""

    OK = "ok"
    ERROR = "error"
    TASK = "task"
    IDLE = "idle"
    EVICT = "evict"


@dataclass(frozen=True)
class HookRecord:
    """One event of the CLI's hooks (``HooksPerRun.events``: e.g. SessionStart, Stop)."""

    ts: float
    cli: str
    hook_event_name: str | None = None
    session_id: str | None = None
    notification_type: str | None = None
    message: str | None = None
    prompt: str | None = None
    stop_hook_active: bool | None = None

    source = Source.HOOK

    def to_json(self) -> dict[str, Any]:
        return _present(
            {"ts": self.ts, "source": self.source.value, "cli": self.cli},
            hook_event_name=self.hook_event_name,
            session_id=self.session_id,
            notification_type=self.notification_type,
            message=self.message,
            prompt=self.prompt,
            stop_hook_active=self.stop_hook_active,
        )

    def event_fields(self) -> dict[str, Any]:
        """What the session's events.jsonl keeps of it (as ``hook-<hook_event_name>``)."""
        return _present(
            {}, session_id=self.session_id, notification_type=self.notification_type, message=self.message
        )


@dataclass(frozen=True)
class TapRecord:
    """One tool call of the agent, seen by our MCP proxy as it starts or ends.

    ``call_id`` counts per proxy process and ``pid`` is the proxy's, so (pid, call_id) names one
    call even when a CLI restarts its MCP servers. The fields after ``pid`` are set on END only:
    ``duration_ms``, ``outcome``, and when they apply ``error`` (one line), ``task_id``,
    ``evict_action`` (the EVICT signal's action, e.g. SHUTDOWN or RESTART) and ``agent_id`` (the id
    register_agent returned)."""

    ts: float
    event: TapEvent
    tool: str
    call_id: int
    pid: int
    duration_ms: int | None = None
    outcome: TapOutcome | None = None
    error: str | None = None
    task_id: str | None = None
    evict_action: str | None = None
    agent_id: str | None = None

    source = Source.MCP

    def to_json(self) -> dict[str, Any]:
        head = {"ts": self.ts, "source": self.source.value, "event": self.event.value}
        return head | self.event_fields()

    def event_fields(self) -> dict[str, Any]:
        """What the session's events.jsonl keeps of it (as ``mcp-<event>``)."""
        return _present(
            {"tool": self.tool, "call_id": self.call_id, "pid": self.pid},
            duration_ms=self.duration_ms,
            outcome=self.outcome.value if self.outcome is not None else None,
            error=self.error,
            task_id=self.task_id,
            evict_action=self.evict_action,
            agent_id=self.agent_id,
        )


@dataclass(frozen=True)
class ControlRecord:
    """A command from the user in another shell; ``text`` is the prompt of ``send``."""

    ts: float
    command: ControlCommand
    text: str | None = None

    source = Source.CONTROL

    def to_json(self) -> dict[str, Any]:
        return _present(
            {"ts": self.ts, "source": self.source.value, "command": self.command.value}, text=self.text
        )

    def event_fields(self) -> dict[str, Any]:
        """What events.jsonl keeps of it (as ``control``): the command, a prompt's length only."""
        return _present(
            {"command": self.command.value}, chars=len(self.text) if self.text is not None else None
        )


InboxRecord = HookRecord | TapRecord | ControlRecord


def parse(obj: object) -> InboxRecord | None:
    """The record a decoded JSON line holds, or None when it is not one of ours in every field."""
    if not isinstance(obj, dict):
        return None
    ts = _timestamp(obj.get("ts"))
    if ts is None:
        return None
    source = obj.get("source")
    if source == Source.HOOK.value:
        return _hook(obj, ts)
    if source == Source.MCP.value:
        return _tap(obj, ts)
    if source == Source.CONTROL.value:
        return _control(obj, ts)
    return None


def _control(obj: dict[Any, Any], ts: float) -> ControlRecord | None:
    command, text = obj.get("command"), obj.get("text")
    if not isinstance(command, str) or command not in _COMMANDS:
        return None
    if command == ControlCommand.SEND.value:
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_PROMPT or "\x00" in text:
            return None
        return ControlRecord(ts, ControlCommand.SEND, text)
    return ControlRecord(ts, ControlCommand(command)) if text is None else None


def _hook(obj: dict[Any, Any], ts: float) -> HookRecord | None:
    texts = ("cli", "hook_event_name", "session_id", "notification_type", "message", "prompt")
    if not all(obj.get(k) is None or isinstance(obj[k], str) for k in texts):
        return None
    active = obj.get("stop_hook_active")
    if active is not None and not isinstance(active, bool):
        return None
    return HookRecord(
        ts=ts,
        cli=_cut(obj.get("cli")) or "",
        hook_event_name=_cut(obj.get("hook_event_name")),
        session_id=_cut(obj.get("session_id")),
        notification_type=_cut(obj.get("notification_type")),
        message=_cut(obj.get("message")),
        prompt=_cut(obj.get("prompt")),
        stop_hook_active=active,
    )


def _tap(obj: dict[Any, Any], ts: float) -> TapRecord | None:
    event, tool, call_id, pid = obj.get("event"), obj.get("tool"), obj.get("call_id"), obj.get("pid")
    if not isinstance(event, str) or event not in _TAP_EVENTS or not isinstance(tool, str) or not tool:
        return None
    if not _is_int(call_id) or not _is_int(pid):
        return None
    duration, outcome = obj.get("duration_ms"), obj.get("outcome")
    if duration is not None and not _is_int(duration):
        return None
    if outcome is not None and (not isinstance(outcome, str) or outcome not in _OUTCOMES):
        return None
    texts = ("error", "task_id", "evict_action", "agent_id")
    if not all(obj.get(k) is None or isinstance(obj[k], str) for k in texts):
        return None
    return TapRecord(
        ts=ts,
        event=TapEvent(event),
        tool=tool[:MAX_TEXT],
        call_id=call_id,
        pid=pid,
        duration_ms=duration,
        outcome=TapOutcome(outcome) if outcome is not None else None,
        error=_cut(obj.get("error")),
        task_id=_cut(obj.get("task_id")),
        evict_action=_cut(obj.get("evict_action")),
        agent_id=_cut(obj.get("agent_id")),
    )


_TAP_EVENTS = {e.value for e in TapEvent}
_COMMANDS = {c.value for c in ControlCommand}
_OUTCOMES = {o.value for o in TapOutcome}


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _timestamp(value: object) -> float | None:
    """Epoch seconds as a finite float, or None (not a number, a bool, NaN, too large)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


def _cut(value: object) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) else None


def _present(base: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """``base`` plus the fields that are set (None means absent, as in the line)."""
    return base | {k: v for k, v in fields.items() if v is not None}
