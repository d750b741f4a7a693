"""A throwaway HOME for the real opencode against the fake OpenAI API, and a PTY that answers
its terminal queries as a terminal does (opencode draws nothing until they are answered).

Nothing here touches the real ``~/.config/opencode``: the config goes under the ``root`` given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.doubles.cli_homes import CliPty, base_env
from tests.doubles.fake_openai import FAKE_KEY
from waaah_agent.core.supervise.termanswers import TerminalAnswers

KEY_ENV = "FAKE_OPENAI_API_KEY"
MODEL = "gpt-fake"
# Variables of the caller that would point opencode (or waaah) elsewhere.
_SCRUB = ("OPENAI_", "CODEX_", "OPENCODE_", "WAAAH_")


def opencode_config(base_url: str, mcp: dict[str, Any] | None = None) -> dict[str, Any]:
    """The user's ``opencode.json``: the fake as an ``@ai-sdk/openai-compatible`` provider."""
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"fake/{MODEL}",
        "small_model": f"fake/{MODEL}",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake OpenAI",
                "options": {"baseURL": base_url, "apiKey": f"{{env:{KEY_ENV}}}"},
                "models": {MODEL: {"name": "GPT Fake"}},
            }
        },
        "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
    }
    if mcp:
        config["mcp"] = mcp
    return config


def opencode_env(root: Path, ws: Path, base_url: str, mcp: dict[str, Any] | None = None) -> dict[str, str]:
    """A HOME under ``root`` whose opencode talks to the fake at ``base_url`` (ending in /v1)."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in base_env(home).items() if not k.startswith(_SCRUB)}
    env[KEY_ENV] = FAKE_KEY
    env["PWD"] = str(ws)  # opencode takes its project folder from PWD
    path = Path(env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(opencode_config(base_url, mcp), indent=2), encoding="utf-8")
    env.update(OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1")
    return env


def local_mcp(entry: dict[str, Any]) -> dict[str, Any]:
    """A command/args/env MCP entry (``slow_mcp_server()``) in opencode's ``mcp`` shape."""
    return {
        "type": "local",
        "command": [entry["command"], *entry.get("args", [])],
        "environment": dict(entry.get("env") or {}),
        "enabled": True,
    }


class AnsweringPty(CliPty):
    """A :class:`CliPty` whose terminal answers the CLI's queries (position, attributes, colours)."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: Path, rows: int = 40, cols: int = 120
    ) -> None:
        super().__init__(argv, env, cwd, rows, cols)
        self.answers = TerminalAnswers(cols, rows)
        self._seen = 0

    def pump(self, seconds: float) -> None:
        import time

        deadline = time.monotonic() + seconds
        while True:
            super().pump(min(0.05, max(0.0, deadline - time.monotonic())))
            reply = self.answers.feed(bytes(self.raw[self._seen :]))
            self._seen = len(self.raw)
            if reply and not self.exited:
                self.child.send(reply)
            if self.exited or time.monotonic() >= deadline:
                return
