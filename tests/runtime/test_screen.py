"""Nothing of the supervisor's own on the agent's screen; the menu, the exit text, small panes."""

from __future__ import annotations

import base64
import gzip
import json
import logging
import re
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pyte
import pytest

from tests.runtime.helpers import (
    COLS,
    ROWS,
    WAAAH,
    delivered,
    events,
    session_dirs,
    sim_env,
    spawn_waaah,
    state,
)
from waaah_agent.runtime.mcp.waaah import Health
from waaah_agent.runtime.supervise.background import OWN, Mailbox, OwnOutput, ServerWatch
from waaah_agent.runtime.supervise.inbox import Inbox
from waaah_agent.runtime.supervise.overlay import CANCEL, HOLD_MAX, LEAVE_MODES, Overlay
from waaah_agent.runtime.supervise.screenfeed import ScreenFeed

pytestmark = pytest.mark.timeout(60)

# Instance attributes threading.Thread itself sets; any other name it uses (a method such as
# ``_stop``, which Python calls in a forked child) must not be hidden by a subclass.
THREAD_OWN = set(vars(threading.Thread())) | {"_started"}


class Seen:
    """Everything the user's terminal received from ``waaah``, and the screen it shows (pyte)."""

    def __init__(self, child: pexpect.spawn, cols: int = COLS, rows: int = ROWS) -> None:
        self.child = child
        self.raw = bytearray()
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.eof = False

    def read(self) -> None:
        try:
            data = self.child.read_nonblocking(65536, timeout=0.1)
        except pexpect.TIMEOUT:
            return
        except pexpect.EOF:
            self.eof = True
            time.sleep(0.05)
            return
        self.raw += data
        self.stream.feed(data)

    def until(self, check: Callable[[], object], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"not seen within {timeout}s; the screen:\n" + "\n".join(self.rows))
            self.read()

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.read()

    def resize(self, cols: int, rows: int) -> None:
        self.screen.resize(rows, cols)
        self.child.setwinsize(rows, cols)

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")

    @property
    def rows(self) -> list[str]:
        return list(self.screen.display)

    def exit_code(self) -> int:
        self.until(lambda: self.eof)
        self.child.close()
        return self.child.exitstatus if self.child.exitstatus is not None else 128 + self.child.signalstatus


def save_and_exit(seen: Seen) -> int:
    seen.child.send("\x03")
    seen.until(lambda: "[s]" in seen.rows[-1])
    seen.child.send("s")
    return seen.exit_code()


def _healthy(url: str, key: str | None) -> Health:
    return Health(True, "ok")


@pytest.fixture()
def our_threads(tmp_path: Path) -> Iterator[list[threading.Thread]]:
    """Every kind of thread the supervisor runs beside the loop, started."""
    mailbox = Mailbox()
    watch = ServerWatch(mailbox, "http://127.0.0.1:9", None, "agent", every=60, check=_healthy)
    watch.start()
    inbox = Inbox(tmp_path / "inbox.jsonl", mailbox)
    inbox.start()
    yield [t for t in threading.enumerate() if t is not threading.main_thread()]
    watch.stop()
    inbox.stop()
    watch.join(5)
    mailbox.close()


def test_no_thread_of_ours_hides_a_name_thread_uses(our_threads):
    threads = our_threads
    assert any(isinstance(t, ServerWatch) for t in threads)
    assert len(threads) >= 3  # the server watch, watchdog's observer and its emitter
    thread_names = {n for n in dir(threading.Thread) if not n.startswith("__")}
    for thread in threads:
        hidden = (set(vars(thread)) - THREAD_OWN) & thread_names
        assert not hidden, f"{type(thread).__name__} hides threading.Thread's {hidden}"


FORK_BESIDE_OUR_THREADS = """
import os, sys, time
from pathlib import Path
from waaah_agent.runtime.supervise.background import Mailbox, ServerWatch
from waaah_agent.runtime.supervise.child import AgentProcess
from waaah_agent.runtime.supervise.inbox import Inbox
from waaah_agent.runtime.mcp.waaah import Health
from tests.runtime.helpers import (
    COLS,
    ROWS,
    delivered,
    events,
    session_dirs,
    sim_env,
    spawn_waaah,
    state,
)
mailbox = Mailbox()
ServerWatch(mailbox, "http://127.0.0.1:9", None, "a", every=60, check=lambda u, k: Health(True, "ok")).start()
Inbox(Path(sys.argv[1]) / "inbox.jsonl", mailbox).start()
child = AgentProcess.spawn(["/bin/sh", "-c", "sleep 0.3; echo AGENT-DONE"], cwd=sys.argv[1],
                           env=dict(os.environ), size=(80, 24))
out, deadline = b"", time.monotonic() + 10
while time.monotonic() < deadline:
    data = child.read()
    if data is None:
        break
    out += data
    time.sleep(0.01)
sys.stdout.buffer.write(out)
"""


