"""Session logs: clean timestamped text for grep/less, and a lossless asciicast v2 record.

Writes are buffered (an unbuffered write per chunk costs real CPU at high output rates)
and flushed by the loop's timer and at close. Each file rolls over at ``max_bytes`` into
numbered parts that are compressed in the background and kept within the session's disk budget
(``runtime/parts.py``), and only the newest ``keep`` sessions per agent are kept, so a whole
night is kept and still cannot fill the disk.
A disk that fills up anyway costs log lines, never the session: see ``RollingFile``.
"""

from __future__ import annotations

import json
import time
from collections import deque
from datetime import datetime, timedelta
from pathlib import Path

from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.secrets.shapes import word_from
from waaah_agent.core.supervise.castjson import escaped
from waaah_agent.core.supervise.redraws import RepeatedFrames
from waaah_agent.core.supervise.textlog import LineCleaner
from waaah_agent.runtime.private import private_dir
from waaah_agent.runtime.supervise.logfiles import (
    RollingFile,
    char_boundary,
    live_logs,
    prune,
    stamp,
)
from waaah_agent.runtime.supervise.parts import DEFAULT_BUDGET, Compressor

# Bytes per second turned into clean text lines (~60-100 ms of CPU per MB of agent text, so at
# most ~2.5 % of a core). A flood beyond this (a dumped file, a build log) goes only to the
# lossless .cast, and the .log says how much it left out.
HIDDEN = "[input hidden]"
CLEAN_PER_SECOND = 256 * 1024
WAIT_AT_MOST = 4 * 1024 * 1024  # output held for a screen reading (a flood outruns the screen model)
# output recorded together at most (under a flood, 256 KB records cost ~10 % less CPU than 64 KB
# ones, and the relay ~10 % more throughput: each record starts with cold caches) ...
BATCH = 256 * 1024
BATCH_FOR = 0.01  # ... and for at most this long after its first read (then with the next read or flush)
# A TUI waiting on a tool redraws its live area ~20 times a second; each record made alone met
# cold caches (the native passes cost 5-10x what they cost warm: ~0.4 ms a redraw, ~1 % of a
# core all night). Redraws that only repeat the last one are recorded together for this long,
# each read with its own time in the .cast; other output keeps the short batch (the loop does
# the recording between two reads: a long batch would hold the next read up).
REPEATS_FOR = 0.25
# So are small reads, up to this much together (codex and claude redraw a spinner line in reads
# of ~70 bytes, 10-30 a second, while they wait on a tool): such a record is little work. Not
# more: a record is made between two reads, and one of 4 KB (its text log cleaning ~0.4 ms)
# put output latency's p99 at 1.5 ms against 0.8 ms, interleaved.
TRICKLE = 1024
GRAIN = 0.01  # reads of one batch closer in time than this share a .cast event
HEAD_LINES = 20  # the first lines of a run (a CLI that refuses its arguments says why first)


