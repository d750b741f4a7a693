"""Re-record the real opencode screens used as detector fixtures, from the pinned version.

    .venv/bin/python scripts/record_screens_opencode.py

Like scripts/record_screens.py (gemini, claude), for opencode against the fake OpenAI API
(tests/doubles/openai_tools.py) in a throwaway HOME: the installed CLI runs in a 120x40 PTY whose
terminal answers its capability queries (core/termanswers.py; opencode draws nothing before),
is driven into each state, and the raw bytes read so far are saved to
``tests/fixtures/screens/opencode-<version>/<state>.bin`` with ``meta.json``.

States: idle (first screen), draft, busy, reply (idle after a reply), exit (after /exit),
tool (a wait_for_prompt call of an MCP server in flight), dialog (the same call asking for
permission, with ``permission.waaah_*`` set to ``ask``). Each group from a fresh start.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a plain script from the repository root

from scripts.record_screens import FIXTURES, Recorder  # noqa: E402
from tests.doubles.cli_homes import CLI_BIN_DIR, Rendered, cli_bin, slow_mcp_server  # noqa: E402
from tests.doubles.fake_openai import FAKE_KEY, Text  # noqa: E402
from tests.doubles.openai_tools import Slow, ToolCall, ToolFakeOpenAI, ToolRule  # noqa: E402
from tests.doubles.opencode_home import AnsweringPty, local_mcp, opencode_env  # noqa: E402

BUSY_SECONDS = 5.0
TOOL_SECONDS = 3.0
DRAFT = "BUSY-MARKER please summarise the plan"
QUICK_REPLY = "Hello from the fake model."
TOOL_REPLY = "Back from wait_for_prompt."


def rules() -> list[ToolRule]:
    return [
        ToolRule(Slow("Here is the summary you asked for.", BUSY_SECONDS), marker="BUSY-MARKER"),
        ToolRule(Text(QUICK_REPLY), marker="REPLY-MARKER"),
        ToolRule(ToolCall("wait_for_prompt", {"agentId": "recorder", "timeout": 290}), marker="TOOL-MARKER"),
        ToolRule(Text(TOOL_REPLY), after="wait_for_prompt"),
    ]


def idle(screen: Rendered) -> bool:
    """At its prompt: the input box's bottom edge and the footer's commands, no `esc interrupt`."""
    return "ctrl+p commands" in screen.text and "esc interrupt" not in screen.text and "╹▀" in screen.text


def busy(screen: Rendered) -> bool:
    return "esc interrupt" in screen.text


@contextmanager
def session(mcp: dict[str, Any] | None = None, permission: str | None = None) -> Iterator[AnsweringPty]:
    root = Path(tempfile.mkdtemp(prefix="waaah-rec-"))
    try:
        ws = root / "ws"
        ws.mkdir()
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        with ToolFakeOpenAI(rules(), api_key=FAKE_KEY) as fake:
            env = opencode_env(root, ws, f"{fake.url}/v1", mcp)
            if permission is not None:
                env["OPENCODE_PERMISSION"] = f'{{"waaah_*": "{permission}"}}'
            pty = AnsweringPty([str(cli_bin("opencode"))], env, ws)
            try:
                yield pty
            finally:
                pty.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def start_idle(pty: AnsweringPty) -> float:
    took = pty.wait(lambda s: idle(s) and "Ask anything" in s.text, "idle", timeout=60)
    pty.settle()
    return took


def record_main(rec: Recorder) -> None:
    with session() as pty:
        rec.timings["start_to_idle"] = start_idle(pty)
        rec.save("idle", pty, "fresh start; 'Ask anything…' placeholder, 'ctrl+p commands' footer")
        pty.paste(DRAFT)
        pty.wait(lambda s: "BUSY-MARKER" in s.text, "draft text")
        pty.settle()
        rec.save("draft", pty, f"bracketed paste {DRAFT!r}, not submitted")
        pty.enter()
        submitted = time.monotonic()
        pty.wait(busy, "busy")
        rec.timings["enter_to_busy"] = time.monotonic() - submitted
        pty.pump(0.3)
        rec.save(
            "busy", pty, f"Enter; the model holds its reply {BUSY_SECONDS:.0f} s; 'esc interrupt' footer"
        )

    with session() as pty:
        start_idle(pty)
        pty.paste("REPLY-MARKER say hello")
        pty.enter()
        pty.wait(lambda s: QUICK_REPLY in s.text and idle(s), "reply")
        pty.settle()
        rec.save("reply", pty, f"idle again after the text reply {QUICK_REPLY!r}")
        pty.keys("/exit")
        pty.pump(0.5)
        pty.enter()
        pty.wait_exit()
        rec.save("exit", pty, "typed /exit, Enter: 'Continue  opencode -s ses_…' printed, the CLI exited")


def record_tool(rec: Recorder) -> None:
    mcp = {"waaah": local_mcp(slow_mcp_server(TOOL_SECONDS))}
    with session(mcp, permission="allow") as pty:
        start_idle(pty)
        pty.paste("TOOL-MARKER wait for the next task")
        pty.enter()
        pty.wait(lambda s: "wait_for_prompt" in s.text and busy(s), "tool call")
        pty.pump(0.3)
        rec.save(
            "tool", pty, f"the model called waaah_wait_for_prompt (slow_mcp sleeps {TOOL_SECONDS:.0f} s)"
        )
        pty.wait(lambda s: TOOL_REPLY in s.text and idle(s), "reply after the tool", timeout=30)

    with session(mcp, permission="ask") as pty:
        start_idle(pty)
        pty.paste("TOOL-MARKER wait for the next task")
        pty.enter()
        pty.wait(lambda s: "Permission required" in s.text, "permission dialog", timeout=30)
        pty.settle()
        rec.save(
            "dialog", pty, "OPENCODE_PERMISSION waaah_* ask; the model calls wait_for_prompt: its dialog"
        )


def main() -> int:
    manifest = CLI_BIN_DIR.parent / "opencode-ai" / "package.json"
    version = str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
    out = FIXTURES / f"opencode-{version}"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rec = Recorder("opencode", out, version)
    print(f"opencode {version} -> {out.relative_to(REPO)}")
    record_main(rec)
    record_tool(rec)
    rec.write_meta()
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    meta["recorded_by"] = "scripts/record_screens_opencode.py"
    meta["terminal"] = "answers the CLI's queries (waaah_agent/core/supervise/termanswers.py)"
    (out / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
