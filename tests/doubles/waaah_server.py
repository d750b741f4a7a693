"""A WAAAH server double: the REST surface an agent and an admin see, in one thread-safe object.

It answers like the real server (see the shared facts page on the WAAAH server):

* ``GET /health`` (no key): ``{"status": "ok"}``.
* ``POST /mcp/tools/<name>`` for register_agent, wait_for_prompt (a real long poll), ack_task,
  update_progress, send_response, list_agents and get_agent_status. Success is HTTP 200 with
  ``{"content": [{"type": "text", "text": "<json>"}]}``; validation failures are HTTP 200 with
  ``isError: true``; other tools are HTTP 404 ``{"error": "Tool X not found"}``.
* ``GET /admin/agents/status``, ``POST /admin/enqueue``, ``POST /admin/evict``,
  ``GET /admin/tasks`` (``?status=``, ``?agentId=``, ``?limit=``; newest first, each task with its
  ``history``) and ``GET /admin/tasks/<id>``.
* With an API key: ``X-API-Key`` (or ``?apiKey=``) on everything but ``/health``, else HTTP 401.

How a task reaches an agent, as the real server does it (``packages/mcp-server/src/state``):

* Created while an agent waits: reserved for it (PENDING_ACK, a history entry "Reserved for agent
  <id> (scored match)") and pushed to every wait of that agent then pending, also one whose client
  went away: a wait stays registered until its own timeout, answered or not.
* A new wait takes a QUEUED task at once (no history entry); otherwise it only listens for pushes.
  Each new wait runs a scheduler cycle right after that first look.
* The scheduler (every ``scheduler_interval`` seconds, and at each new wait) requeues a task not
  ACKed within ``ack_timeout`` (QUEUED, "Force-retried by admin"), then reserves every QUEUED task
  for an agent flagged waiting, **without** a push: the agent's pending wait is not woken, and its
  next wait does not take a PENDING_ACK task. A reservation clears the agent's waiting flag, and so
  does the end of any of its waits.
* ``ack_task`` succeeds only for a PENDING_ACK task reserved for the caller.

Example::

    with WaaahServer(api_key="k") as waaah:
        ...  # point the proxy at waaah.url
        waaah.wait_for_call("wait_for_prompt", timeout=5)
        task_id = waaah.enqueue("Write the README")
        assert waaah.agent_status("a1") == "WAITING"

Run by hand: ``python -m tests.doubles.waaah_server --port 3456 [--api-key K]``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

EvictAction = Literal["SHUTDOWN", "RESTART"]

CAPABILITIES = (
    "spec-writing",
    "code-writing",
    "test-writing",
    "doc-writing",
    "code-doctor",
    "general-purpose",
)
TASK_STATUSES = (
    "QUEUED",
    "PENDING_ACK",
    "ASSIGNED",
    "IN_PROGRESS",
    "BLOCKED",
    "IN_REVIEW",
    "REJECTED",
    "APPROVED_QUEUED",
    "APPROVED_PENDING_ACK",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
)
#: Statuses after which a task no longer keeps its agent busy.
_DONE_STATUSES = {"COMPLETED", "FAILED", "CANCELLED", "IN_REVIEW", "BLOCKED", "REJECTED", "QUEUED"}
DEFAULT_WAIT = 290.0
MAX_WAIT = 300.0
IDLE_ANSWER = {"success": True, "status": "IDLE", "message": "No tasks available. Waiting."}
UNAUTHORIZED = {"error": "Unauthorized: Invalid or missing API key"}
#: The real server refuses prompts that look destructive (403); a few of its patterns.
_REFUSED_PROMPT = re.compile(r"rm\s+-rf|sudo\s|\.env\b")
#: Request headers worth keeping in the call record (the rest is noise for tests).
_KEPT_HEADERS = ("x-api-key", "content-type", "user-agent")


@dataclass
class Call:
    """One HTTP request the double received."""

    method: str
    path: str
    tool: str | None
    body: Any
    headers: dict[str, str]
    time: float
    finished: float | None = None
    status: int | None = None
    answer: Any = None


@dataclass
class _Agent:
    id: str
    display_name: str
    role: str | None
    capabilities: list[str]
    workspace: dict[str, Any] | None
    created_at: float
    last_seen: float
    waits: list[_Wait] = field(default_factory=list)  # pending waits, answered or not
    flagged: bool = False  # "waiting" as the scheduler sees it (set by a wait, cleared by a reservation)

    @property
    def waiting(self) -> int:
        return len(self.waits)


@dataclass
class _Wait:
    """One pending wait_for_prompt; ``task`` is set when a task is pushed to it."""

    task: dict[str, Any] | None = None


@dataclass
class _Task:
    id: str
    prompt: str
    workspace_id: str | None
    agent_id: str | None
    priority: str
    status: str = "QUEUED"
    assigned_to: str | None = None  # set by a successful ACK
    pending_ack: str | None = None  # the agent a PENDING_ACK task waits for an ACK from
    sent_at: float = 0.0  # monotonic time it went PENDING_ACK
    created_at: float = field(default_factory=time.time)
    history: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    response: dict[str, Any] | None = None

    def note(self, status: str, message: str, agent_id: str | None = None) -> None:
        self.history.append(
            {"timestamp": int(time.time() * 1000), "status": status, "agentId": agent_id, "message": message}
        )

    def answer(self) -> dict[str, Any]:
        """What wait_for_prompt returns for it."""
        return {
            "taskId": self.id,
            "prompt": self.prompt,
            "from": {"type": "user", "id": "admin", "name": "Admin"},
            "priority": self.priority,
            "context": {"workspaceId": self.workspace_id},
        }

    def view(self) -> dict[str, Any]:
        """The task as ``GET /admin/tasks`` shows it."""
        return {
            "id": self.id,
            "command": "execute_prompt",
            "prompt": self.prompt,
            "from": {"type": "user", "id": "admin", "name": "AdminUser"},
            "to": {"agentId": self.agent_id, "workspaceId": self.workspace_id},
            "priority": self.priority,
            "status": self.status,
            "assignedTo": self.assigned_to,
            "createdAt": int(self.created_at * 1000),
            "context": {"workspaceId": self.workspace_id},
            "history": [dict(h) for h in self.history],
            "response": self.response,
        }


class _ToolError(Exception):
    """A tool failure the real server reports as HTTP 200 with ``isError: true``."""


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def _need_str(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise _ToolError(f"Error: Invalid arguments:\n  {name}: Required non-empty string")
    return value


def _wait_seconds(raw: Any) -> float:
    """The server's rule: default 290, below 1 becomes 1, above 300 falls back to 290."""
    if raw is None:
        return DEFAULT_WAIT
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or math.isnan(raw):
        raise _ToolError("Error: Invalid arguments:\n  timeout: Expected number")
    if raw > MAX_WAIT:
        return DEFAULT_WAIT
    return max(1.0, float(raw))


