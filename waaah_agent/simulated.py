"""A SIMULATED agent CLI for `make demo` and the runtime tests. It has no model.

It behaves like the real CLIs where a supervisor cares: a banner, an input box that
echoes typed text and takes bracketed pastes (Enter in the same write as a paste is a
newline, as in gemini), a spinner and window title while "working", `/quit` with a
resume hint, `/crash N`, Esc to cancel, double Ctrl+C to exit, and a report of the window
size on every SIGWINCH, and `/flood N` (N lines at once). Knobs (environment): SIM_BUSY_SECONDS (default 1.5),
SIM_STARTUP_SECONDS (0.3), SIM_IGNORE_TERM=1 (ignore SIGTERM and SIGHUP), SIM_HANG=1
(stay busy forever once a prompt arrives), SIM_TRANSCRIPT_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import sys
import termios
import time
import tty
from pathlib import Path

PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PLACEHOLDER = "  Type your message or @path/to/file"


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
        self.draft = ""
        self.busy_until = 0.0
        self.busy_started = 0.0
        self.pending_reply = ""
        self.last_ctrl_c = 0.0
        self.busy_seconds = float(os.environ.get("SIM_BUSY_SECONDS", "1.5"))
        self.hang = os.environ.get("SIM_HANG") == "1"

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
        if busy:
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
        lines = self.draft.split("\n")
        return f"[Pasted Text: {len(lines)} lines]" if len(lines) > 2 else self.draft.replace("\n", " ")

    def is_busy(self) -> bool:
        return self.hang and self.busy_started > 0 or time.monotonic() < self.busy_until

    # -- input ---------------------------------------------------------------------------
    def on_input(self, data: bytes) -> int | None:
        """Handle one read from the terminal; return an exit code to stop."""
        while data:
            if data.startswith(PASTE_START):
                end = data.find(PASTE_END)
                if end < 0:
                    end = len(data)
                self.draft += data[len(PASTE_START) : end].decode("utf-8", "replace").replace("\r", "\n")
                data = data[end + len(PASTE_END) :]
                if data.startswith(b"\r"):
                    # Enter in the same write as the paste: a newline inside it, not a submit.
                    self.draft += "\n"
                    data = data[1:]
                continue
            key, data = data[:1], data[1:]
            code = self.on_key(key)
            if code is not None:
                return code
        return None

    def on_key(self, key: bytes) -> int | None:
        if key == b"\x03":
            now = time.monotonic()
            if now - self.last_ctrl_c < 2.0:
                return 130
            self.last_ctrl_c = now
            self.history.append("Press Ctrl+C again to exit.")
        elif key == b"\x1b" and self.is_busy():
            self.busy_until, self.busy_started, self.hang = 0.0, 0.0, False
            self.history.append("Request cancelled.")
        elif key in (b"\x7f", b"\x08"):
            self.draft = self.draft[:-1]
        elif key == b"\r":
            return self.submit()
        elif key >= b" ":
            self.draft += key.decode("latin-1")
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
            count = int(text.split()[1]) if len(text.split()) > 1 else 1000
            for i in range(count):
                sys.stdout.write(f"flood line {i:06d} " + "x" * 80 + "\r\n")
            sys.stdout.write("FLOOD DONE\r\n")
            sys.stdout.flush()
            return None
        if text == "/size":
            cols, rows = shutil.get_terminal_size((0, 0))
            self.history.append(f"SIZE={cols}x{rows}")
            return None
        self.history.append("> " + text.splitlines()[0][:200])
        self.record({"role": "user", "text": text})
        self.busy_started = time.monotonic()
        self.busy_until = self.busy_started + self.busy_seconds
        self.pending_reply = f"✦ (simulated) Received {len(text)} characters: {text.splitlines()[0][:60]}"
        return None

    def tick(self) -> None:
        if self.pending_reply and not self.is_busy():
            self.history.append(self.pending_reply)
            self.record({"role": "model", "text": self.pending_reply})
            self.pending_reply = ""

    def record(self, message: dict[str, str]) -> None:
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        with self.transcript.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(message) + "\n")


def main() -> int:
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
    if os.environ.get("SIM_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
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
        if ready or animating:
            sim.draw()


if __name__ == "__main__":
    sys.exit(main())
