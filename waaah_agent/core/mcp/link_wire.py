"""What the session link reads from outside, checked: its socket's lines and the server's task list.

The link (core/mcp/link.py decides, runtime/mcp/link.py serves) talks to the CLI's MCP proxy with one JSON
line each way per call: a :class:`Request` (``op`` wait or ack, the proxy's pid and call id, the
tool's arguments) and a reply (the tool result's texts and whether it is an error). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from waaah_agent.core.kinds import StrEnum
from waaah_agent.core.nesting import loads_json

#: The longest request or reply line on the link (a task prompt is text; this guards memory).
MAX_LINE = 16 * 1024 * 1024


@dataclass(frozen=True)
class Reserved:
    """A task the server shows reserved for this agent, with the answer a wait would have given."""

    task_id: str
    texts: tuple[str, ...]


def reserved_for(agent_id: str, tasks: object) -> list[Reserved]:
    """The tasks of a ``GET /admin/tasks?status=PENDING_ACK`` answer whose latest history entry is
    the scheduler's reservation for ``agent_id``, each with the answer a wait would have given."""
    if not isinstance(tasks, list):
        return []
    mark = f"Reserved for agent {agent_id}"
    found = []
    for task in tasks:
        if not isinstance(task, dict) or task.get("status") != "PENDING_ACK":
            continue
        history, task_id = task.get("history"), task.get("id")
        last = history[-1] if isinstance(history, list) and history else None
        message = last.get("message") if isinstance(last, dict) else None
        if not isinstance(task_id, str) or not task_id or not isinstance(message, str):
            continue
        if message != mark and not message.startswith(mark + " "):
            continue
        answer = {k: task.get(k) for k in ("prompt", "from", "priority", "context")}
        found.append(Reserved(task_id, (json.dumps({"taskId": task_id, **answer}),)))
    return found


# ----- the link's wire format: one JSON line each way --------------------------------------------


class Op(StrEnum):
    WAIT = "wait"
    ACK = "ack"


@dataclass(frozen=True)
class Request:
    op: Op
    pid: int  # the MCP proxy's: the CLI instance
    call_id: int  # the proxy's own count of its calls (its inbox lines use the same)
    body: Mapping[str, Any]


def request_line(op: Op, pid: int, call_id: int, body: Mapping[str, Any]) -> bytes:
    return (json.dumps({"op": op.value, "pid": pid, "call_id": call_id, "body": dict(body)}) + "\n").encode()


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_request(line: bytes) -> Request | None:
    try:
        obj = loads_json(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("op") not in (Op.WAIT.value, Op.ACK.value):
        return None
    pid, call_id, body = obj.get("pid"), obj.get("call_id"), obj.get("body")
    if not is_int(pid) or not is_int(call_id) or not isinstance(body, dict):
        return None
    return Request(Op(obj["op"]), pid, call_id, body)


def reply_line(texts: Sequence[str], is_error: bool) -> bytes:
    return (json.dumps({"texts": list(texts), "is_error": is_error}) + "\n").encode()


def parse_reply(line: bytes) -> tuple[tuple[str, ...], bool] | None:
    try:
        obj = loads_json(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("is_error"), bool):
        return None
    texts = obj.get("texts")
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return None
    return tuple(texts), obj["is_error"]
