"""A SIMULATED agent CLI for `make demo` and the runtime tests. It has no model.

It behaves like the real CLIs where a supervisor cares: a banner, an input box that
echoes typed text and takes bracketed pastes (Enter in the same write as a paste is a
newline, as in gemini), a spinner and window title while "working", `/quit` with a
resume hint, `/crash N`, Esc to cancel, double Ctrl+C to exit, and a report of the window
size on every SIGWINCH, and `/flood N` (N lines at once). Knobs (environment): SIM_BUSY_SECONDS (default 1.5),
SIM_STARTUP_SECONDS (0.3), SIM_IGNORE_TERM=1 (ignore SIGTERM and SIGHUP), SIM_HANG=1
(stay busy forever once a prompt arrives; `hard`: ignore Esc too), SIM_CRASH_AT_START=N,
SIM_REPLY_FLOOD=N (N flood lines before every reply), SIM_TRANSCRIPT_DIR, SIM_SUBMIT_LAG=S (a
submitted prompt is in the transcript at once but stays shown in the input box, not busy, for S
seconds: the moment between the CLI taking a prompt and the screen showing it), SIM_DROP_PASTES=1,3
(the first and third pastes are lost: nothing shows, as when a CLI too busy drawing misses one),
SIM_DROP_ENTERS=1,2 (the first and second Enters into the input box do nothing: the text stays),
SIM_ECHO=cells|cr (typed keys shown
cell by cell with cursor moves and colours, or as the input line written again after a CR,
instead of a redraw), SIM_SPAWN=setsid,nohup (at start, leave processes behind the way tools do: ``setsid``, a
``sleep 300`` daemon in a session of its own, ``nohup``, a ``sleep 300`` that ignores SIGHUP in
ours; both double-forked through ``sh``, so their parent is gone at once; their pids are
appended to the file SIM_SPAWN_PIDS, one ``kind pid`` a line), SIM_DEMO=1 (`make demo`: the banner
says what to try: ``/crash 1``, ``/limit try again in 2 minutes``, ...). `/apikey` opens a key-entry
screen that echoes what is typed, as gemini's "Enter Gemini API Key" does; Enter closes it.

SIM_MODE runs one of the measurement modes instead (simulated_modes.py).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import termios
import time
import tty
from pathlib import Path

from waaah_agent.simulated_modes import measure

PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PLACEHOLDER = "  Type your message or @path/to/file"
#: What `make demo` shows to try (SIM_DEMO=1), each with what waaah does about it.
DEMO_HINTS = [
    "Try, at the prompt below:",
    "  /crash 1                        the agent crashes: waaah restarts it and resumes its session",
    "  /limit try again in 2 minutes   a usage limit: waaah waits it out, then asks it to continue",
    "  hello                           a prompt: the agent works, ends its turn, waaah nudges it back",
    "  /quit                           your own exit: waaah does not restart it",
    "  Ctrl+C                          waaah's menu: continue, save and exit, pass Ctrl+C to the agent",
]


class Sim:
    def __init__(self, session_id: str, resumed: int, transcript: Path) -> None:
        self.session_id = session_id
        self.transcript = transcript
        self.history: list[str] = [
            "SIMULATED AGENT (no model, for demonstration and tests)",
            f"Simulated CLI v1.0  session {session_id}",
        ]
        if resumed:
            self.history.append(f"Resumed session {session_id} ({resumed} earlier messages)")
        if os.environ.get("SIM_DEMO") == "1":  # `make demo`: what to try, on the screen itself
            self.history += DEMO_HINTS
        self.draft = ""
        self.in_paste = False
        self.paste_buf = b""
        self.drop_pastes, self.pastes = _numbers("SIM_DROP_PASTES"), 0
        self.drop_enters, self.enters = _numbers("SIM_DROP_ENTERS"), 0
        self.busy_until = 0.0
        self.busy_started = 0.0
        self.pending_reply = ""
        self.last_ctrl_c = 0.0
        self.busy_seconds = float(os.environ.get("SIM_BUSY_SECONDS", "1.5"))
        self.hang = os.environ.get("SIM_HANG") in ("1", "hard")  # "hard": Esc does not help either
        self.submit_lag = float(os.environ.get("SIM_SUBMIT_LAG", "0"))
        self.lagging = ""  # a prompt taken but still shown in the input box (SIM_SUBMIT_LAG)
        self.key_entry: str | None = None  # the /apikey screen is up, with what was typed so far
        # SIM_ECHO: how a typed key is shown. "" (default): the whole screen drawn again, as Ink
        # does; "cells": only the key's cell, each in a colour, with a cursor move before it, as a
        # diff-based TUI does; "cr": the input line written again after a CR.
        self.echo = os.environ.get("SIM_ECHO", "")
        self.echoed = ""  # what the last keys changed, written instead of a redraw

    # -- drawing -----------------------------------------------------------------------
    def draw(self) -> None:
        cols, rows = shutil.get_terminal_size((120, 40))
        busy = self.is_busy()
        title = "✦  Working… (sim)" if busy else "◇  Ready (sim)"
        box = [
            "▄" * cols,
            (" > " + (self.draft_shown() or PLACEHOLDER))[:cols],
            "▀" * cols,
            " simulated-workspace   no sandbox   sim-model",
        ]
        status = []
        if self.key_entry is not None:
            status = ["SIMULATED: enter your API key (Enter to save): " + self.key_entry]
        elif busy:
            spin = SPINNER[int(time.monotonic() * 10) % len(SPINNER)]
            secs = int(time.monotonic() - self.busy_started)
            status = [f"{spin} Thinking... (esc to cancel, {secs}s)"]
        keep = max(0, rows - len(box) - len(status) - 1)
        lines = self.history[-keep:] if keep else []
        body = [ln[:cols] for ln in lines] + [""] * (keep - len(lines)) + status + box
        out = f"\x1b]0;{title}\x07\x1b[H\x1b[2J" + "\r\n".join(body)
        sys.stdout.write(out)
        sys.stdout.flush()

    def draft_shown(self) -> str:
        if self.lagging and time.monotonic() < self.busy_started:
            return self.lagging.replace("\n", " ")[:60]
        lines = self.draft.split("\n")
        return f"[Pasted Text: {len(lines)} lines]" if len(lines) > 2 else self.draft.replace("\n", " ")

    def is_busy(self) -> bool:
        now = time.monotonic()
        return self.hang and 0 < self.busy_started <= now or self.busy_started <= now < self.busy_until

    # -- input ---------------------------------------------------------------------------
    def on_input(self, data: bytes) -> int | None:
        """Handle one read from the terminal; return an exit code to stop.

        A paste can arrive over several reads (its end marker included), as with any terminal.
        """
        while data:
            if self.in_paste:
                end = data.find(PASTE_END)
                body, data = (data, b"") if end < 0 else (data[:end], data[end + len(PASTE_END) :])
                self.paste_buf += body
                if end < 0:
                    continue
                self.in_paste = False
                self.pastes += 1
                if self.pastes not in self.drop_pastes:  # SIM_DROP_PASTES: those are lost
                    self.draft += self.paste_buf.decode("utf-8", "replace").replace("\r", "\n")
                self.paste_buf = b""
                if data.startswith(b"\r"):
                    # Enter in the same write as the paste: a newline inside it, not a submit.
                    self.draft += "\n"
                    data = data[1:]
                continue
            if data.startswith(PASTE_START):
                self.in_paste, data = True, data[len(PASTE_START) :]
                continue
            key, data = data[:1], data[1:]
            code = self.on_key(key)
            if code is not None:
                return code
        return None

    def on_key(self, key: bytes) -> int | None:
        if self.key_entry is not None:
            if key == b"\r":
                self.key_entry = None
                self.history.append("API key saved (simulated).")
            elif key >= b" ":
                self.key_entry += key.decode("latin-1")
            return None
        if key == b"\x03":
            now = time.monotonic()
            if now - self.last_ctrl_c < 2.0:
                return 130
            self.last_ctrl_c = now
            self.history.append("Press Ctrl+C again to exit.")
        elif key == b"\x1b" and self.is_busy() and os.environ.get("SIM_HANG") != "hard":
            self.busy_until, self.busy_started, self.hang = 0.0, 0.0, False
            self.history.append("Request cancelled.")
        elif key in (b"\x7f", b"\x08"):
            self.draft = self.draft[:-1]
        elif key == b"\r":
            self.enters += 1
            return None if self.enters in self.drop_enters else self.submit()  # SIM_DROP_ENTERS: lost
        elif key >= b" ":
            self.draft += key.decode("latin-1")
            rows = shutil.get_terminal_size((120, 40))[1]
            if self.echo == "cells":
                col = 4 + len(self.draft)
                self.echoed += (
                    f"\x1b[{rows - 2};{col - 1}H\x1b[3{len(self.draft) % 8}m{self.draft[-1]}\x1b[0m"
                )
            elif self.echo == "cr":
                self.echoed += f"\x1b[{rows - 2};1H\r > {self.draft[:-1]}\r > \x1b[1m{self.draft}\x1b[0m"
        return None

    def submit(self) -> int | None:
        text, self.draft = self.draft.strip(), ""
        if not text or self.is_busy():
            return None
        if text == "/quit":
            self.history += [
                "Agent powering down. Goodbye!",
                f"To resume this session: sim --resume {self.session_id}",
            ]
            return 0
        if text.startswith("/crash"):
            return int(text.split()[1]) if len(text.split()) > 1 else 1
        if text.startswith("/flood"):  # a burst of output, e.g. a long build log
            flood(int(text.split()[1]) if len(text.split()) > 1 else 1000)
            return None
        if text.startswith("/limit"):  # a usage-limit banner, as the real CLIs print one
            self.history.append("SIMULATED usage limit reached · " + text[len("/limit") :].strip())
            return None
        if text == "/apikey":
            self.key_entry = ""
            return None
        if text == "/size":
            cols, rows = shutil.get_terminal_size((0, 0))
            self.history.append(f"SIZE={cols}x{rows}")
            return None
        self.history.append("> " + text.splitlines()[0][:200])
        self.record({"role": "user", "text": text})
        self.busy_started = time.monotonic() + self.submit_lag
        self.busy_until = self.busy_started + self.busy_seconds
        self.lagging = text if self.submit_lag else ""
        self.pending_reply = f"✦ (simulated) Received {len(text)} characters: {text.splitlines()[0][:60]}"
        return None

    def tick(self) -> None:
        if self.pending_reply and not self.is_busy():
            flood(int(os.environ.get("SIM_REPLY_FLOOD", "0")))
            self.history.append(self.pending_reply)
            self.record({"role": "model", "text": self.pending_reply})
            self.pending_reply = ""

    def record(self, message: dict[str, str]) -> None:
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        with self.transcript.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(message) + "\n")


def _numbers(name: str) -> set[int]:
    """The numbers in the comma-separated environment variable ``name`` (SIM_DROP_PASTES=1,3)."""
    return {int(n) for n in os.environ.get(name, "").split(",") if n.strip().isdigit()}


def flood(count: int) -> None:
    """A burst of output (a long build log, a dumped file): ``count`` lines at once."""
    if count <= 0:
        return
    for i in range(count):
        sys.stdout.write(f"flood line {i:06d} " + "x" * 80 + "\r\n")
    sys.stdout.write("FLOOD DONE\r\n")
    sys.stdout.flush()


def spawn_leftovers(kinds: str, pid_file: str) -> None:
    """SIM_SPAWN: children that leave our process group or session, as daemons and nohup do."""
    for kind in filter(None, (k.strip() for k in kinds.split(","))):
        wrap = {"setsid": "setsid", "nohup": "nohup"}.get(kind)
        if wrap is None:
            continue
        script = f'{wrap} sleep 300 </dev/null >/dev/null 2>&1 & echo "{kind} $!" >> "$1"'
        subprocess.run(["sh", "-c", script, "sh", pid_file or os.devnull], check=False)


def main() -> int:
    mode = os.environ.get("SIM_MODE", "")
    if mode:
        return measure(mode)
    parser = argparse.ArgumentParser(prog="sim")
    parser.add_argument("--session-id")
    parser.add_argument("--resume")
    args, _ = parser.parse_known_args()
    session_id = args.resume or args.session_id or "00000000-0000-0000-0000-000000000000"
    folder = Path(os.environ.get("SIM_TRANSCRIPT_DIR", ".waaah/simulated"))
    transcript = folder / f"{session_id}.jsonl"
    resumed = 0
    if args.resume:
        if not transcript.exists():
            print(f"No previous session found for id {session_id}")
            return 1
        resumed = len(transcript.read_text(encoding="utf-8").splitlines())
    if os.environ.get("SIM_CRASH_AT_START"):  # a CLI that dies as soon as it starts
        print("simulated start-up failure")
        return int(os.environ["SIM_CRASH_AT_START"])
    if os.environ.get("SIM_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if os.environ.get("SIM_SPAWN"):
        spawn_leftovers(os.environ["SIM_SPAWN"], os.environ.get("SIM_SPAWN_PIDS", ""))
    sim = Sim(session_id, resumed, transcript)

    def on_winch(_signum: int, _frame: object) -> None:
        cols, rows = shutil.get_terminal_size((0, 0))
        sim.history.append(f"SIZE={cols}x{rows}")
        sim.draw()

    signal.signal(signal.SIGWINCH, on_winch)
    time.sleep(float(os.environ.get("SIM_STARTUP_SECONDS", "0.3")))
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    if saved is not None:
        tty.setraw(fd)
    sys.stdout.write("\x1b[?2004h")  # bracketed paste on
    try:
        return loop(sim, fd)
    finally:
        sim.draw()
        sys.stdout.write("\x1b[?2004l\r\n")
        sys.stdout.flush()
        if saved is not None:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def loop(sim: Sim, fd: int) -> int:
    sim.draw()
    while True:
        animating = sim.is_busy() or bool(sim.pending_reply)
        # Idle means silent, as with the real CLIs: no redraw until something happens.
        ready, _, _ = select.select([fd], [], [], 0.1 if animating else None)
        if ready:
            data = os.read(fd, 65536)
            if not data:
                return 0
            code = sim.on_input(data)
            if code is not None:
                return code
        sim.tick()
        if sim.echoed and not animating and sim.key_entry is None:
            sys.stdout.write(sim.echoed)  # the keys' cells only: no redraw
            sys.stdout.flush()
        elif ready or animating:
            sim.draw()
        sim.echoed = ""


if __name__ == "__main__":
    sys.exit(main())
