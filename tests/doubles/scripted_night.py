"""A scripted night in a workspace's .waaah: session.json and events.jsonl as the supervisor writes them.

Eight hours from 20:00: the workflow, a first wait, two tasks (one answered, one blocked), the
agent leaving its loop twice (a nudge it answers, one it does not), a crash and its restart, a
usage-limit wait of an hour, a stall, and tokens as the transcript grew. ``expected`` holds
what a report of it must show.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

EVENING = datetime(2026, 11, 23, 20, 0, tzinfo=timezone.utc)
SESSION = "gemini-20261123-200000-a1b2c3"

# (minutes after 20:00, event, fields)
SCRIPT: list[tuple[float, str, dict[str, Any]]] = [
    (0, "start", {"argv": ["gemini"], "pid": 100, "resumed": False}),
    (0.2, "state", {"state": "ready", "evidence": "screen: input prompt"}),
    (0.3, "delivery", {"kind": "workflow", "phase": "confirmed"}),
    (0.4, "state", {"state": "busy", "evidence": "title: Working"}),
    (1, "mcp-tool_start", {"tool": "register_agent"}),
    (1, "mcp-tool_end", {"tool": "register_agent", "outcome": "ok"}),
    (2, "mcp-tool_start", {"tool": "wait_for_prompt"}),
    (2, "state", {"state": "tool", "evidence": "MCP tap: wait_for_prompt in flight"}),
    (60, "mcp-tool_end", {"tool": "wait_for_prompt", "outcome": "task", "task_id": "task-1"}),
    (60, "state", {"state": "busy", "evidence": "title: Working"}),
    (100, "mcp-tool_end", {"tool": "send_response", "outcome": "ok"}),
    (101, "state", {"state": "ready", "evidence": "screen: input prompt"}),
    (101.2, "nudge", {"kind": "continue", "reason": "the turn ended outside wait_for_prompt"}),
    (101.3, "state", {"state": "busy", "evidence": "title: Working"}),
    (102, "mcp-tool_start", {"tool": "wait_for_prompt"}),
    (102, "state", {"state": "tool", "evidence": "MCP tap"}),
    (
        120,
        "tokens",
        {
            "source": "chat.jsonl",
            "input": 120000,
            "output": 3400,
            "models": {"gemini-2.5-pro": {"input": 120000, "output": 3400, "cached": 0}},
        },
    ),
    (150, "mcp-tool_end", {"tool": "wait_for_prompt", "outcome": "task", "task_id": "task-2"}),
    (150, "state", {"state": "busy", "evidence": "title: Working"}),
    (170, "mcp-tool_end", {"tool": "block_task", "outcome": "ok"}),
    (171, "state", {"state": "ready", "evidence": "screen: input prompt"}),
    (171.2, "nudge", {"kind": "continue", "reason": "the turn ended outside wait_for_prompt"}),
    (181.2, "nudge", {"kind": "continue", "reason": "still at the prompt"}),
    (182, "state", {"state": "busy", "evidence": "title: Working"}),
    (200, "stall", {"action": "esc", "minutes": 15}),
    (201, "restart", {"after": "exit code 1", "delay": 1.0, "reason": "restart 1 of 5 in this window"}),
    (202, "start", {"argv": ["gemini", "--resume", "x"], "pid": 101, "resumed": True}),
    (202.5, "state", {"state": "ready", "evidence": "screen: input prompt"}),
    (203, "state", {"state": "busy", "evidence": "title: Working"}),
    (204, "mcp-tool_start", {"tool": "wait_for_prompt"}),
    (204, "state", {"state": "tool", "evidence": "MCP tap"}),
    (
        240,
        "tokens",
        {
            "source": "chat.jsonl",
            "input": 250000,
            "output": 7000,
            "models": {"gemini-2.5-pro": {"input": 250000, "output": 7000, "cached": 50000}},
        },
    ),
    (300, "limit", {"until": "2026-11-24T02:00:00+00:00", "how": "banner", "banner": "Usage limit reached"}),
    (300, "state", {"state": "limited", "evidence": "screen: usage limit"}),
    (360, "limit-over", {}),
    (360, "limit-resume", {"keys": "\r"}),
    (360.5, "state", {"state": "busy", "evidence": "title: Working"}),
    (361, "mcp-tool_start", {"tool": "wait_for_prompt"}),
    (361, "state", {"state": "tool", "evidence": "MCP tap"}),
    (
        420,
        "tokens",
        {
            "source": "chat.jsonl",
            "input": 300000,
            "output": 8000,
            "models": {"gemini-2.5-pro": {"input": 300000, "output": 8000, "cached": 100000}},
        },
    ),
    (480, "stop", {"reason": "user"}),
]

EXPECTED = {
    "tasks": 2,
    "nudges": 3,
    "answered": 2,
    "restarts": 1,
    "tokens_in": 300000,
    "tokens_out": 8000,
    "limited_minutes": 60,
    # At PRICES: 200,000 input x 1.25 + 100,000 cached x 0.31 + 8,000 output x 10, per million.
    "cost": "$0.36",
}

#: A price table (prices.toml) for the night's model.
PRICES = '["gemini-2.5-pro"]\ninput = 1.25\ncached = 0.31\noutput = 10.0\n'


def write_night(workspace: Path) -> Path:
    folder = workspace / ".waaah" / "sessions" / SESSION
    folder.mkdir(parents=True)
    lines = []
    for minutes, name, fields in SCRIPT:
        ts = (EVENING + timedelta(minutes=minutes)).isoformat(timespec="milliseconds")
        lines.append(json.dumps({"ts": ts, "event": name, **fields}))
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    state = {
        "schema": 1,
        "id": SESSION,
        "agent": "gemini",
        "workflow": "waaah-orc",
        "workspace": str(workspace),
        "native_session_id": "0f1b74be-a8eb-4b23-8cde-12e3b7bfed75",
        "status": "stopped",
        "created": EVENING.isoformat(),
        "ended": (EVENING + timedelta(hours=8)).isoformat(),
    }
    (folder / "session.json").write_text(json.dumps(state))
    return folder