def test_the_agent_s_pty_gets_nothing_of_ours_when_it_forks_beside_our_threads(tmp_path):
    """The MCP server watch runs while the agent is spawned (MCP on): the fork must be clean.

    In a process of its own, as the supervisor is (pytest catches "Exception ignored" itself).
    """
    done = subprocess.run(
        [sys.executable, "-c", FORK_BESIDE_OUR_THREADS, str(tmp_path)], capture_output=True, timeout=30
    )
    out = done.stdout
    assert b"AGENT-DONE" in out, done
    assert b"Exception ignored" not in out and b"Traceback" not in out, out.decode(errors="replace")
    assert done.stderr == b"", done.stderr


def test_own_output_goes_to_the_mailbox_not_the_terminal(capfd):
    mailbox = Mailbox()
    hooks = threading.excepthook, sys.unraisablehook
    with OwnOutput(mailbox, on_screen=True):
        logging.getLogger("waaah_agent.test").warning("a warning of ours")
        warnings.warn("a python warning", stacklevel=1)

        def fail() -> None:
            raise RuntimeError("thread trouble")

        thread = threading.Thread(target=fail, name="failing")
        thread.start()
        thread.join()

        class Noisy:
            def __del__(self) -> None:
                raise ValueError("in __del__")

        Noisy()
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    messages = [m for m in mailbox.drain() if m.kind == OWN]
    texts = "\n".join(str(m.data["text"]) for m in messages)
    assert "a warning of ours" in texts
    assert "a python warning" in texts
    assert "thread failing failed: RuntimeError: thread trouble" in texts
    assert "ValueError: in __del__" in texts
    errors = [m.data["error"] for m in messages if m.data["error"]]
    assert len(errors) == 2
    # afterwards, Python's own ways are back
    assert (threading.excepthook, sys.unraisablehook) == hooks


def test_a_warning_of_ours_goes_to_the_log_not_the_agent_s_screen(workspace, fake_home):
    """A log record while the agent's screen is up (a malformed inbox line) is in the text log."""
    child = spawn_waaah(workspace, "--start=simulated", "--no-nudge", env=sim_env(fake_home))
    seen = Seen(child)
    seen.until(lambda: session_dirs(workspace) and delivered(workspace))
    inbox = session_dirs(workspace)[-1] / "inbox.jsonl"
    with inbox.open("a") as fh:
        fh.write("this is no record\n")
    log = Path(state(workspace)["log_path"])
    seen.until(lambda: "ignoring a malformed inbox line" in log.read_text())
    seen.pump(0.5)
    assert "malformed" not in seen.text
    assert save_and_exit(seen) == 0


def start_sim(ws: Path, home: Path, cols: int, rows: int, *args: str) -> Seen:
    child = pexpect.spawn(
        WAAAH,
        ["agent", "--start=simulated", "--no-nudge", *args],
        cwd=str(ws),
        env=sim_env(home),
        dimensions=(rows, cols),
        timeout=20,
    )
    child.delaybeforesend = None
    return Seen(child, cols, rows)


def sim_idle(seen: Seen) -> bool:
    """The simulated agent's last title says it is idle (in a pane too small, ours stays over it:
    its last title is found in what the terminal received)."""
    titles = [
        t for t in re.findall(rb"\x1b\]0;([^\x07]*)\x07", bytes(seen.raw)) if not t.startswith(b"waaah:")
    ]
    return (
        bool(titles)
        and titles[-1].decode().startswith("◇")
        and any("simulated-workspace" in r for r in seen.rows)
    )


