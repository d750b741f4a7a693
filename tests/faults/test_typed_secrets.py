"""A known secret typed into the agent key by key, or echoed in pieces: no run of 8 of its
characters reaches a file we write or a title we put on the terminal, however it arrives.

The echo of a key typed into an input box grows a character at a time (each frame a longer
prefix); a diff-based TUI writes only the new cell, with a cursor move and a colour around it;
another writes the line again after a CR. Through the real `waaah agent` over the simulated CLI
(each way of echoing) and over the real gemini (offline, its input box), then straight through
the record with the stream cut at every byte.
"""

from __future__ import annotations

import gzip
import re
import time
from pathlib import Path

import pexpect
import pytest

from tests.doubles.cli_homes import TEST_KEY, gemini_env
from tests.doubles.fake_model import FakeModel, Text
from tests.doubles.waaah_server import WaaahServer
from tests.e2e.conftest import with_cli_path, workspace_for
from tests.faults.test_secrets import ESCAPES, our_files
from tests.runtime.helpers import (
    WAAAH,
    delivered,
    pump_until,
    session_dirs,
    sim_env,
    sim_messages,
    spawn_waaah,
    state,
)
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.runtime.supervise.logfiles import replay
from waaah_agent.runtime.supervise.logs import SessionLogs

KEY = "AIzaSyTyped-0123456789abcdefghijklmnopq"  # GEMINI_API_KEY of the user's environment: known
RUN = 8
TITLES = re.compile(rb"\x1b\][012];([^\x07\x1b]*)(?:\x07|\x1b\\)")


