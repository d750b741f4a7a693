"""Output that came after keys typed on a screen not read yet waits for the reading, and each piece
is judged by the first reading that saw it: typing that goes on while the screen is read never
lets a secret-entry screen's echo through."""

from __future__ import annotations

from pathlib import Path

from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.runtime.supervise.logfiles import replay
from waaah_agent.runtime.supervise.logs import SessionLogs

DIALOG = b"\x1b[2J\x1b[HEnter your API key: "
KEY = b"AIzaTYPED-key-0123456789abcdef"


def test_each_piece_waits_for_the_reading_that_saw_it(tmp_path: Path) -> None:
    logs = SessionLogs(tmp_path / "logs", "sim", (80, 24), Redactor({}))
    logs.wait_for_screen()  # the user typed on a screen not read yet
    logs.output(DIALOG, 1)
    for n, ch in enumerate(KEY, start=2):  # echoed key by key while the user keeps typing
        logs.output(bytes([ch]), n)
    last = 1 + len(KEY)
    logs.hide(True)  # the reading of output 1 found the secret-entry screen ...
    logs.screen_read(1)  # ... and releases what it saw, only that
    assert logs.waiting  # the echo was not seen yet: it still waits
    logs.screen_read(last)  # a later reading saw the echo, the dialog still there
    assert not logs.waiting
    logs.hide(False)  # the dialog closed
    logs.output(b"\r\nAPI key saved\r\n", last + 1)
    logs.close()
    cast = logs.cast_path.read_text()
    assert "[input hidden]" in cast
    assert b"TYPED" not in replay(logs.cast_path) and "TYPED" not in logs.text_path.read_text()
    assert b"API key saved" in replay(logs.cast_path)


def test_a_reading_that_sees_it_all_releases_it_all(tmp_path: Path) -> None:
    logs = SessionLogs(tmp_path / "logs", "sim", (80, 24), Redactor({}))
    logs.wait_for_screen()
    logs.output(b"plain output\r\n", 1)
    logs.output(b"more output\r\n", 2)
    logs.screen_read(1)
    assert logs.waiting
    logs.screen_read(None)  # the reading the keys waited for: what waits goes on
    assert not logs.waiting
    logs.close()
    assert replay(logs.cast_path) == b"plain output\r\nmore output\r\n"


def _events(cast: Path) -> list[list]:
    import json

    return [json.loads(line) for line in cast.read_text().splitlines()[1:]]


def test_reads_recorded_together_keep_their_own_times(tmp_path: Path) -> None:
    import time

    logs = SessionLogs(tmp_path / "logs", "sim", (80, 24), Redactor({}))
    reads = [
        b"first redraw \xe2\x94\x80\r\n",
        b"second \xe2\x94",
        b"\x80 third\r\n",
    ]  # a character cut by a read
    for data in reads:
        logs.output(data, repeat=True)  # redraws of a TUI waiting on a tool: recorded together ...
        time.sleep(0.03)
    logs.close()
    out = [e for e in _events(logs.cast_path) if e[1] == "o"]
    assert len(out) == 3, out  # ... one event per read
    times = [e[0] for e in out]
    assert times == sorted(times) and times[2] - times[0] >= 0.05
    assert replay(logs.cast_path) == b"".join(reads)
    assert out[1][2] == "second " and out[2][2] == "\u2500 third\r\n"  # never half a character


def test_a_batch_a_mask_changed_is_one_event(tmp_path: Path) -> None:
    import time

    secret = "AIzaSyKNOWN-0123456789abcdefghijklmn"
    logs = SessionLogs(tmp_path / "logs", "sim", (80, 24), Redactor([secret]))
    logs.output(b"the key is " + secret[:20].encode(), repeat=True)
    time.sleep(0.03)
    logs.output(secret[20:].encode() + b" and more\r\n", repeat=True)
    logs.close()
    out = [e for e in _events(logs.cast_path) if e[1] == "o"]
    text = "".join(e[2] for e in out)
    assert len(out) == 1, out
    assert secret[:8] not in text and secret[-8:] not in text and "and more" in text