class SessionLogs:
    """The two log files of one supervised run."""

    def __init__(
        self,
        folder: Path,
        agent: str,
        size: tuple[int, int],
        redactor: Redactor,
        *,
        keep: int = 10,
        max_bytes: int = 20 * 1024 * 1024,
        budget: int = DEFAULT_BUDGET,
        now: datetime | None = None,
    ) -> None:
        private_dir(folder)
        started = now or datetime.now()
        base = folder / f"{agent}-{stamp(started)}"
        n = 1
        while base.with_suffix(".log").exists():  # two starts within one second
            n += 1
            base = folder / f"{agent}-{stamp(started)}-{n}"
        self.text_path = base.with_suffix(".log")
        self.cast_path = base.with_suffix(".cast")
        self._redact = redactor
        redactor.prepare()  # its native search compiled now, not on the relay's path at the first output
        self._cleaner = LineCleaner()
        # A redraw that repeats the last one (a TUI waiting on a tool) holds no new line: the
        # cleaner skips it.
        self._frames = RepeatedFrames()
        # Output that came after keys typed before the screen was read: recorded once it was.
        self._waiting: list[tuple[float, bytes, int]] | None = None  # (when, data, its number)
        self._waiting_size = 0
        self._batch: list[bytes] = []  # reads not recorded yet (see _batched) ...
        self._stamps: list[float] = []  # ... and when each came
        self._repeats = False  # every read of the batch only repeats the last redraw
        self._batch_size = 0
        self._batch_at = 0.0
        self.recent: deque[str] = deque(maxlen=40)  # the clean tail kept in session.json
        self.head: list[str] = []  # the first clean lines since the agent last started
        self._t0 = time.monotonic()
        self._window_end = self._t0 + 1.0  # the current second of the cleaning budget
        self._cleaned = 0
        self._skipped = 0  # bytes of this second only in the .cast
        self._over = False  # this second's budget ran out: the rest of it is skipped
        self._resync = False  # output was left out: the text log goes on at the next line
        self._cast_hold = b""
        self._hidden = self._hidden_noted = False
        cols, rows = size
        header = {
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": int(started.timestamp()),
            "env": {"TERM": "xterm-256color"},
            "title": f"waaah agent --start={agent}",
        }
        self.parts = Compressor([self.text_path, self.cast_path], budget)
        self._text = RollingFile(self.text_path, max_bytes, on_roll=self.parts.rolled)
        cast_header = (json.dumps(header) + "\n").encode()
        self._cast = RollingFile(self.cast_path, max_bytes, cast_header, on_roll=self.parts.rolled)
        prune(folder, agent, keep, live_logs(folder.parent / "sessions"))

    def output(self, data: bytes, seq: int = 0, repeat: bool = False) -> None:
        """Record agent output (called on the relay path, after the terminal got it: cheap,
        buffered). ``seq``: its number among the outputs the screen model was given; ``repeat``:
        it only draws the last redraw again (a TUI waiting on a tool)."""
        now = time.monotonic()
        if self._waiting is not None:
            self._waiting.append((now, data, seq))
            self._waiting_size += len(data)
            if self._waiting_size > WAIT_AT_MOST:
                self.screen_read()
            return
        self._batched(now, data, repeat)

    def _batched(self, now: float, data: bytes, repeat: bool = False) -> None:
        """Reads that follow each other within BATCH_FOR (redraws that repeat: REPEATS_FOR) are
        recorded together: the work per record, paid once per read under a flood of 4-16 KB
        reads, is paid once per BATCH."""
        self._repeats = self._repeats and repeat
        slow = self._repeats or self._batch_size + len(data) <= TRICKLE
        if self._batch and now - self._batch_at > (REPEATS_FOR if slow else BATCH_FOR):
            # A redraw cut in two by the reads waits for its rest (this read, maybe), so that the
            # text log sees whole frames repeat (``RepeatedFrames.begins``).
            self._record_batch(keep_last=self._frames.begins(self._batch[-1]))
        if not self._batch:
            self._batch_at, self._repeats = now, repeat
        self._batch.append(data)
        self._stamps.append(now)
        self._batch_size += len(data)
        if self._batch_size >= BATCH:
            self._record_batch()

    def _record_batch(self, keep_last: bool = False) -> None:
        """Record the batch (``keep_last``: all but its last read, which starts the next batch)."""
        if self._batch:
            batch, stamps = self._batch, self._stamps
            self._batch, self._stamps, self._batch_size = [], [], 0
            if keep_last:
                self._batch, self._stamps = [batch.pop()], [stamps.pop()]
                self._batch_at, self._batch_size = self._stamps[0], len(self._batch[0])
                if not batch:
                    return
            if len(batch) == 1:
                self._record(stamps[0], batch[0])
                return
            marks, at, last = [], 0, stamps[0]  # where a read after a pause begins, and when
            for data, when in zip(batch, stamps, strict=True):
                if at and when - last >= GRAIN:
                    marks.append((at, when))
                last = when
                at += len(data)
            self._record(stamps[0], b"".join(batch), marks)

    def wait_for_screen(self) -> None:
        """Keys went to the agent before its screen was read: what it shows next is recorded only
        once the screen was read (a secret-entry screen's echo is never written). The terminal
        does not wait; only the record does."""
        if self._waiting is None:
            self._waiting, self._waiting_size = [], 0

    @property
    def waiting(self) -> bool:
        return self._waiting is not None

    def screen_read(self, upto: int | None = None) -> None:
        """The screen was read (and ``hide`` told) up to output number ``upto``: record what waited
        and that reading saw, or the marker instead. None: the reading the keys waited for, all
        of it. What came after ``upto`` waits for the reading that sees it: typing that goes on
        while the screen is read keeps the record waiting, and each piece is still judged by the
        first reading that saw it (a secret-entry screen found then hides its echo)."""
        waiting = self._waiting or []
        keep = [w for w in waiting if w[2] > upto] if upto is not None else []
        if keep:
            self._waiting, self._waiting_size = keep, sum(len(w[1]) for w in keep)
        else:
            self._waiting, self._waiting_size = None, 0
        for now, data, seq in waiting:
            if upto is None or seq <= upto:
                self._batched(now, data)

    def _record(self, now: float, data: bytes, marks: list[tuple[int, float]] | None = None) -> None:
        if self._hidden:
            if not self._hidden_noted:  # what a secret-entry screen echoes is never written
                self._hidden_noted = True
                self._cast.write(b'[%.6f, "m", "%b"]\n' % (now - self._t0, HIDDEN.encode()))
                self._line(HIDDEN)
            return
        if now >= self._window_end:
            self._next_window(now)
        if self._over:  # the rest of a second whose budget ran out is only in the .cast
            self._skipped += len(data)
            self._frames.forget()
        elif self._cleaned + len(data) > CLEAN_PER_SECOND:
            # The second's budget ends in this batch (a flood's batches are as large as the
            # budget): its whole lines within the budget are cleaned (unless it only draws the
            # last redraw again), the rest of the second is only in the .cast (a smaller batch
            # later in it must not go on the half line cut).
            repeat = self._frames.repeats(data)
            whole = 0 if repeat else data.rfind(b"\n", 0, CLEAN_PER_SECOND - self._cleaned) + 1
            self._over = True
            self._skipped += len(data) - whole
            self._clean(data[:whole], now)
            self._frames.forget()
        elif not self._frames.repeats(data):  # a repeated redraw holds no new line
            self._clean(data, now)
            self._frames.saw(data)
        self._cast_out(now, data, marks=marks)

    def _clean(self, data: bytes, now: float) -> None:
        """``data`` through the line cleaner into the text log (within the second's budget)."""
        self._cleaned += len(data)
        clean = self._after_cut(data) if self._resync else data
        if clean and (lines := self._cleaner.feed(clean, now)):
            self._lines(lines, now)

    def _after_cut(self, data: bytes) -> bytes:
        """After output left out: what follows the end of the line it cut (that line's rest is
        only in the .cast too: alone it is a fragment, and a fragment of a token is no shape the
        masking knows)."""
        eol = data.find(b"\n")
        if eol < 0:
            self._skipped += len(data)
            return b""
        self._resync = False
        self._skipped += eol + 1
        return data[eol + 1 :]

    def _lines(self, lines: list[str], now: float) -> None:
        """Clean lines of one batch: masked together, one time stamp (when its first read came,
        on the wall clock), one write."""
        masked = self._redact("\n".join(lines)).split("\n")
        if len(masked) != len(lines):  # a shape's mask took a line break with it
            masked = [self._redact(line) for line in lines]
        self.recent.extend(masked)
        if len(self.head) < HEAD_LINES:
            self.head.extend(masked[: HEAD_LINES - len(self.head)])
        came = datetime.now() - timedelta(seconds=max(0.0, time.monotonic() - now))
        ts = came.isoformat(timespec="milliseconds")
        self._text.write("".join(f"{ts} {line}\n" for line in masked).encode("utf-8", "surrogateescape"))

    def hide(self, hidden: bool) -> None:
        """While the agent shows a secret-entry screen, record ``[input hidden]`` instead of output."""
        if hidden == self._hidden:
            return
        self._record_batch()  # what came before the change, as it was
        self._hidden, self._hidden_noted = hidden, False
        if hidden:
            self._cast_out(time.monotonic(), b"", final=True)  # what came before, in full
        else:
            self._cleaner = LineCleaner()  # the screen's redraws after it start afresh
            self._frames.forget()

    def _next_window(self, now: float) -> None:
        if self._over:
            self._cleaner = LineCleaner()  # its half line and escape state are stale now
            self._frames.forget()
            self._resync = True
        failing = self._cast.failing
        if self._skipped and failing is None:
            self.notice(f"{self._skipped} bytes of fast output are only in {self.cast_path.name}")
        elif self._skipped and failing is not None:  # the .cast's own line says what it lost
            self.notice(
                f"{self._skipped} bytes of fast output are not in the text log, nor in "
                f"{self.cast_path.name}: it cannot be written ({failing.strerror or failing})"
            )
        self._window_end, self._cleaned, self._skipped, self._over = now + 1.0, 0, 0, False

    def _cast_out(
        self, now: float, data: bytes, final: bool = False, marks: list[tuple[int, float]] | None = None
    ) -> None:
        """``data`` into the .cast: one event at ``now``, or one per read of a batch (``marks``:
        where each read after the first begins in ``data``, and its time)."""
        held = len(self._cast_hold)
        if held:
            data = self._cast_hold + data
        # A secret can straddle two reads. A token-like word at the very end (and what
        # introduces it) is held back as it came, to be masked with its rest (masked first, a
        # token cut by the reads lost its start to the mask and its end went out plain); the
        # rest is masked, and of it a tail where a known value's characters may go on is held
        # back masked (its run masked whole first: released as it came, a long run held back
        # would go out a character at a time). A character is never cut in two.
        word = len(data) if final else char_boundary(data, word_from(data))
        raw, word_tail = data[:word], data[word:]
        masked, facts = self._redact.record(raw)  # secrets masked (and, without the C build, what to escape)
        cut = len(masked) if final else char_boundary(masked, self._redact.hold_from(masked))
        out, self._cast_hold = masked[:cut], masked[cut:] + word_tail
        if not out:
            return
        events: list[tuple[float, bytes]] = [(now, out)]
        # The reads of a batch as they came, where the mask changed nothing (what a mask took
        # or gave may not line up with them: then the batch is one event, as a lone read is).
        if marks and masked == raw:
            events, start, when = [], 0, now
            for at, then in marks:
                at = char_boundary(out, min(at + held, len(out)))
                if at > start:
                    events.append((when, out[start:at]))
                    start = at
                when = then
            if start < len(out):
                events.append((when, out[start:]))
        for when, chunk in events:  # the very end may cut a character: json_string spells it
            body = escaped(chunk, None if final else facts)
            self._cast.write(b'[%.6f, "o", "' % (when - self._t0), body, b'"]\n')

    def resize(self, cols: int, rows: int) -> None:
        self._record_batch()
        self._cast.write(b'[%.6f, "r", "%dx%d"]\n' % (time.monotonic() - self._t0, cols, rows))

    def notice(self, message: str) -> None:
        """A supervisor line (marked ``[waaah]``) in the text log, there at once for ``tail -f``."""
        self._record_batch()  # after the agent's lines that came before it
        self._line(f"[waaah] {message}")
        self._text.flush()

    @property
    def skipping(self) -> bool:
        """Output was left out of the text log this second (a later flush says how much)."""
        return bool(self._skipped)

    def _line(self, text: str, masked: bool = False) -> None:
        ts = datetime.now().isoformat(timespec="milliseconds")
        line = text if masked else self._redact(text)
        self._text.write(f"{ts} {line}\n".encode("utf-8", "surrogateescape"))

    def flush(self) -> None:
        self._record_batch()
        now = time.monotonic()
        if self._skipped and now >= self._window_end:
            self._next_window(now)
        for f in (self._text, self._cast):
            f.flush()
        self._report_losses()
        while not self.parts.dropped.empty():
            self.notice(f"the record outgrew its budget: dropped its oldest part {self.parts.dropped.get()}")

    def _report_losses(self, final: bool = False) -> None:
        """The text log says what a file misses, once it is written again (or at the end)."""
        for f in (self._text, self._cast):
            if f.lost and (final or f.failing is None):
                lost, f.lost = f.lost, 0
                why = f": {f.failing}" if f.failing else ""
                self.notice(f"{lost} bytes could not be written to {f.path.name}{why}")

    def close(self) -> None:
        self.screen_read()
        self._record_batch()
        self._cast_out(time.monotonic(), b"", final=True)
        if self._skipped:
            self._next_window(time.monotonic())
        for line in self._cleaner.flush(time.monotonic()):
            self._line(line)
        self._report_losses(final=True)
        self.parts.close()  # the last rolled part compressed, and what the budget dropped said
        self.flush()
        self._text.close()
        self._cast.close()
        self.parts.close()
