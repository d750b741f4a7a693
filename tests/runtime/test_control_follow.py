"""`waaah tail -f` and `waaah attach` follow a live log through its roll-over, on real files."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

from waaah_agent.runtime.night import control


def test_attach_prints_new_screen_output_and_follows_a_roll_over(tmp_path: Path) -> None:
    cast = tmp_path / "gemini.cast"
    cast.write_text(json.dumps({"version": 2}) + "\n" + json.dumps([0.1, "o", "OLD"]) + "\n")
    out = io.BytesIO()
    stop = threading.Event()

    def write_more() -> None:
        time.sleep(0.5)
        with cast.open("a") as fh:
            fh.write(json.dumps([1.0, "o", "\x1b[1mNEW\x1b[0m"]) + "\n" + '[1.1, "i", "keys"]\nnot json\n')
        time.sleep(0.5)
        cast.rename(tmp_path / "gemini.cast.1")  # rolled over
        cast.write_text(json.dumps({"version": 2}) + "\n" + json.dumps([2.0, "o", "AFTER-ROLL"]) + "\n")
        time.sleep(0.8)
        stop.set()

    writer = threading.Thread(target=write_more)
    writer.start()
    control.follow(cast, out, 0, lambda: not stop.is_set(), cast=True)
    writer.join()
    shown = out.getvalue()
    assert b"OLD" not in shown and b"\x1b[1mNEW\x1b[0m" in shown and b"AFTER-ROLL" in shown
    assert b"keys" not in shown


def test_tail_shows_the_last_lines_then_what_is_added(tmp_path: Path) -> None:
    log = tmp_path / "gemini.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    out = io.BytesIO()
    deadline = time.monotonic() + 1.0

    def add() -> None:
        time.sleep(0.3)
        with log.open("a") as fh:
            fh.write("line new\n")

    threading.Thread(target=add).start()
    control.follow(log, out, 3, lambda: time.monotonic() < deadline)
    assert out.getvalue().decode().splitlines() == ["line 97", "line 98", "line 99", "line new"]
