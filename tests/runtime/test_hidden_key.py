"""The WAAAH API key typed at the start's prompt is not echoed on the terminal (the address is)."""

from __future__ import annotations

import io
import sys

import pexpect

SCRIPT = """
from waaah_agent.runtime.mcp import setup as mcp_setup
choice = mcp_setup.choose_server(None, None, {}, None, True, input)
print("GOT", choice.url, len(choice.api_key or ""))
"""


def test_the_key_prompt_does_not_echo_what_is_typed() -> None:
    screen = io.StringIO()
    child = pexpect.spawn(sys.executable, ["-c", SCRIPT], timeout=20, encoding="utf-8")
    child.logfile_read = screen  # everything the terminal showed
    try:
        child.expect_exact("WAAAH server address [http://localhost:3456]: ")
        child.sendline("http://typed-address:1")
        child.expect_exact("WAAAH API key (optional, not shown, Enter for none): ")
        child.sendline("sk-secret-typed-key")
        child.expect(r"GOT (\S+) (\d+)")
        assert (child.match.group(1), child.match.group(2)) == ("http://typed-address:1", "19")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    shown = screen.getvalue()
    assert "http://typed-address:1" in shown.split("WAAAH API key")[0]  # the address is echoed
    assert "sk-secret-typed-key" not in shown
