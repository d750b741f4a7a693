"""No process left behind: every process we spawned and everything it started, found, recorded, ended.

The supervisor (and `waaah run`) makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``):
a descendant whose parent exits is re-parented to us, not to init. So everything the agent left
behind when it exits (a ``nohup`` child, a ``setsid`` daemon, a double fork) is still in our own
process tree, found by walking /proc by parent pid, signalled and reaped by us.

A process is named by its pid *and* its start time (clock ticks since boot, /proc/<pid>/stat field
22) and the boot id: a pid that now belongs to another process (reused) never matches, so it is
never reported or signalled. Signals go through a pidfd opened before the start time is checked
again, so not even the moment between the check and the signal can hit a reused pid.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
END_GRACE = 2.0  # SIGTERM, then SIGKILL for what is still there after this long
ROUNDS = 4  # a process that forks while being ended: look again, this many times at most
POLL = 0.02
CMD_CHARS = 120


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start: int  # clock ticks after boot: with the pid, names one process for good
    state: str  # "Z": a zombie (exited, not reaped yet)

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def read_stat(pid: int) -> Proc | None:
    """/proc/<pid>/stat, or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    try:
        rest = raw[raw.rindex(b")") + 2 :].split()  # the name may hold spaces and brackets
        return Proc(pid, int(rest[1]), int(rest[19]), rest[0].decode())
    except (ValueError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    proc = read_stat(pid)
    return proc.start if proc is not None else None


_BOOT: str | None = None


def boot_id() -> str:
    global _BOOT
    if _BOOT is None:
        try:
            _BOOT = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        except OSError:
            _BOOT = ""
    return _BOOT


def command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")[:CMD_CHARS]


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process from now on (Linux 3.4+)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def table() -> dict[int, Proc]:
    """Every process we can see (one read of /proc/<pid>/stat each)."""
    found = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit() and (proc := read_stat(int(name))) is not None:
                found[proc.pid] = proc
    return found


def descendants(root: int, procs: dict[int, Proc] | None = None) -> list[Proc]:
    """Everything below ``root`` in the process tree (``root`` itself not included)."""
    procs = table() if procs is None else procs
    children: dict[int, list[Proc]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def ours(since: int, exclude: Iterable[int] = ()) -> list[Proc]:
    """Our descendants started at or after ``since`` (the spawn of the agent or the CLI): what it
    and everything it started became; as a subreaper, that includes the orphans."""
    skip = set(exclude)
    return [p for p in descendants(os.getpid()) if p.start >= since and p.pid not in skip]


def reap(procs: Iterable[Proc], exclude: Iterable[int] = ()) -> None:
    """Collect the exit status of our own zombie children, by pid (never ``waitpid(-1)``, which
    could take the status another part of the program waits for)."""
    skip, me = set(exclude), os.getpid()
    for proc in procs:
        if proc.ppid == me and proc.pid not in skip:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(proc.pid, os.WNOHANG)


def record(proc: Proc) -> dict[str, Any]:
    """How session.json and the run log remember a process."""
    return {"pid": proc.pid, "start": proc.start, "boot": boot_id(), "cmd": command(proc.pid)}


def is_same(rec: dict[str, Any]) -> bool:
    """The recorded process is still running: same pid, same start time, same boot, not a zombie."""
    try:
        pid, start = int(rec["pid"]), int(rec["start"])
    except (KeyError, TypeError, ValueError):
        return False
    if pid <= 1 or pid == os.getpid() or rec.get("boot", boot_id()) != boot_id():
        return False
    proc = read_stat(pid)
    return proc is not None and proc.start == start and not proc.zombie


def still_running(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for rec in records:
        key = (rec.get("pid"), rec.get("start"))
        if key not in seen and is_same(rec):
            seen.add(key)
            out.append(rec)
    return out


def kill_command(records: Iterable[dict[str, Any]]) -> str:
    return "kill -TERM " + " ".join(str(r["pid"]) for r in records)


def describe(records: Iterable[dict[str, Any]]) -> str:
    return ", ".join(f"{r['pid']} ({r.get('cmd') or '?'})" for r in records)


def send(proc: Proc, signum: int) -> bool:
    """Signal exactly ``proc``: through a pidfd, after checking the start time behind it."""
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return False
    except (OSError, AttributeError):
        fd = -1  # no pidfds here (old kernel): the check and the kill are a moment apart
    try:
        now = read_stat(proc.pid)
        if now is None or now.start != proc.start:
            return False
        if fd >= 0:
            signal.pidfd_send_signal(fd, signum)
        else:
            os.kill(proc.pid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if fd >= 0:
            os.close(fd)


def end(since: int, exclude: Iterable[int] = (), grace: float = END_GRACE) -> list[Proc]:
    """End every descendant of ours started at or after ``since``: SIGTERM, SIGKILL after
    ``grace``, each one reaped. Returns what is still there (nothing, unless unkillable)."""
    skip = set(exclude)
    left: list[Proc] = []
    for attempt in range(ROUNDS):
        live = [p for p in ours(since, skip) if not p.zombie]
        reap(ours(since, skip), skip)
        if not live:
            return []
        signum = signal.SIGTERM if attempt == 0 else signal.SIGKILL
        for proc in live:
            send(proc, signum)
        deadline = time.monotonic() + (grace if attempt == 0 else 1.0)
        while True:
            now_ours = ours(since, skip)
            reap(now_ours, skip)
            left = [p for p in now_ours if not p.zombie]
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(POLL)
        if left:
            for proc in left:
                send(proc, signal.SIGKILL)
    reap(ours(since, skip), skip)
    return [p for p in ours(since, skip) if not p.zombie]


class Tracker:
    """Records the agent and what it started, cheaply: at the spawn, then on a slow timer
    (1 s, doubling to ``every``); it also reaps the orphans that exited meanwhile."""

    def __init__(self, agent_pid: int, every: float = 30.0) -> None:
        self.agent_pid = agent_pid
        self.since = start_time(agent_pid) or 0
        self.every = every
        self.delay = 1.0
        self.records: list[dict[str, Any]] = []
        self.last: set[tuple[int, int]] = set()

    def look(self) -> bool:
        """Look at the tree now; True when what is recorded should change."""
        procs = ours(self.since, ())
        reap(procs, {self.agent_pid})
        live = [p for p in procs if not p.zombie]
        keys = {(p.pid, p.start) for p in live}
        changed = keys != self.last
        if changed:
            self.last = keys
            self.records = [record(p) for p in live]
        return changed

    def next_delay(self) -> float:
        delay, self.delay = self.delay, min(self.every, self.delay * 2)
        return delay
