"""``python -m waaah_agent.commands.app``: the command line under its earlier module name.

MCP entries that ``waaah mcp install`` wrote into a CLI's settings before the commands moved to
``waaah_agent/commands/`` start ``python -m waaah_agent.commands.app mcp-proxy``; this keeps them working.
"""

from waaah_agent.commands.app import app, main

__all__ = ["app", "main"]

if __name__ == "__main__":
    main()