@pytest.mark.parametrize(
    ("cols", "rows", "form"),
    [
        (120, 30, "waaah: [c] continue   [s] save and exit   [p] pass Ctrl+C to the agent"),
        (60, 20, "waaah: [c]ontinue [s]ave+exit [p]ass ^C"),
        (20, 10, "[c] [s] [p]"),
    ],
)
def test_the_menu_fits_the_bottom_row_and_leaves_nothing_behind(workspace, fake_home, cols, rows, form):
    seen = start_sim(workspace, fake_home, cols, rows)
    seen.until(lambda: sim_idle(seen) and (cols < 40 or (session_dirs(workspace) and delivered(workspace))))
    seen.pump(0.5)  # idle: the simulated agent draws nothing until something happens
    before = seen.rows
    seen.child.send("\x03")
    seen.until(lambda: form in seen.rows[-1])
    seen.pump(0.2)
    assert seen.rows[-1].strip() == form  # one row, no wrap
    assert seen.rows[:-1] == before[:-1]  # nothing scrolled
    seen.child.send("c")
    # the agent was shown one row less, then its size again, and repainted both times
    seen.until(lambda: f"SIZE={cols}x{rows}" in "".join(seen.rows))
    seen.pump(0.3)
    after = seen.rows
    assert not any("[c]" in row for row in after), after
    assert after[-4:] == before[-4:]  # the input box, the footer, the bottom row: as before
    assert save_and_exit(seen) == 0


def leave_after(frame: bytes, cols: int = 40, rows: int = 12, alt: bool = False) -> pyte.Screen:
    """The user's terminal after ``frame`` from the agent and what the loop writes at its end."""
    feed, overlay = ScreenFeed(cols, rows), Overlay(lambda data: None, (cols, rows))
    overlay.alt_screen = alt
    feed.add(frame, time.monotonic())
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    stream.feed(frame + overlay.leave(feed.rows_below_cursor()) + b"Stopped. Resume with: waaah agent")
    return screen


def test_the_exit_text_starts_below_a_frame_whose_cursor_is_inside_it():
    # an input box with the cursor in it, a footer below (gemini leaves its cursor so)
    frame = (
        b"\x1b[?25lhistory\r\n+--------+\r\n| > _    |\r\n+--------+\r\nmain  no sandbox  Auto\x1b[3A\x1b[5G"
    )
    rows = leave_after(frame).display
    assert rows[4].rstrip() == "main  no sandbox  Auto"
    assert rows[5].rstrip() == "Stopped. Resume with: waaah agent"


def test_the_exit_text_below_a_full_screen_scrolls_it_up_one_row():
    frame = b"".join(b"line %d\r\n" % i for i in range(11)) + b"footer\x1b[H"
    rows = leave_after(frame).display
    assert rows[-2].rstrip() == "footer" and rows[-1].rstrip() == "Stopped. Resume with: waaah agent"


def test_the_exit_text_leaves_the_alternate_screen():
    out = Overlay(lambda data: None, (80, 24))
    out.alt_screen = True
    assert b"\x1b[?1049l" in out.leave(0)


def test_the_terminal_is_left_sane_and_the_resume_line_whole(workspace, fake_home):
    """An agent killed after ignoring SIGTERM left bracketed paste on: the loop turns it off."""
    cols, rows = 250, 24  # wide enough for the resume line, which names waaah by its full path
    child = pexpect.spawn(
        WAAAH,
        ["agent", "--start=simulated", "--no-nudge", "--stop-grace=1"],
        cwd=str(workspace),
        env=sim_env(fake_home, SIM_IGNORE_TERM="1"),
        dimensions=(rows, cols),
        timeout=20,
    )
    child.delaybeforesend = None
    seen = Seen(child, cols, rows)
    seen.until(lambda: session_dirs(workspace) and delivered(workspace))
    seen.pump(0.5)
    sid = state(workspace)["id"]
    assert save_and_exit(seen) == 0
    resume = f"{WAAAH} agent --start=simulated --as=waaah-orc --resume"  # waaah is not on this PATH
    lines = [row.rstrip() for row in seen.rows]
    ours = [line for line in lines if "Resume with:" in line]
    assert ours == [f"Stopped (you chose save and exit). Session {sid} saved. Resume with: {resume}"], lines
    frame_footer = [i for i, line in enumerate(lines) if "simulated-workspace" in line]
    assert frame_footer and frame_footer[-1] < lines.index(ours[0])  # below the agent's frame
    raw = bytes(seen.raw)
    assert raw.rfind(b"\x1b[?2004l") > raw.rfind(b"\x1b[?2004h")  # bracketed paste is off again
    assert pyte.modes.DECTCEM in seen.screen.mode  # the cursor shows


