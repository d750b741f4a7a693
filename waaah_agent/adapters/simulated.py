"""A SIMULATED agent for demos and tests: no model, no account, clearly labelled.

It draws a gemini-like screen (banner, input box, spinner, window title) so the
supervisor can be watched doing its job by someone without a real CLI.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path

from waaah_agent.adapters.base import Adapter, ScreenRules


def _transcript(env: Mapping[str, str], workspace: Path, session_id: str) -> Path | None:
    folder = Path(env.get("SIM_TRANSCRIPT_DIR") or workspace / ".waaah" / "simulated")
    path = (workspace / folder) / f"{session_id}.jsonl"
    return path if path.exists() else None


ADAPTER = Adapter(
    name="simulated",
    display_name="Simulated agent (demo, no model)",
    binary=sys.executable,
    install_hint="it ships with waaah-agent; reinstall the package",
    rules=ScreenRules(
        input_ready=re.compile(r"^ > ", re.MULTILINE),
        input_empty=re.compile(r"^ >   Type your message", re.MULTILINE),
        busy=re.compile(r"\(esc to cancel"),
        title_ready=re.compile(r"^◇"),
        title_busy=re.compile(r"^✦"),
        dialog=re.compile(r"Allow this action\? \(y/n\)"),
        login=re.compile(r"SIMULATED: login required"),
        limit=re.compile(r"^SIMULATED usage limit reached[^\n]*", re.MULTILINE),
        secret_entry=re.compile(r"^SIMULATED: enter your API key", re.MULTILINE),
        dialog_rows=200,  # its short history sits at the top of the screen
    ),
    enter_delay=0.2,
    fresh_args=lambda sid: ["-m", "waaah_agent.simulated", "--session-id", sid],
    resume_args=lambda sid: ["-m", "waaah_agent.simulated", "--resume", sid],
    transcript=_transcript,
    simulated=True,
)
