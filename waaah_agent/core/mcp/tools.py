"""The WAAAH tools the MCP proxy offers: names, descriptions, JSON Schemas, and what it fills in.

The catalogue follows the WAAAH server's REST API (``POST <server>/mcp/tools/<name>``). Pure data
and pure functions; ``mcp_proxy.py`` serves them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp import types

CAPABILITIES = [
    "spec-writing",
    "code-writing",
    "test-writing",
    "doc-writing",
    "code-doctor",
    "general-purpose",
]
TASK_STATUSES = [
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
]


# ----- tool catalogue ----------------------------------------------------------------------------

_STR: dict[str, Any] = {"type": "string", "minLength": 1}

_WORKSPACE: dict[str, Any] = {
    "type": "object",
    "description": "Workspace the agent is working in.",
    "properties": {
        "type": {"type": "string", "enum": ["local", "github"], "description": "Workspace type."},
        "repoId": {"type": "string", "description": "Repository identifier, e.g. 'OpenSourceWTF/WAAAH'."},
        "branch": {"type": "string", "description": "Current branch name."},
        "path": {"type": "string", "description": "Local filesystem path."},
    },
    "required": ["type", "repoId"],
}


@dataclass(frozen=True)
class ToolSpec:
    """One forwarded tool: what the model is told and which arguments the server requires."""

    description: str
    properties: Mapping[str, Mapping[str, Any]]
    required: tuple[str, ...]


TOOLS: dict[str, ToolSpec] = {
    "register_agent": ToolSpec(
        "Register this agent with the WAAAH server. Call once before waiting for prompts; "
        "use the agentId it returns from then on.",
        {
            "agentId": {**_STR, "description": "Unique identifier for the agent."},
            "displayName": {
                "type": "string",
                "description": "Human-readable name; keep it stable across restarts.",
            },
            "role": {"type": "string", "description": "Role of the agent, e.g. 'full-stack-engineer'."},
            "capabilities": {
                "type": "array",
                "items": {"type": "string", "enum": CAPABILITIES},
                "minItems": 1,
                "description": "Capabilities this agent has.",
            },
            "workspaceContext": _WORKSPACE,
            "source": {"type": "string", "enum": ["CLI", "IDE"], "description": "Where the agent runs."},
        },
        ("agentId", "capabilities", "workspaceContext"),
    ),
    "wait_for_prompt": ToolSpec(
        "Wait (long poll) for the next task for this agent. Returns a task (taskId, prompt: ack it "
        "with ack_task at once), an IDLE answer when the timeout passed (call again), or an EVICT "
        "control signal (stop).",
        {
            "agentId": {**_STR, "description": "The ID of the agent waiting for a prompt."},
            "timeout": {"type": "number", "description": "Seconds to wait (default 290, at most 300)."},
        },
        ("agentId",),
    ),
    "ack_task": ToolSpec(
        "Acknowledge a task received from wait_for_prompt (within 30 s, or it is given to another agent).",
        {
            "taskId": {**_STR, "description": "The ID of the task to acknowledge."},
            "agentId": {**_STR, "description": "The ID of the agent acknowledging the task."},
        },
        ("taskId", "agentId"),
    ),
    "update_progress": ToolSpec(
        "Report progress on the current task.",
        {
            "taskId": {**_STR, "description": "ID of the task to update."},
            "agentId": {**_STR, "description": "ID of the agent reporting progress."},
            "message": {**_STR, "description": "Progress observation."},
            "phase": {"type": "string", "description": "Current phase, e.g. PLANNING, BUILDING, TESTING."},
            "percentage": {
                "type": "number",
                "minimum": 0,
                "maximum": 100,
                "description": "Completion percentage.",
            },
        },
        ("taskId", "agentId", "message"),
    ),
    "send_response": ToolSpec(
        "Send the result of a task (its final or current status and a summary).",
        {
            "taskId": {**_STR, "description": "The ID of the task being responded to."},
            "status": {"type": "string", "enum": TASK_STATUSES, "description": "The status of the task."},
            "message": {**_STR, "description": "A response or summary of the result."},
            "artifacts": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Files or artifact IDs.",
            },
            "blockedReason": {"type": "string", "description": "Why the task is blocked (status BLOCKED)."},
        },
        ("taskId", "status", "message"),
    ),
    "list_agents": ToolSpec(
        "List the agents known to the WAAAH server.",
        {
            "capability": {
                "type": "string",
                "enum": CAPABILITIES,
                "description": "Only agents with this capability.",
            }
        },
        (),
    ),
    "get_agent_status": ToolSpec(
        "Get the status of one agent.",
        {"agentId": {**_STR, "description": "The ID of the agent to check."}},
        ("agentId",),
    ),
}


def input_schema(spec: ToolSpec, agent_id: str | None) -> dict[str, Any]:
    """The JSON Schema for a tool; ``agentId`` is optional when the proxy fills it in."""
    properties = {name: dict(prop) for name, prop in spec.properties.items()}
    required = list(spec.required)
    if agent_id and "agentId" in properties:
        required = [r for r in required if r != "agentId"]
        properties["agentId"]["description"] += f" Defaults to {agent_id!r}."
    return {"type": "object", "properties": properties, "required": required}


def tool_definitions(agent_id: str | None) -> list[types.Tool]:
    """Every forwarded tool, as MCP ``tools/list`` shows it."""
    return [
        types.Tool(name=name, description=spec.description, input_schema=input_schema(spec, agent_id))
        for name, spec in TOOLS.items()
    ]


def fill_arguments(tool: str, arguments: Mapping[str, Any] | None, agent_id: str | None) -> dict[str, Any]:
    """The body to send: the call's arguments plus what the proxy fills in.

    * ``agentId``: the supervised agent's id, for tools that take one, when the call has none.
    * ``source: "CLI"`` for register_agent, when absent.
    * ``timeout``: a numeric string becomes a number (the server rejects ``"290"``).
    """
    body = dict(arguments or {})
    spec = TOOLS.get(tool)
    takes_agent = spec is not None and "agentId" in spec.properties
    if agent_id and takes_agent and not body.get("agentId"):
        body["agentId"] = agent_id
    if tool == "register_agent":
        body.setdefault("source", "CLI")
    if tool == "wait_for_prompt" and isinstance(body.get("timeout"), str):
        try:
            body["timeout"] = float(body["timeout"])
        except ValueError:
            pass  # let the server report it
    return body
