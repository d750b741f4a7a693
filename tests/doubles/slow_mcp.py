"""A tiny stdio MCP server standing in for the WAAAH proxy: one slow `wait_for_prompt` tool.

Run as `python -m tests.doubles.slow_mcp` (or by file path). Register it under the server name
`waaah` so the CLIs expose the tool as `mcp_waaah_wait_for_prompt` (gemini) or
`mcp__waaah__wait_for_prompt` (claude).

Environment:
  SLOW_MCP_SECONDS   how long each call blocks (default 3), like a long poll with no task.
  SLOW_MCP_LOG       optional file; one JSON line per call (arguments, start and end time).
"""

from __future__ import annotations

import asyncio
import json
import os
import time

from mcp.server.mcpserver import MCPServer

#: What the tool answers: the shape of a real WAAAH idle long-poll result.
IDLE_RESULT = {"success": True, "status": "IDLE", "message": "No tasks available. Waiting."}

server: MCPServer = MCPServer("waaah")


def _log(record: dict[str, object]) -> None:
    path = os.environ.get("SLOW_MCP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


# Plain text output: with structured output the CLIs hand the model `{"result": ...}` instead.
@server.tool(structured_output=False)
async def wait_for_prompt(agentId: str = "", timeout: float = 290) -> str:  # noqa: N803 (WAAAH's name)
    """Wait for the next task for this agent (here: always times out with an IDLE answer)."""
    seconds = float(os.environ.get("SLOW_MCP_SECONDS", "3"))
    started = time.time()
    await asyncio.sleep(seconds)
    _log(
        {
            "tool": "wait_for_prompt",
            "args": {"agentId": agentId, "timeout": timeout},
            "start": started,
            "end": time.time(),
        }
    )
    return json.dumps(IDLE_RESULT)


def main() -> None:
    """Serve over stdio until the client closes the pipe."""
    server.run("stdio")


if __name__ == "__main__":
    main()
