"""The agent process: spawned under a PTY in its own session, written to through a queue.

Only the PID we spawned (and its process group, which it leads) is signalled while it runs;
what it leaves behind when it exits is ended by ``runtime/reaper.py`` (we are its subreaper).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import struct
import termios
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ptyprocess import PtyProcess

from waaah_agent.errors import CliNotFound
from waaah_agent.runtime import reaper
from waaah_agent.runtime.supervise.writeq import WriteQueue

_native_read: Callable[[int, int, int], tuple[bytes, bool]] | None
try:  # the reads a wake-up finds ready, in one call; absent where built without a C compiler
    from waaah_agent.runtime.supervise._ptyread import read_ready as _native_read
except ImportError:  # pragma: no cover - exercised by monkeypatching it away
    _native_read = None
NATIVE_READ = _native_read is not None  # as installed (the tests may take it away)

PR_SET_PDEATHSIG = 1
TIOCGPTPEER = 0x5441  # Linux 4.13+: the PTY's other side, opened from the master (no path)
READ_SIZE = 65536
READ_PIECE = 4096  # per read in read_ready (as _ptyread.c)


def _die_with_parent() -> None:
    """Runs in the child before exec: if the supervisor dies (even by SIGKILL), so does the agent."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # Not Linux: the PTY hang-up on our exit still reaches the session.
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


@dataclass(frozen=True)
class ExitStatus:
    code: int | None
    signal: int | None

    @property
    def ok(self) -> bool:
        return self.code == 0

    def describe(self) -> str:
        if self.signal is not None:
            return f"killed by signal {signal.Signals(self.signal).name}"
        return f"exit code {self.code}"


class AgentProcess:
    """A PTY child with a non-blocking master and a write queue."""

    def __init__(self, proc: PtyProcess) -> None:
        self._proc = proc
        self.fd: int = proc.fd
        self.pid: int = proc.pid
        self.start: int = reaper.start_time(proc.pid) or 0  # names the process with its pid
        self._out = WriteQueue()
        os.set_blocking(self.fd, False)

    @classmethod
    def spawn(
        cls, argv: Sequence[str], cwd: str, env: Mapping[str, str], size: tuple[int, int]
    ) -> AgentProcess:
        cols, rows = size
        reaper.become_subreaper()  # what the agent leaves behind is re-parented to us
        try:
            proc = PtyProcess.spawn(
                list(argv), cwd=cwd, env=dict(env), dimensions=(rows, cols), preexec_fn=_die_with_parent
            )
        except FileNotFoundError as err:
            raise CliNotFound(f"{argv[0]} not found: {err}") from err
        return cls(proc)

    # -- output ------------------------------------------------------------------------
    def read(self, at_most: int = READ_SIZE) -> bytes | None:
        """Bytes available now; b"" if none; None once the PTY is closed (child gone)."""
        try:
            return os.read(self.fd, at_most)
        except BlockingIOError:
            return b""
        except OSError as err:
            if err.errno == errno.EIO:  # Linux: slave side closed
                return None
            raise

    def read_ready(self, reads: int, room: int) -> tuple[bytes, bool]:
        """What the PTY has ready now: up to ``reads`` reads and ``reads`` x 4 KiB (what a read
        of a PTY gives, mostly), stopping once ``room`` bytes or more came; and whether the PTY is
        closed (after what it had). In C where it was built (one call, one bytes object), else
        read by read."""
        if _native_read is not None:
            return _native_read(self.fd, reads, room)
        batch: list[bytes] = []
        size, cap = 0, reads * READ_PIECE
        while len(batch) < reads and size < cap and (not batch or size < room):
            data = self.read(cap - size)
            if data is None:
                return b"".join(batch), True
            if not data:
                break
            batch.append(data)
            size += len(data)
        return b"".join(batch), False  # (one read: that read itself, not a copy)

    # -- input -------------------------------------------------------------------------
    def queue(self, data: bytes) -> None:
        self._out.add(data)

    @property
    def wants_write(self) -> bool:
        return bool(self._out)

    def unread_input(self) -> int | None:
        """Bytes typed to the agent that it has not read yet: those still queued here and those
        in its terminal's input queue (the PTY's other side, opened for one ``FIONREAD``: a CLI
        frozen or too busy to read shows them there). None where that cannot be asked."""
        try:
            peer = fcntl.ioctl(self.fd, TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            (waiting,) = struct.unpack("i", fcntl.ioctl(peer, termios.FIONREAD, b"\0\0\0\0"))
        except OSError:
            return None
        finally:
            os.close(peer)
        return self._out.pending + int(waiting)

    def flush(self) -> None:
        """Write what the PTY takes now; keep the rest (partial writes included)."""
        try:
            self._out.write_to(self.fd)
        except OSError as err:
            if err.errno not in (errno.EIO, errno.EBADF):
                raise
            self._out.clear()  # the child is gone: nobody will read these keys

    # -- control -----------------------------------------------------------------------
    def set_size(self, cols: int, rows: int) -> None:
        try:
            self._proc.setwinsize(rows, cols)
        except OSError:
            pass  # the child is gone; nothing to resize

    def alive(self) -> bool:
        return bool(self._proc.isalive())

    def status(self) -> ExitStatus:
        return ExitStatus(self._proc.exitstatus, self._proc.signalstatus)

    def signal_group(self, signum: int) -> None:
        """Signal the agent's process group (it leads its own session, so pgid == pid)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signum)
            if signum == signal.SIGTERM:  # a stopped agent (SIGSTOP, Ctrl+Z) acts on it only once running
                os.killpg(self.pid, signal.SIGCONT)

    def close(self) -> None:
        try:
            self._proc.close(force=True)
        except Exception:  # noqa: BLE001 - closing must never mask the real exit reason
            pass