class Shown:
    """A pexpect logfile: everything the terminal got."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def flush(self) -> None:
        pass


def runs_in(data: bytes, secret: str) -> list[str]:
    """The 8-character pieces of ``secret`` that ``data`` holds."""
    return sorted(
        {secret[i : i + RUN] for i in range(len(secret) - RUN + 1) if secret[i : i + RUN].encode() in data}
    )


def assert_no_run_anywhere(ws: Path, shown: bytes, secret: str) -> None:
    files = our_files(ws)
    assert any(p.suffix == ".cast" for p in files) and any(p.suffix == ".log" for p in files)
    for path in files:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        for form in (raw, ESCAPES.sub(b"", raw)):
            assert not runs_in(form, secret), f"{runs_in(form, secret)[:3]} in {path}"
        if ".cast" in path.name and path.suffix != ".gz":  # as a player shows it
            played = ESCAPES.sub(b"", replay(path))
            assert not runs_in(played, secret), f"{runs_in(played, secret)[:3]} in the replay of {path}"
    titles = b"\n".join(TITLES.findall(shown))
    assert not runs_in(titles, secret), f"{runs_in(titles, secret)} in a terminal title"


@pytest.mark.parametrize("echo", ["", "cells", "cr"])
def test_a_known_key_typed_into_the_simulated_agent_is_in_no_file_or_title(workspace, fake_home, echo):
    env = sim_env(fake_home, GEMINI_API_KEY=KEY, SIM_ECHO=echo)
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=env)
    shown = Shown()
    child.logfile_read = shown
    pump_until(child, lambda: session_dirs(workspace) and delivered(workspace))
    sid = state(workspace)["native_session_id"]
    pump_until(child, lambda: sim_messages(workspace, sid, role="model"))  # it answered: idle
    for ch in KEY:  # key by key, each echoed as it comes
        child.send(ch)
        pump_until(child, lambda: True, 1)
        time.sleep(0.02)
    pump_until(child, lambda: KEY[-4:].encode() in ESCAPES.sub(b"", bytes(shown.data)))  # all shown
    child.send("\r")
    pump_until(child, lambda: len(sim_messages(workspace, sid, role="model")) >= 2)
    child.send("\x03")
    child.expect("save and exit")
    child.send("s")
    child.expect(pexpect.EOF, timeout=15)
    assert KEY[:RUN].encode() in ESCAPES.sub(b"", bytes(shown.data)) or echo == "cells"  # the user saw it
    assert_no_run_anywhere(workspace, bytes(shown.data), KEY)


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_known_key_typed_into_gemini_s_input_box_is_in_no_file_or_title(tmp_path):
    ws = workspace_for(tmp_path)
    with FakeModel([], default=Text("OK")) as model, WaaahServer() as server:
        env = with_cli_path(gemini_env(tmp_path / "home", model.url))  # GEMINI_API_KEY: TEST_KEY
        child = pexpect.spawn(
            WAAAH,
            ["agent", "--start=gemini", "--no-nudge", f"--server={server.url}"],
            cwd=str(ws),
            env=env,
            dimensions=(40, 120),
            timeout=90,
        )
        child.delaybeforesend = None
        shown = Shown()
        child.logfile_read = shown
        pump_until(child, lambda: session_dirs(ws) and delivered(ws), 90)
        # Idle again after the workflow's turn: keys typed while gemini still works on it stay a
        # draft, and their Enter is not a prompt.
        pump_until(child, lambda: idle_after_workflow(ws, shown), 90)
        for ch in TEST_KEY:  # into its input box, key by key, as a person pastes nothing
            child.send(ch)
            pump_until(child, lambda: True, 1)
            time.sleep(0.03)
        pump_until(child, lambda: TEST_KEY[-6:].encode() in ESCAPES.sub(b"", bytes(shown.data)), 30)
        child.send("\r")
        asked = len(model.main_requests())
        pump_until(child, lambda: len(model.main_requests()) > asked, 60)
        child.send("\x03")
        child.expect("save and exit")
        child.send("s")
        child.expect(pexpect.EOF, timeout=30)
    assert_no_run_anywhere(ws, bytes(shown.data), TEST_KEY)


def idle_after_workflow(ws: Path, shown: Shown) -> bool:
    """gemini answered the workflow's turn (its answer in the text log) and its last title on the
    terminal says it is ready again."""
    log = Path(state(ws)["log_path"])
    titles = re.findall(rb"\x1b\]0;([^\x07]*)\x07", bytes(shown.data))
    return (
        log.exists() and "✦ OK" in log.read_text(errors="replace") and bool(titles) and b"Ready" in titles[-1]
    )


def frames(secret: str) -> list[bytes]:
    """How TUIs echo a key typed key by key (each entry: the output of one key)."""
    ink = [
        f"\x1b[2K\x1b[1A\x1b[2K\x1b[G│ > {secret[:n]}{' ' * (45 - n)}│\r\n".encode()
        for n in range(1, len(secret) + 1)
    ]
    cells = [
        f"\x1b[?25l\x1b[5;{4 + n}H\x1b[3{n % 8}m{c}\x1b[0m\x1b[?25h".encode() for n, c in enumerate(secret)
    ]
    cr = [f"\r > \x1b[1m{secret[:n]}\x1b[0m".encode() for n in range(1, len(secret) + 1)]
    narrow = [
        f"\r│{secret[max(0, n - 12) : n]:12}│".encode() for n in range(1, len(secret) + 1)
    ]  # its end only
    return ink + cells + cr + narrow


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 4096])
def test_a_key_echoed_in_pieces_and_cut_into_reads_anywhere_leaves_no_run_in_the_record(tmp_path, size):
    stream = b"".join(frames(KEY)) + b"\r\ndone\r\n"
    logs = SessionLogs(tmp_path / str(size), "gemini", (120, 40), Redactor([KEY]))
    for at in range(0, len(stream), size):
        logs.output(stream[at : at + size])
    logs.close()
    for path in (logs.cast_path, logs.text_path):
        raw = path.read_bytes()
        assert not runs_in(raw, KEY) and not runs_in(ESCAPES.sub(b"", raw), KEY), path
    played = replay(logs.cast_path)
    assert not runs_in(ESCAPES.sub(b"", played), KEY)
    assert b"[REDACTED]" in played and played.endswith(b"done\r\n")  # masked, nothing else lost