def test_a_pane_too_small_says_so_outside_the_screen_and_delivers_once_big_enough(workspace, fake_home):
    seen = start_sim(workspace, fake_home, 20, 10)
    seen.until(lambda: "too small" in seen.screen.title)
    assert seen.screen.title == "waaah: pane 20x10 too small, make it 40x12+"
    seen.pump(2.0)  # the agent sets its own title meanwhile: ours is said again
    assert "too small" in seen.screen.title
    assert "too small" not in "".join(seen.rows)  # never on the agent's screen
    log = Path(state(workspace)["log_path"]).read_text()
    assert "the pane (20x10) is too small to read the agent's screen; make it at least 40x12" in log
    sizes = [e for e in events(workspace) if e["event"] == "pane-size"]
    assert sizes[0]["too_small"] and (sizes[0]["cols"], sizes[0]["rows"]) == (20, 10)
    assert not delivered(workspace)  # the input box cannot be read: nothing is typed blind
    seen.resize(80, 24)
    seen.until(lambda: delivered(workspace))
    assert [e["too_small"] for e in events(workspace) if e["event"] == "pane-size"] == [True, False]
    assert "too small" not in seen.screen.title
    assert save_and_exit(seen) == 0


def test_a_held_title_stays_over_the_agent_s_own_until_released():
    written: list[bytes] = []
    out = Overlay(written.append, (120, 40))
    out.agent_titled("◇  Ready (ws)")
    out.our_title("waaah: gemini waits for the WAAAH server (unreachable)", hold=True)
    out.agent_titled("✦  Working… (ws)")  # the agent's title went to the terminal: ours again
    assert written[-1] == b"\x1b]0;waaah: gemini waits for the WAAAH server (unreachable)\x07"
    out.our_title("waaah: gemini", hold=False)  # released: the agent's own title is back
    assert written[-1] == "\x1b]0;✦  Working… (ws)\x07".encode()
    count = len(written)
    out.agent_titled("◇  Ready (ws)")
    assert len(written) == count  # nothing of ours over it now


HELD = "waaah: gemini waits for the WAAAH server (unreachable)"
OURS = f"\x1b]0;{HELD}\x07".encode()


@pytest.mark.parametrize(
    ("reads", "after"),
    [
        # gemini's "Working" then "Ready" between two reads of its screen: never seen there
        ([b"\x1b]0;\xe2\x9c\xa6  Working\x07 text \x1b]0;\xe2\x97\x87  Ready\x07"], [0]),
        ([b"\x1b]2;a title\x07 more"], [0]),  # OSC 2: the title alone
        ([b"text \x1b]0;Ready (ws)", b" more of it\x07 after"], [1]),  # ours once it ended
        ([b"text \x1b]", b"0;Ready\x07"], [1]),  # the intro cut by the reads
        ([b"text \x1b]0", b";Ready\x07"], [1]),
        ([b"text \x1b]0;", b"Ready\x07"], [1]),  # seen in the first, written after the end
        ([b"\x1b]8;;https://example.com\x07link\x1b]8;;\x07"], []),  # a hyperlink is no title
        ([b"\x1b]7;file://host/ws\x07", b"plain " * 1000], []),
        ([b"\x1b]0;a\x07", b"\x1b]0;b\x07"], [0, 1]),  # each time
        ([b"\x1b]0;Ready", b"\x1b\\ after"], [1]),  # ended by ST instead of BEL
    ],
)
def test_a_held_title_is_said_again_right_after_the_agent_s_own_title_sequence(reads, after):
    """The agent's title reaches the terminal in its output; a held title of ours follows it at
    once (never inside it), without waiting for a read of the screen to see the title change."""
    written: list[bytes] = []
    out = Overlay(written.append, (120, 40))
    out.our_title(HELD, hold=True)
    written.clear()
    said_after = []
    for n, data in enumerate(reads):
        before = len(written)
        out.relayed(data)
        said_after += [n] * written[before:].count(OURS)
        assert written[before:] in ([], [OURS])  # only ours, whole, once at most a read
    assert said_after == after
    out.our_title("waaah: gemini", hold=False)  # released: the agent's titles stand alone
    written.clear()
    out.relayed(b"\x1b]0;Ready\x07")
    assert written == []


def test_a_small_pane_s_title_is_said_again_after_the_agent_s():
    written: list[bytes] = []
    out = Overlay(written.append, (20, 10))
    out.check_size()
    assert written and b"too small" in written[-1]
    written.clear()
    out.relayed(b"\x1b]0;Ready\x07")
    assert len(written) == 1 and b"too small" in written[0]


