"""One headless CLI process for `waaah run`: spawned in its own process group, its stdout
parsed as it comes, stderr kept (the tail), killed as a group at the deadline or on Ctrl+C.
What it started ends with it (we are its subreaper: ``runtime/reaper.py``), and it is recorded in
the run log so that a `waaah run` killed with SIGKILL leaves its leftovers findable."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from waaah_agent.core.oneshot.streams import Lines, StreamParser, StreamSummary
from waaah_agent.runtime import reaper
from waaah_agent.runtime.oneshot import runlog
from waaah_agent.runtime.supervise.child import _die_with_parent

KILL_GRACE = 3.0
STDERR_KEEP = 64 * 1024
#: A stdout line longer than this is cut (dropped, counted as noise, said in the run log): a CLI
#: that never ends its line must not take all memory. A 64 MB answer is well within it.
LINE_CAP = 128 * 1024 * 1024


@dataclass
class Outcome:
    """One CLI process."""

    exit_code: int | None
    timed_out: bool
    interrupted: bool
    stderr: str
    summary: StreamSummary
    seconds: float
    pid: int = 0


class Interrupted(Exception):
    """Ctrl+C (or SIGTERM) while a CLI ran or between attempts."""


def run_cli(
    argv: list[str],
    stdin_data: bytes | None,
    env: Mapping[str, str],
    cwd: Path,
    deadline: float,
    parser: StreamParser,
    on_line: Callable[[str], None],
) -> Outcome:
    """Run one CLI to its end (or ``deadline``, monotonic) and parse its stream as it comes."""
    started = time.monotonic()
    err = bytearray()
    with contextlib.ExitStack() as stack:
        stdin: int | IO[bytes] = subprocess.DEVNULL
        if stdin_data is not None:
            spool = stack.enter_context(tempfile.TemporaryFile())
            spool.write(stdin_data)
            spool.seek(0)
            stdin = spool
        reaper.become_subreaper()  # what the CLI leaves behind is re-parented to us
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own group: we signal exactly what we spawned
            preexec_fn=_die_with_parent,
        )
        assert proc.stdout is not None and proc.stderr is not None
        tracker = reaper.Tracker(proc.pid)
        try:
            code, timed_out, interrupted = _watch(proc, tracker, deadline, parser, on_line, err)
        except BaseException:  # an error of ours while it ran: the CLI and its group do not outlive it
            _finish(proc, deadline, stop=True)
            reaper.end(tracker.since, exclude={proc.pid})
            raise
        reaper.end(tracker.since, exclude={proc.pid})  # what it left behind ends with it
    outcome = Outcome(
        code,
        timed_out,
        interrupted,
        err.decode("utf-8", "replace"),
        parser.summary,
        time.monotonic() - started,
        proc.pid,
    )
    if interrupted:
        raise InterruptedRun(outcome)
    return outcome


def _watch(
    proc: subprocess.Popen[bytes],
    tracker: reaper.Tracker,
    deadline: float,
    parser: StreamParser,
    on_line: Callable[[str], None],
    err: bytearray,
) -> tuple[int | None, bool, bool]:
    """Read the CLI's stdout (parsed) and stderr (the tail kept in ``err``) to its end, the
    deadline or Ctrl+C; reap it: (exit code, timed out, interrupted)."""
    assert proc.stdout is not None and proc.stderr is not None
    look_at = time.monotonic()
    timed_out = interrupted = False
    lines = Lines(LINE_CAP)
    sel = selectors.DefaultSelector()
    for pipe in (proc.stdout, proc.stderr):
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if now >= look_at:  # the slow timer: the CLI's process tree, recorded when it changed
                if tracker.look():
                    runlog.note_processes(tracker.records)
                look_at = now + tracker.next_delay()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 1.0:
                break  # the CLI is gone; something it left behind holds the pipes
            for key, _ in sel.select(timeout=min(0.5, deadline - now)):
                chunk = _read(key.fileobj)  # type: ignore[arg-type]
                if chunk is None:
                    continue
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if key.fileobj is proc.stderr:
                    err += chunk
                    del err[:-STDERR_KEEP]
                    continue
                for raw in lines.feed(chunk):
                    _line(raw, parser, on_line)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sel.close()
    if last := lines.end():
        _line(last, parser, on_line)
    if lines.cut:
        parser.summary.noise += len(lines.cut)
        runlog.note_cut(lines.cut, lines.cap)
    return _finish(proc, deadline, stop=timed_out or interrupted), timed_out, interrupted


class InterruptedRun(Interrupted):
    """Ctrl+C while the CLI ran: the partial outcome travels with it."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__("interrupted")
        self.outcome = outcome


def _read(pipe: IO[bytes]) -> bytes | None:
    """The next chunk; b"" at EOF; None on a spurious wake-up."""
    try:
        return os.read(pipe.fileno(), 65536)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _line(raw: bytes, parser: Any, on_line: Callable[[str], None]) -> None:
    text = raw.decode("utf-8", "replace")
    if parser.feed(text) is not None:
        on_line(text)


def _finish(proc: subprocess.Popen[bytes], deadline: float, stop: bool) -> int | None:
    """Reap the CLI; on a stop (or when it lingers) its whole group gets SIGTERM, then SIGKILL."""
    if not stop:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return proc.wait(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
    _signal_group(proc.pid, signal.SIGKILL)  # anything of its group still alive
    return None if stop else proc.returncode


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
