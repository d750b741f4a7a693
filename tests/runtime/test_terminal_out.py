"""Writes to the user's terminal (``TerminalOut``) through a real PTY: at once while nothing waits,
else by its writer thread, in order, in full, and never blocking the loop."""

from __future__ import annotations

import os
import pty
import select
import threading
import time
import tty
from collections.abc import Iterator

import pytest

from waaah_agent.runtime.supervise.terminal import HIGH_WATER, TerminalOut

MB = 1024 * 1024


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    """(master, slave) of a raw PTY: what is written to the slave arrives at the master as is."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    yield master, slave
    for fd in (master, slave):
        try:
            os.close(fd)
        except OSError:
            pass


def pattern(size: int, tag: bytes = b"") -> bytes:
    """Bytes where every position is told apart (a dropped or doubled piece shows)."""
    out = bytearray()
    n = 0
    while len(out) < size:
        out += tag + b"%09d|" % n
        n += 1
    return bytes(out[:size])


def read_all(master: int, until: float, pace: float = 0.0, stop: threading.Event | None = None) -> bytes:
    got = bytearray()
    while time.monotonic() < until and not (stop is not None and stop.is_set()):
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            got += data
            if pace:
                time.sleep(pace)
    return bytes(got)


def reader(
    master: int, seconds: float, pace: float = 0.0
) -> tuple[threading.Thread, list[bytes], threading.Event]:
    out: list[bytes] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=lambda: out.append(read_all(master, time.monotonic() + seconds, pace, stop))
    )
    thread.start()
    return thread, out, stop


def test_a_slow_terminal_gets_everything_in_order_and_the_loop_is_woken_when_it_drained(terminal):
    master, slave = terminal
    term = TerminalOut(slave)
    data = pattern(3 * MB)
    for at in range(0, len(data), 60_000):  # as the relay hands over a flood
        started = time.monotonic()
        term.write(data[at : at + 60_000])
        assert time.monotonic() - started < 0.5  # never waits for the terminal
    assert term.pending > HIGH_WATER  # nobody read yet: most of it waits for the writer
    thread, out, stop = reader(master, 30, pace=0.001)
    woken = select.select([term.wake_fd], [], [], 20)[0]
    assert woken  # it fell below HIGH_WATER: the loop may read the agent again
    term.flush()
    deadline = time.monotonic() + 20
    while term.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert term.pending == 0
    time.sleep(0.2)
    stop.set()
    thread.join()
    assert out[0] == data
    term.close()


def test_what_waits_for_the_writer_keeps_later_output_behind_it(terminal):
    master, slave = terminal
    term = TerminalOut(slave)
    first = pattern(400_000, b"a")
    term.write(first)  # far more than the PTY takes: the rest goes to the writer
    assert term.pending
    term.write(b"<second>")  # must not jump the queue with a write of its own
    thread, out, stop = reader(master, 30)
    term.drain(os.open(os.devnull, os.O_RDONLY), stalled_after=5)
    assert term.pending == 0
    time.sleep(0.2)
    stop.set()
    thread.join()
    assert out[0] == first + b"<second>"
    term.close()


def test_a_stalled_terminal_is_given_up_on_and_the_next_run_s_output_comes_after_its_last_piece(terminal):
    master, slave = terminal
    term = TerminalOut(slave)
    first = pattern(2 * MB, b"1")
    term.write(first)
    started = time.monotonic()
    never = os.open(os.devnull, os.O_RDONLY)
    term.drain(never, stalled_after=0.3)  # nobody reads: drain gives up, it does not hang
    assert 0.25 < time.monotonic() - started < 5
    term.close()  # what was still queued is dropped; the writer is stuck in its write
    nxt = TerminalOut(slave)
    nxt.write(b"<next run>")
    thread, out, stop = reader(master, 30)
    deadline = time.monotonic() + 20
    while nxt.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    stop.set()
    thread.join()
    got = out[0]
    assert got.endswith(b"<next run>")
    before = got[: -len(b"<next run>")]
    assert first.startswith(before) and len(before) > 0  # the first run's output, cut, never mixed
    nxt.close()


def test_a_terminal_that_went_away_is_an_error_for_the_loop(terminal):
    master, slave = terminal
    term = TerminalOut(slave)
    term.write(pattern(2 * MB))
    os.close(master)  # the terminal is gone (a closed pane, a dropped ssh session)
    assert select.select([term.wake_fd], [], [], 10)[0]
    with pytest.raises(OSError):
        term.flush()
    with pytest.raises(OSError):
        term.write(b"more")
    term.close()


def test_a_trickle_is_written_at_once_without_the_writer(terminal):
    master, slave = terminal
    term = TerminalOut(slave)
    for n in range(50):
        term.write(b"line %d\r\n" % n)
        assert term.pending == 0
        assert os.read(master, 100) == b"line %d\r\n" % n
    assert term._thread is None  # nothing ever waited: no thread was started
    term.close()


def test_closing_leaves_no_file_open(terminal):
    master, slave = terminal
    before = set(os.listdir("/proc/self/fd"))
    term = TerminalOut(slave)
    term.write(pattern(200_000))
    thread, out, stop = reader(master, 30)
    term.drain(os.open(os.devnull, os.O_RDONLY), stalled_after=5)
    term.close()
    assert term._thread is not None
    term._thread.join(5)
    stop.set()
    thread.join()
    left = set(os.listdir("/proc/self/fd")) - before
    assert len(left) <= 2, left  # the two /dev/null opened above, nothing of the terminal's