def test_a_redraw_cut_in_two_by_the_reads_is_recorded_whole_and_its_lines_once(tmp_path: Path) -> None:
    """gemini's waiting frames come now and then in two reads; when the second came more than
    BATCH_FOR after the first, the batch ended with the first part, and the text log's cleaner
    took that part and the next frames in full (each one's lines again)."""
    import time

    from tests.unit.test_redraws import reads

    frames = [r for r in reads() if len(r) > 3000][:8]
    logs = SessionLogs(tmp_path / "logs", "sim", (120, 40), Redactor({}))
    cleaned: list[int] = []
    clean = logs._cleaner.feed
    logs._cleaner.feed = lambda data, now: (cleaned.append(len(data)), clean(data, now))[1]  # type: ignore[method-assign]
    logs.output(frames[0], 1)
    time.sleep(0.3)
    logs.output(frames[1], 2, repeat=True)
    time.sleep(0.3)  # the batch's window is over
    logs.output(frames[2][:2057], 3)  # the feed does not call a part a repeat
    time.sleep(0.03)  # its rest comes late
    logs.output(frames[2][2057:], 4)
    for n, frame in enumerate(frames[3:], start=5):
        time.sleep(0.05)
        logs.output(frame, n, repeat=True)
    logs.close()
    assert replay(logs.cast_path) == b"".join(frames)  # every byte, in order
    assert cleaned == [len(frames[0])], cleaned  # the first frame's lines; the rest repeat it


def test_a_spinner_s_small_reads_are_recorded_together_each_at_its_own_time(tmp_path: Path) -> None:
    """codex and claude redraw a spinner line in reads of ~70 bytes, 10-30 a second, while they
    wait on a tool: recorded one by one, each record's work (the native passes, the escaping,
    the text log) was a large part of the CPU of the wait. Small reads wait together as repeated
    redraws do; a flood's reads do not."""
    import time

    from waaah_agent.runtime.supervise.logs import TRICKLE

    logs = SessionLogs(tmp_path / "logs", "sim", (120, 40), Redactor({}))
    records: list[int] = []
    record = logs._record
    logs._record = lambda now, data, marks=None: (records.append(len(data)), record(now, data, marks))[1]  # type: ignore[method-assign]
    ticks = [b"\x1b[9;1H\x1b[38;2;%d;1;1m\xe2\x80\xa2\x1b[39m\x1b[37;3H" % n for n in range(8)]
    for tick in ticks:
        logs.output(tick)
        time.sleep(0.03)
    big = b"x" * (TRICKLE + 1)
    logs.output(big)
    time.sleep(0.03)
    logs.output(b"after the flood's read\r\n")
    logs.close()
    assert len(records) <= 4, records  # the ticks together (not 8 records) ...
    assert len(big) in records  # ... and a big read on its own once the next came
    events = [e for e in _events(logs.cast_path) if e[1] == "o"]
    # each read its own event (the end of the last one may wait for the next read: a word there
    # could be the start of a secret)
    assert [e[2].encode() for e in events[: len(ticks) - 1]] == ticks[:-1]
    times = [e[0] for e in events[: len(ticks)]]
    assert all(b - a >= 0.02 for a, b in zip(times, times[1:], strict=False))  # each at its time
    assert replay(logs.cast_path) == b"".join(ticks) + big + b"after the flood's read\r\n"


def test_a_redraw_that_crosses_the_second_s_budget_is_not_cleaned_again(tmp_path: Path, monkeypatch) -> None:
    """A batch over what is left of the second's cleaning budget has its whole lines cleaned,
    unless it only draws the last redraw again: then its lines would be in the text log twice."""
    from tests.unit.test_redraws import reads
    from waaah_agent.runtime.supervise import logs as logs_module

    frames = [r for r in reads() if len(r) > 3000][:3]
    monkeypatch.setattr(logs_module, "CLEAN_PER_SECOND", len(frames[0]) + len(frames[1]) // 2)
    logs = SessionLogs(tmp_path / "logs", "sim", (120, 40), Redactor({}))
    cleaned: list[int] = []
    clean = logs._cleaner.feed
    logs._cleaner.feed = lambda data, now: (cleaned.append(len(data)), clean(data, now))[1]  # type: ignore[method-assign]
    logs.output(frames[0], 1)
    logs.flush()
    logs.output(frames[1], 2, repeat=True)  # a repeat, over the budget left
    logs.flush()
    logs.close()
    assert replay(logs.cast_path) == frames[0] + frames[1]
    assert cleaned == [len(frames[0])], cleaned