class WaaahServer:
    """The double. ``start()`` returns the base URL; ``stop()`` releases every blocked long poll."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        port: int = 0,
        ack_timeout: float = 30.0,
        scheduler_interval: float = 10.0,
    ) -> None:
        self.api_key = api_key
        self.ack_timeout = ack_timeout
        self.scheduler_interval = scheduler_interval
        self._port = port
        self._cond = threading.Condition()
        self._calls: list[Call] = []
        self._agents: dict[str, _Agent] = {}
        self._tasks: dict[str, _Task] = {}
        self._evictions: dict[str, dict[str, str]] = {}
        self._stopping = False
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._scheduler: threading.Thread | None = None
        self.url = ""

    # ----- lifecycle -------------------------------------------------------------------------

    def start(self) -> str:
        """Bind 127.0.0.1 (ephemeral port unless one was given), serve in a thread, return the URL."""
        handler = type("_BoundHandler", (_Handler,), {"double": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        self._httpd.daemon_threads = True
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="waaah-double", daemon=True)
        self._thread.start()
        self._scheduler = threading.Thread(target=self._schedule, name="waaah-double-scheduler", daemon=True)
        self._scheduler.start()
        return self.url

    def stop(self) -> None:
        """Stop serving; long polls in flight answer IDLE at once."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        for thread in (self._thread, self._scheduler):
            if thread is not None:
                thread.join(timeout=5)
        self._thread = self._scheduler = None

    def __enter__(self) -> WaaahServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----- test API --------------------------------------------------------------------------

    @property
    def calls(self) -> list[Call]:
        """Snapshots of every request so far, oldest first."""
        with self._cond:
            return [replace(c) for c in self._calls]

    def tool_calls(self, tool: str) -> list[Call]:
        """Snapshots of the calls to one tool."""
        return [c for c in self.calls if c.tool == tool]

    def wait_for_call(
        self, tool: str, timeout: float = 30.0, *, count: int = 1, finished: bool = False
    ) -> Call:
        """Block until the ``count``-th call to ``tool`` arrived (and, if asked, was answered)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                seen = [c for c in self._calls if c.tool == tool and (c.finished is not None or not finished)]
                if len(seen) >= count:
                    return replace(seen[count - 1])
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"no call #{count} to {tool} within {timeout}s (calls: {len(self._calls)})"
                    )
                self._cond.wait(left)

    def enqueue(
        self,
        prompt: str,
        agent_id: str | None = None,
        *,
        workspace_id: str | None = None,
        priority: str = "normal",
        task_id: str | None = None,
    ) -> str:
        """Create a task (for one agent, or any) and return its id (``task_id`` when given).

        An agent waiting at this moment has it reserved and pushed to its pending waits; else it
        stays QUEUED. ``workspace_id`` None matches any agent; the HTTP endpoint always requires it.
        """
        with self._cond:
            task_id = task_id or f"task-{int(time.time() * 1000)}-{secrets.token_hex(3)}"
            task = self._tasks[task_id] = _Task(task_id, prompt, workspace_id, agent_id, priority)
            agent = self._reserve(task)
            if agent is not None:
                for wait in agent.waits:
                    wait.task = wait.task or task.answer()
            self._cond.notify_all()
            return task_id

    def run_scheduler(self) -> None:
        """One scheduler cycle now (it also runs every ``scheduler_interval`` seconds)."""
        with self._cond:
            self._cycle()

    def evict(self, agent_id: str, action: EvictAction = "SHUTDOWN", reason: str = "evicted by test") -> None:
        """Make the agent's current or next wait_for_prompt answer the EVICT signal (once)."""
        with self._cond:
            self._evictions[agent_id] = {"reason": reason, "action": action}
            self._cond.notify_all()

    def agent_status(self, agent_id: str) -> str | None:
        """WAITING, PROCESSING or OFFLINE as the dashboard shows it; None for an unknown agent."""
        with self._cond:
            agent = self._agents.get(agent_id)
            return None if agent is None else self._status(agent)

    def task(self, task_id: str) -> dict[str, Any] | None:
        """A task as ``GET /admin/tasks/<id>`` shows it (status, assignedTo, history, ...)."""
        with self._cond:
            t = self._tasks.get(task_id)
            return None if t is None else t.view()

    def acks(self, task_id: str) -> list[Call]:
        """The ack_task calls for a task that the double answered with success."""
        return [
            c
            for c in self.tool_calls("ack_task")
            if isinstance(c.body, dict)
            and c.body.get("taskId") == task_id
            and isinstance(c.answer, dict)
            and not c.answer.get("isError")
        ]

    # ----- request plumbing (called from handler threads) ------------------------------------

    def _record(self, call: Call) -> None:
        with self._cond:
            self._calls.append(call)
            self._cond.notify_all()

    def _finish(self, call: Call, status: int, answer: Any) -> None:
        with self._cond:
            call.status, call.answer, call.finished = status, answer, time.time()
            self._cond.notify_all()

    def _authorized(self, headers: dict[str, str], query: dict[str, list[str]]) -> bool:
        if self.api_key is None:
            return True
        given = headers.get("x-api-key") or (query.get("apiKey") or [""])[0]
        return secrets.compare_digest(given.encode(), self.api_key.encode())

    def _dispatch_tool(self, tool: str, body: Any) -> tuple[int, Any]:
        handler = _TOOLS.get(tool)
        if handler is None:
            return 404, {"error": f"Tool {tool} not found"}
        if not isinstance(body, dict):
            body = {}
        try:
            self._touch(body.get("agentId"))
            answer = handler(self, body)
        except _ToolError as exc:
            return 200, {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        text = answer if isinstance(answer, str) else json.dumps(answer)
        return 200, {"content": [{"type": "text", "text": text}]}

    # ----- state helpers (hold the lock) -----------------------------------------------------

    def _touch(self, agent_id: Any) -> None:
        if isinstance(agent_id, str) and agent_id:
            with self._cond:
                agent = self._agents.get(agent_id)
                if agent is not None:
                    agent.last_seen = time.time()

    def _status(self, agent: _Agent) -> str:
        if agent.waiting > 0:
            return "WAITING"
        return "PROCESSING" if self._busy_tasks(agent.id) else "OFFLINE"

    def _busy_tasks(self, agent_id: str) -> list[str]:
        return [t.id for t in self._tasks.values() if t.assigned_to == agent_id and t.status == "ASSIGNED"]

    def _agent_view(self, agent: _Agent) -> dict[str, Any]:
        return {
            "id": agent.id,
            "displayName": agent.display_name,
            "role": agent.role,
            # The real server accepts `source` but never stores it.
            "source": None,
            "status": self._status(agent),
            "lastSeen": int(agent.last_seen * 1000),
            "createdAt": int(agent.created_at * 1000),
            "currentTasks": self._busy_tasks(agent.id),
            "capabilities": list(agent.capabilities),
            "workspaceContext": agent.workspace,
        }

    def _eligible(self, task: _Task, agent: _Agent) -> bool:
        if task.agent_id is not None and task.agent_id != agent.id:
            return False
        return task.workspace_id is None or task.workspace_id == (agent.workspace or {}).get("repoId")

    def _reserve(self, task: _Task) -> _Agent | None:
        """Reserve ``task`` for an agent flagged waiting (the scheduler's way): PENDING_ACK, no push."""
        agent = next((a for a in self._agents.values() if a.flagged and self._eligible(task, a)), None)
        if agent is not None:
            task.status, task.pending_ack, task.sent_at = "PENDING_ACK", agent.id, time.monotonic()
            task.note("PENDING_ACK", f"Reserved for agent {agent.id} (scored match)")
            agent.flagged = False
        return agent

    def _cycle(self) -> None:
        """The scheduler: requeue what was not ACKed in time, then reserve QUEUED tasks."""
        now = time.monotonic()
        for t in self._tasks.values():
            if t.status == "PENDING_ACK" and now - t.sent_at > self.ack_timeout:
                t.status, t.pending_ack, t.assigned_to = "QUEUED", None, None
                t.note("QUEUED", "Force-retried by admin")
        for t in self._tasks.values():
            if t.status == "QUEUED":
                self._reserve(t)
        self._cond.notify_all()

    def _schedule(self) -> None:
        with self._cond:
            due = time.monotonic() + self.scheduler_interval
            while not self._stopping:
                left = due - time.monotonic()
                if left > 0:
                    self._cond.wait(left)  # woken by every change: only the interval counts
                    continue
                self._cycle()
                due = time.monotonic() + self.scheduler_interval

    def _take_queued(self, agent: _Agent) -> _Task | None:
        """A new wait's first look: a QUEUED task for this agent goes PENDING_ACK (no history)."""
        task = next(
            (t for t in self._tasks.values() if t.status == "QUEUED" and self._eligible(t, agent)), None
        )
        if task is not None:
            task.status, task.pending_ack, task.sent_at = "PENDING_ACK", agent.id, time.monotonic()
        return task

    # ----- tools -----------------------------------------------------------------------------

    def _register_agent(self, body: dict[str, Any]) -> dict[str, Any]:
        agent_id = _need_str(body, "agentId")
        caps = body.get("capabilities")
        if not isinstance(caps, list) or not caps or any(c not in CAPABILITIES for c in caps):
            raise _ToolError(
                f"Error: Invalid arguments:\n  capabilities: non-empty list of {', '.join(CAPABILITIES)}"
            )
        ws = body.get("workspaceContext")
        if (
            not isinstance(ws, dict)
            or ws.get("type") not in ("local", "github")
            or not isinstance(ws.get("repoId"), str)
        ):
            raise _ToolError(
                "Error: Invalid arguments:\n  workspaceContext: {type: local|github, repoId} required"
            )
        if body.get("source") not in (None, "CLI", "IDE"):
            raise _ToolError("Error: Invalid arguments:\n  source: Expected 'CLI' | 'IDE'")
        display = body.get("displayName") or f"agent-{secrets.token_hex(2)}"
        now = time.time()
        with self._cond:
            old = self._agents.get(agent_id)
            if old is not None and now - old.last_seen < 300 and old.display_name != display:
                agent_id = f"{agent_id}-{_base36(int(now * 1000))}"
            self._agents[agent_id] = _Agent(agent_id, display, body.get("role"), list(caps), ws, now, now)
        return {"registered": True, "agentId": agent_id, "displayName": display, "capabilities": list(caps)}

    def _wait_for_prompt(self, body: dict[str, Any]) -> dict[str, Any]:
        agent_id = _need_str(body, "agentId")
        deadline = time.monotonic() + _wait_seconds(body.get("timeout"))
        with self._cond:
            agent = self._agents.get(agent_id)
            if agent is None:  # the real server silently creates unknown waiters
                now = time.time()
                agent = self._agents[agent_id] = _Agent(agent_id, agent_id, None, [], None, now, now)
            wait = _Wait()
            agent.waits.append(wait)
            agent.flagged = True
            try:
                return self._wait_locked(agent, wait, deadline)
            finally:
                agent.waits.remove(wait)
                agent.flagged = False
                agent.last_seen = time.time()
                self._cond.notify_all()

    def _wait_locked(self, agent: _Agent, wait: _Wait, deadline: float) -> dict[str, Any]:
        evict = self._evictions.pop(agent.id, None)
        if evict is not None:
            return {"controlSignal": "EVICT", **evict}
        task = self._take_queued(agent)
        if task is not None:
            return task.answer()
        self._cycle()
        while not self._stopping:
            if wait.task is not None:
                return wait.task
            evict = self._evictions.pop(agent.id, None)
            if evict is not None:
                return {"controlSignal": "EVICT", **evict}
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._cond.wait(left)
        return dict(IDLE_ANSWER)

    def _ack_task(self, body: dict[str, Any]) -> dict[str, Any]:
        task_id, agent_id = _need_str(body, "taskId"), _need_str(body, "agentId")
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                raise _ToolError("ACK failed: Task not found")
            if task.status != "PENDING_ACK":
                raise _ToolError("ACK failed: Task is not in PENDING_ACK state")
            if task.pending_ack != agent_id:
                raise _ToolError(f"ACK failed: Expected agent {task.pending_ack} but got {agent_id}")
            task.status, task.assigned_to, task.pending_ack = "ASSIGNED", agent_id, None
            task.note("ASSIGNED", "Status changed to ASSIGNED", agent_id)
            self._cond.notify_all()
        return {"acknowledged": True, "taskId": task_id}

    def _update_progress(self, body: dict[str, Any]) -> dict[str, Any]:
        task_id = _need_str(body, "taskId")
        _need_str(body, "agentId")
        _need_str(body, "message")
        with self._cond:
            task = self._tasks.get(task_id)
            if task is not None:
                task.progress.append(dict(body))
        return {"recorded": True}

    def _send_response(self, body: dict[str, Any]) -> str:
        task_id = _need_str(body, "taskId")
        _need_str(body, "message")
        status = body.get("status")
        if status not in TASK_STATUSES:
            raise _ToolError("Error: Invalid arguments:\n  status: Invalid enum value")
        with self._cond:
            task = self._tasks.get(task_id)
            if task is not None:
                task.response = dict(body)
                task.status = status if status in _DONE_STATUSES else task.status
            self._cond.notify_all()
        return f"Response recorded for {task_id}"

    def _list_agents(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        cap = body.get("capability")
        with self._cond:
            return [
                {
                    k: v
                    for k, v in self._agent_view(a).items()
                    if k not in ("source", "workspaceContext", "createdAt")
                }
                for a in self._agents.values()
                if cap is None or cap in a.capabilities
            ]

    def _get_agent_status(self, body: dict[str, Any]) -> dict[str, Any]:
        agent_id = _need_str(body, "agentId")
        with self._cond:
            agent = self._agents.get(agent_id)
            if agent is None:
                raise _ToolError(json.dumps({"status": "UNKNOWN"}))
            view = self._agent_view(agent)
        return {k: view[k] for k in ("displayName", "status", "capabilities", "lastSeen", "currentTasks")} | {
            "agentId": agent_id
        }

    # ----- admin -----------------------------------------------------------------------------

    def _task_list(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        """``GET /admin/tasks``: newest first; ``status`` (comma-separated), ``agentId`` (the
        assigned agent), ``limit`` (default 50) and ``offset``, as the real server filters."""
        statuses = {s.strip() for s in (query.get("status") or [""])[0].split(",") if s.strip()}
        assigned = (query.get("agentId") or [""])[0]
        try:
            limit = int((query.get("limit") or ["50"])[0])
            offset = int((query.get("offset") or ["0"])[0])
        except ValueError:
            limit, offset = 50, 0
        with self._cond:
            found = [
                t.view()
                for t in sorted(self._tasks.values(), key=lambda t: t.created_at, reverse=True)
                if (not statuses or t.status in statuses) and (not assigned or t.assigned_to == assigned)
            ]
        return found[offset : offset + limit]

    def _admin(self, method: str, path: str, body: Any, query: dict[str, list[str]]) -> tuple[int, Any]:
        body = body if isinstance(body, dict) else {}
        if method == "GET" and path == "/admin/agents/status":
            with self._cond:
                return 200, [self._agent_view(a) for a in self._agents.values()]
        if method == "GET" and path == "/admin/tasks":
            return 200, self._task_list(query)
        if method == "GET" and path.startswith("/admin/tasks/"):
            found = self.task(path.removeprefix("/admin/tasks/"))
            return (200, found) if found is not None else (404, {"error": "Task not found"})
        if method == "POST" and path == "/admin/enqueue":
            prompt, ws = body.get("prompt"), body.get("workspaceId")
            if not isinstance(prompt, str) or not prompt or not isinstance(ws, str) or not ws:
                return 400, {"error": "Missing prompt or workspaceId"}
            if _REFUSED_PROMPT.search(prompt):
                return 403, {"error": "Prompt blocked by security policy"}
            task_id = self.enqueue(
                prompt, body.get("agentId"), workspace_id=ws, priority=body.get("priority") or "normal"
            )
            return 200, {"success": True, "taskId": task_id}
        if method == "POST" and path == "/admin/evict":
            agent_id, reason = body.get("agentId"), body.get("reason")
            if not agent_id or not reason:
                return 400, {"error": "Missing agentId or reason"}
            action = body.get("action") or "RESTART"
            if action == "SHUTDOWN":
                self.evict(agent_id, "SHUTDOWN", reason)
            elif action == "RESTART":
                self.evict(agent_id, "RESTART", reason)
            else:
                return 400, {"error": "Invalid action"}
            return 200, {"success": True, "message": f"Eviction queued for {agent_id}"}
        return 404, {"error": f"Cannot {method} {path}"}


_TOOLS: dict[str, Any] = {
    "register_agent": WaaahServer._register_agent,
    "wait_for_prompt": WaaahServer._wait_for_prompt,
    "ack_task": WaaahServer._ack_task,
    "update_progress": WaaahServer._update_progress,
    "send_response": WaaahServer._send_response,
    "list_agents": WaaahServer._list_agents,
    "get_agent_status": WaaahServer._get_agent_status,
}


class _Handler(BaseHTTPRequestHandler):
    """Turns HTTP into calls on the owning ``WaaahServer`` (set as a class attribute)."""

    double: WaaahServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # keep test output clean

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
        self._serve("POST")

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path.rstrip("/") or "/", parse_qs(parts.query)
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() in _KEPT_HEADERS}
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        tool = path.removeprefix("/mcp/tools/") if path.startswith("/mcp/tools/") else None
        call = Call(method, path, tool, None, headers, time.time())
        try:
            call.body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            self.double._record(call)
            self._send(
                call, 400, b"<!DOCTYPE html><html><body><pre>Bad Request</pre></body></html>", "text/html"
            )
            return
        self.double._record(call)
        status, answer = self._route(method, path, query, headers, tool, call.body)
        self._send(call, status, json.dumps(answer).encode(), "application/json; charset=utf-8", answer)

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        tool: str | None,
        body: Any,
    ) -> tuple[int, Any]:
        if path == "/health":
            return 200, {"status": "ok"}
        if tool is None and not path.startswith("/admin/"):
            return 404, {"error": f"Cannot {method} {path}"}
        if not self.double._authorized(headers, query):
            return 401, UNAUTHORIZED
        if tool is not None:
            if method != "POST":
                return 404, {"error": f"Cannot {method} {path}"}
            return self.double._dispatch_tool(tool, body)
        return self.double._admin(method, path, body, query)

    def _send(self, call: Call, status: int, data: bytes, ctype: str, answer: Any = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client went away (e.g. it gave up on a long poll)
        finally:
            self.double._finish(call, status, answer)


def dead_wait(url: str, agent_id: str, api_key: str | None = None, timeout: float = 60) -> None:
    """Start a wait_for_prompt for ``agent_id`` whose client goes away at once (a killed CLI's
    MCP process, a killed supervisor): the server keeps it until its timeout."""
    body = json.dumps({"agentId": agent_id, "timeout": timeout}).encode()
    parts = urlsplit(url)
    key = f"X-API-Key: {api_key}\r\n" if api_key else ""
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80)) as sock:
        sock.sendall(
            f"POST /mcp/tools/wait_for_prompt HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"{key}Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted, printing the URL."""
    parser = argparse.ArgumentParser(description="A WAAAH server double on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=3456)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    server = WaaahServer(args.api_key, port=args.port)
    print(f"WAAAH double listening on {server.start()}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