@pytest.mark.parametrize(
    ("reads", "alt"),
    [
        ([b"\x1b[?1049h\x1b[2Jframe"], True),
        ([b"\x1b[?1049h frame", b"\x1b[?1049l back"], False),
        ([b"frame \x1b[?10", b"49h more"], True),  # the sequence cut in two by the reads
        ([b"frame \x1b[?1049", b"h"], True),  # only its last letter in the next read
        ([b"\x1b[?1049h", b"plain text, no question marks " * 4000], True),  # a flood changes nothing
        ([b"what? \x1b[?25l \x1b[?1049h why?"], True),
        ([b"\x1b[?1049h \x1b[?1049l \x1b[?1049h"], True),  # the last one wins
        ([b"\x1b[?1049x"], False),  # not a switch
    ],
)
def test_the_agent_s_switch_to_the_alternate_screen_is_followed(reads, alt):
    out = Overlay(lambda data: None, (80, 24))
    for data in reads:
        out.relayed(data)
    assert out.alt_screen is alt


def test_the_menu_waits_for_the_end_of_a_long_string_of_the_agent_s():
    """An OSC 52 of 290 bytes of base64, its BEL in a later read: the menu comes after the BEL."""
    written: list[bytes] = []
    out = Overlay(written.append, (80, 24))
    out.relayed(b"\x1b]52;c;" + b"QUJD" * 72 + b"QQ")
    out.menu(True)
    assert written == []
    out.relayed(b"QUJD" * 10)
    assert written == []
    out.relayed(b"\x07")
    assert written and all(part.startswith(b"\x1b7\x1b[24;1H") for part in written)


def test_held_bytes_go_out_after_hold_max_with_a_can_first():
    """An agent that opens a string and never ends it keeps the menu off for HOLD_MAX at most."""
    now = [100.0]
    written: list[bytes] = []
    dues: list[float] = []
    out = Overlay(written.append, (80, 24), lambda: now[0], dues.append)
    out.relayed(b"\x1bPq#0;2;0;0;0" + b"~" * 500)
    out.menu(True)
    assert written == [] and dues == [100.0 + HOLD_MAX]
    now[0] += HOLD_MAX / 2
    out.overdue()  # not yet
    out.relayed(b"~" * 500)
    assert written == []
    now[0] += HOLD_MAX / 2
    out.overdue()  # the loop's timer
    assert len(written) == 1 and written[0].startswith(CANCEL + b"\x1b7\x1b[24;1H")
    out.relayed(b"~" * 500)  # the rest of the payload is text on the terminal now
    assert written[-1].startswith(b"\x1b7\x1b[24;1H") and not written[-1].startswith(CANCEL)
    out.relayed(b"\x1b]0;t")  # open again at the end: a CAN before the end's resets too
    end = out.leave(0)
    assert end.startswith(CANCEL) and LEAVE_MODES in end


def test_the_menu_comes_after_the_agent_s_clipboard_sequence_ends(workspace, fake_home, tmp_path):
    """The agent sets the clipboard (OSC 52, 290 bytes of base64) and ends it only 0.5 s later;
    Ctrl+C meanwhile: on the user's terminal the menu comes after the agent's BEL, never in it."""
    opener = b"\x1b]52;c;" + base64.b64encode(b"echo harmless clipboard text " * 7)[:290]
    reads = [(0.0, opener), (0.5, b"\x07after\r\n"), (3.0, b"done\r\n")]
    stream = tmp_path / "clipboard.jsonl.gz"
    lines = ["{}"] + [json.dumps([t, base64.b64encode(data).decode()]) for t, data in reads]
    stream.write_bytes(gzip.compress("\n".join(lines).encode()))
    env = sim_env(fake_home, SIM_MODE="replay", SIM_REPLAY=str(stream), SIM_SECONDS="3")
    child = pexpect.spawn(
        WAAAH, ["agent", "--start=simulated", "--no-nudge"], cwd=str(workspace), env=env, dimensions=(24, 80)
    )
    child.delaybeforesend = None
    seen = Seen(child, 80, 24)
    seen.until(lambda: opener in seen.raw)
    child.send("\x03")
    seen.until(lambda: b"after" in seen.raw and b"[s]" in seen.raw[seen.raw.find(b"after") :])
    raw = bytes(seen.raw)
    start = raw.find(opener)
    end = raw.find(b"\x07", start)
    assert raw[start:end] == opener  # nothing of ours inside the agent's sequence
    assert raw.find(b"\x1b7\x1b[24;1H", start) > end  # the menu after its BEL
    assert b"\x18" not in raw  # it ended in time: no CAN
    child.send("s")
    seen.exit_code()
