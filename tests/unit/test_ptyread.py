"""The reads a wake-up finds ready on the agent's PTY, in one call (``_ptyread.c``), on real
PTYs: the same bytes, in order, as read by read in Python, at every size and limit, with the
PTY's end (EIO) reported after what it had, and an error raised only when nothing was read."""

from __future__ import annotations

import errno
import os
import random
import select
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.runtime.helpers import retry_until
from tests.unit.native import native_module
from waaah_agent.runtime.supervise import child

_native = native_module("waaah_agent.runtime.supervise._ptyread", "the reads are made one by one in Python")
read_ready = _native.read_ready


def test_the_package_reads_natively_here():
    assert child.NATIVE_READ and child._native_read is read_ready


class _Pty:
    """A raw PTY pair: bytes written to the child's side come out of the master as they are."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        import tty

        tty.setraw(self.slave)
        os.set_blocking(self.master, False)

    def close(self) -> None:
        for fd in (self.master, self.slave):
            if fd >= 0:
                os.close(fd)
        self.master = self.slave = -1

    def close_child(self) -> None:
        os.close(self.slave)
        self.slave = -1


@pytest.fixture
def pty():
    p = _Pty()
    yield p
    p.close()


_WRITER = """
import os, random, sys, tty
tty.setraw(1)
rng = random.Random(int(sys.argv[1]))
stream = bytes(rng.randrange(256) for _ in range(int(sys.argv[2])))
at = 0
while at < len(stream):
    at += os.write(1, stream[at : at + rng.choice([1, 7, 100, 4096, 9000])])
"""


def _stream(seed: int, size: int) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(size))


def _drain(call, want: int) -> tuple[bytes, list[int], bool]:
    """Call until ``want`` bytes came (or the PTY closed): the bytes, each call's size, closed."""
    got, sizes = bytearray(), []
    for _ in range(10_000):
        data, closed = call()
        got += data
        sizes.append(len(data))
        if closed or len(got) >= want:
            return bytes(got), sizes, closed
    raise AssertionError(f"only {len(got)} of {want} bytes")


def test_nothing_ready_is_empty_and_open(pty):
    assert read_ready(pty.master, 16, 1 << 20) == (b"", False)


def test_what_is_ready_comes_in_one_call_and_in_order(pty):
    data = bytes(random.Random(1).randrange(256) for _ in range(3000))
    os.write(pty.slave, data)
    assert _drain(lambda: read_ready(pty.master, 16, 1 << 20), len(data))[0] == data


@pytest.mark.parametrize("reads,room", [(1, 1 << 20), (2, 1), (3, 5000), (16, 1 << 20), (64, 10_000)])
def test_an_agent_s_stream_arrives_whole_native_and_in_python(tmp_path, monkeypatch, reads, room):
    """A real child on its PTY writes a stream in pieces of random sizes while it is read: every
    byte arrives once, in order, then the end; no call reads more than ``reads`` times 4 KiB. The
    same read by read in Python."""
    seed, size = reads * 7 + room, 300_000
    for native in (True, False):
        if not native:
            monkeypatch.setattr(child, "_native_read", None)
        agent = child.AgentProcess.spawn(
            [sys.executable, "-c", _WRITER, str(seed), str(size)], str(tmp_path), dict(os.environ), (80, 24)
        )
        try:
            got, sizes, closed = bytearray(), [], False
            deadline = time.monotonic() + 60
            while not closed and time.monotonic() < deadline:
                select.select([agent.fd], [], [], 1)
                data, closed = agent.read_ready(reads, room)
                got += data
                sizes.append(len(data))
        finally:
            agent.signal_group(signal.SIGKILL)
        assert closed and bytes(got) == _stream(seed, size), (native, len(got))
        assert max(sizes) <= reads * 4096


def test_a_call_stops_once_it_has_room_for_no_more(pty):
    """20,000 bytes written: with room for 1 byte, one read (a PTY read gives a few KiB at most);
    the rest comes with the next calls, whole."""
    data = _stream(3, 20_000)
    writer = threading.Thread(target=os.write, args=(pty.slave, data))  # more than a PTY holds
    writer.start()
    select.select([pty.master], [], [], 10)
    first, closed = read_ready(pty.master, 64, 1)
    assert 0 < len(first) < len(data) and not closed
    rest = _drain(lambda: read_ready(pty.master, 64, 1 << 20), len(data) - len(first))[0]
    writer.join()
    assert first + rest == data


def test_the_end_of_the_pty_comes_after_what_it_had(pty):
    os.write(pty.slave, b"last words\r\n")
    pty.close_child()
    got, _, closed = _drain(lambda: read_ready(pty.master, 16, 1 << 20), 1 << 30)
    assert got == b"last words\r\n" and closed
    assert read_ready(pty.master, 16, 1 << 20) == (b"", True)  # and again, nothing more


def test_an_error_with_nothing_read_is_raised():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(OSError) as err:
        read_ready(r, 4, 100)
    assert err.value.errno == errno.EBADF


def test_bad_arguments_are_refused(pty):
    for reads in (0, -1, 1025):
        with pytest.raises(ValueError):
            read_ready(pty.master, reads, 10)
    with pytest.raises(TypeError):
        read_ready("3", 1, 10)  # type: ignore[arg-type]


_READS_ON_A_LINE = """
import sys, tty
tty.setraw(0)
print("ready", flush=True)
sys.stdin.buffer.readline()  # reads nothing until the test writes a line, then stops reading
print("took", flush=True)
import time; time.sleep(60)
"""


def _until_shown(agent: child.AgentProcess, text: bytes, seen: bytes) -> bytes:
    deadline = time.monotonic() + 20
    while text not in seen:
        assert time.monotonic() < deadline, seen
        select.select([agent.fd], [], [], 1)
        seen += agent.read_ready(4, 1 << 20)[0]
    return seen


def test_what_the_agent_has_not_read_is_counted_until_it_reads_it(tmp_path):
    """A CLI frozen or too busy to read leaves what was typed in its terminal's input queue."""
    agent = child.AgentProcess.spawn(
        [sys.executable, "-c", _READS_ON_A_LINE], str(tmp_path), dict(os.environ), (80, 24)
    )
    try:
        seen = _until_shown(agent, b"ready", b"")
        os.kill(agent.pid, signal.SIGSTOP)  # stopped: reads nothing
        # Once it is stopped: the signal is only pending until the child runs, and a line typed
        # meanwhile ends its read() first (n_tty looks for input before pending signals).
        retry_until(lambda: Path(f"/proc/{agent.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T")
        agent.queue(b"x" * 500 + b"\n")
        agent.flush()
        deadline = time.monotonic() + 10
        while agent.unread_input() != 501 and time.monotonic() < deadline:
            time.sleep(0.01)  # the PTY hands bytes to the other side a moment later
        assert agent.unread_input() == 501
        os.kill(agent.pid, signal.SIGCONT)
        _until_shown(agent, b"took", seen)
        assert agent.unread_input() == 0
    finally:
        agent.signal_group(signal.SIGKILL)
    assert agent.unread_input() in (0, None)  # gone: nothing pending, or nothing to ask
