"""The screen model, fed from the relay's backlog and held to its share of the time.

pyte costs 1-5 s of CPU per MB. The relay only appends output to a backlog; the model is
brought up to date on a coalescing timer, in small pieces, in slices that never hold up
the relay for long. While output keeps coming, every slice is followed by a pause
1/SCREEN_SHARE - 1 times as long, from the first slice of an update on, so pyte takes at
most SCREEN_SHARE of the time even when one update has a long backlog to work through.
Output faster than pyte can ever follow overflows the backlog, which is then cut with the
update in progress: until the output pauses, pyte gets only SCREEN_FLOOD_SHARE, as its
work would be cut again. Once the agent is quiet, pyte catches up at once.

A redraw that only repeats the previous one (a TUI waiting on a tool, ``core/redraws.py``) is
not fed to pyte: drawn over itself it would leave the same screen.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from waaah_agent.core.supervise.redraws import RepeatedFrames
from waaah_agent.core.supervise.screen import Screen, ScreenView

SCREEN_DELAY = 0.03  # coalesce output bursts before updating the screen model
# ... and read it at most this often while the agent writes (no key waiting for its screen): a
# CLI waiting on a tool redraws its spinner ~30 times a second (codex), and each reading of the
# screen costs ~0.4 ms besides pyte's work (rendering, the rules, the machine).
SCREEN_EVERY = 0.1
# Beyond this much unprocessed output, keep only the tail. Generous: TUIs redraw only what
# changed, so a screen rebuilt from a short tail can stay wrong until the next full redraw.
SCREEN_BACKLOG = 256 * 1024
SCREEN_SHARE = 0.05  # under sustained output, the screen model gets at most this share of the time
SCREEN_FLOOD_SHARE = 0.01  # ... and this much once its backlog overflowed, until the output pauses
SCREEN_SLICE = 0.0005  # pyte work done in one go before the loop serves the PTY and stdin again
SCREEN_ROWS = 4  # rows rendered between two looks at the clock and at the keys (~25 µs a row)
SCREEN_PIECE = 32  # bytes fed to pyte between two looks at the clock and at the keys (~2-10 µs a byte)
SETTLE_AT_END = 64 * 1024  # output the screen model may still take at the end (to find the frame)


class ScreenFeed:
    """A :class:`Screen` behind a backlog. ``add`` on the relay path, ``update`` on a timer."""

    def __init__(
        self,
        cols: int,
        rows: int,
        clock: Callable[[], float] = time.monotonic,
        work_clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.screen = Screen(cols, rows)
        self.clock, self.work_clock = clock, work_clock
        # Output not taken yet: (its number, its bytes) as it came, and their size. Kept as the
        # reads themselves: appended to one buffer, a flood's growth and cuts copied each byte
        # ~10 times (~0.1 s of CPU per 100 MB).
        self.backlog: deque[tuple[int, bytes]] = deque()
        self.backlog_size = 0
        self.last_output = clock()
        self.read_at = -SCREEN_EVERY  # when the last reading of the screen was finished
        self.not_before = 0.0  # the earliest next piece of pyte work (bounds pyte's share)
        self.todo = b""  # output taken from the backlog for the update in progress
        self.done = 0  # how much of it pyte has been fed
        self.flooded = False  # output outran the screen model: its backlog was cut
        self.frames = RepeatedFrames()  # redraws that change nothing pyte would keep
        self.seq = 0  # outputs added so far ...
        self.read_seq = 0  # ... and how many of them the last finished reading of the screen saw
        self._todo_seq = 0
        self._slice_done = 0.0  # pyte work of a slice cut short by keys (it goes on after them)
        # Keys typed on output not read yet (the record waits to know what they answered): the
        # output numbers at which they came. An update stops at the first such point, so each
        # key's screen is read as it was.
        self.marks: deque[int] = deque()

    def mark(self) -> None:
        """Keys were typed now, on output not read yet: read the screen as it is at this point
        (and keep up, unpaced, until it was)."""
        if not self.marks or self.marks[-1] < self.seq:
            self.marks.append(self.seq)
        self.not_before = 0.0  # no pause owed for earlier work while keys wait for a reading

    def add(self, data: bytes, now: float) -> float | None:
        """Output arrived at ``now``; returns when the screen should next be updated (None: the
        output only repeats the last redraw, so the model has nothing to take)."""
        self.last_output = now
        self.seq += 1
        if not self.backlog and not self.todo and self.frames.repeats(data):
            self.read_seq = self.seq  # the screen read last is the screen now
            return None
        self.backlog.append((self.seq, data))
        self.backlog_size += len(data)
        if self.backlog_size > 4 * SCREEN_BACKLOG:
            # The model is far behind: bound memory, and start afresh from the recent past.
            # The update in progress is stale now, and so would the next be before it ends,
            # as long as the flood lasts: pyte keeps a token share until the output pauses.
            self._start_afresh()
            self.todo, self.done = b"", 0
        return self.when(self._next_reading(now))

    def _next_reading(self, now: float) -> float:
        """When output that came at ``now`` should be read: after SCREEN_DELAY, and SCREEN_EVERY
        after the last reading (at once when keys wait for their screens)."""
        if self.marks:
            return now + SCREEN_DELAY
        return max(now + SCREEN_DELAY, self.read_at + SCREEN_EVERY)

    def _start_afresh(self) -> None:
        """Keep only the backlog's recent past and rebuild the screen from it (a flood)."""
        while self.backlog and self.backlog_size - len(self.backlog[0][1]) >= SCREEN_BACKLOG:
            self.backlog_size -= len(self.backlog.popleft()[1])
        if self.backlog_size > SCREEN_BACKLOG:  # the last SCREEN_BACKLOG bytes, exactly
            seq, first = self.backlog[0]
            self.backlog[0] = (seq, first[self.backlog_size - SCREEN_BACKLOG :])
            self.backlog_size = SCREEN_BACKLOG
        self.screen.reset()
        self.frames.forget()
        self.flooded = True
        self.marks.clear()  # no screen of theirs is left to read (the record's wait is bounded)

    def when(self, at: float) -> float:
        """The earliest time an update asked for at ``at`` may run."""
        return max(at, self.not_before)

    def update(
        self, keys_waiting: Callable[[], bool] | None = None
    ) -> tuple[ScreenView | None, float | None]:
        """Work on the model: (the view once up to date, else None; when to go on, if needed).

        ``keys_waiting`` says whether the user typed something meanwhile: then the work stops
        after the piece in hand and goes on right after the loop forwarded the keys, in the same
        slice (a keystroke never waits for pyte, and typing never starves the reading: the
        record may be waiting for it to know whether the agent asks for a secret)."""
        now = self.clock()
        if self.todo and now < self.not_before:
            return None, self.not_before  # woken early: keep to the share
        started = self.work_clock() - self._slice_done  # a slice the keys cut short goes on
        self._slice_done = 0.0
        if not self.todo:
            if self.backlog_size > SCREEN_BACKLOG:
                # A flood or a huge dump: the screen model only needs the recent past, and until
                # the output pauses it keeps the flood's share (what it reads is stale at once).
                self._start_afresh()
            self._take()
            if self.frames.repeats(self.todo):  # drawn over itself it changes nothing
                self.todo = b""
                self.read_seq, self.read_at = self._todo_seq, now
                # What came after the point keys were typed at (or a redraw's part held back)
                # is still to read: its own update, as below.
                return self.screen.view(), self._after(now)
        todo = self.todo
        while self.done < len(todo) or not self.screen.render(SCREEN_ROWS):
            if self.done < len(todo):  # fed a piece at a time, then the rows it changed rendered
                self.screen.feed(todo[self.done : self.done + SCREEN_PIECE])
                self.done += SCREEN_PIECE
            worked = self.work_clock() - started
            if worked > SCREEN_SLICE:
                self._pace(worked)
                return None, self.not_before  # go on after a select at least
            if keys_waiting is not None and keys_waiting():
                self._slice_done = worked
                return None, self.clock()  # right after the keys, in this slice
        if todo:  # a look with nothing new (the machine's own timer) keeps the frame compared with
            self.frames.saw(todo)
        self.todo = b""
        self.read_seq = self._todo_seq
        view = self.screen.view()
        self._pace(self.work_clock() - started)
        self.read_at = now = self.clock()
        # Output that came in while this update ran gets its own update (at once while keys
        # wait for their screens to be read).
        return view, self._after(now)

    def _after(self, now: float) -> float | None:
        """When the output still in the backlog after a reading is read (None: there is none)."""
        if not self.backlog:
            return None
        return self.when(now if self.marks else self._next_reading(now))

    def _take(self) -> None:
        """The backlog, or its part up to the first point keys were typed at, as the next todo."""
        while self.marks and self.marks[0] <= self.read_seq:
            self.marks.popleft()
        upto = self.marks.popleft() if self.marks else self.seq
        if upto == self.seq and self._held_back():
            upto -= 1
        taken = []
        while self.backlog and self.backlog[0][0] <= upto:
            taken.append(self.backlog.popleft()[1])
        self.backlog_size -= sum(map(len, taken))
        self.todo, self.done = b"".join(taken), 0
        self._todo_seq = upto

    def _held_back(self) -> bool:
        """The newest output is the first part of a redraw like the last one, come just now: it
        waits for its rest (at most SCREEN_DELAY), so that the whole frame is seen to repeat."""
        seq, data = self.backlog[-1] if self.backlog else (0, b"")
        return seq == self.seq and self.clock() - self.last_output < SCREEN_DELAY and self.frames.begins(data)

    @property
    def unread(self) -> bool:
        """Output came that no finished reading of the screen has seen yet."""
        return self.read_seq < self.seq

    def resize(self, cols: int, rows: int) -> None:
        self.screen.resize(cols, rows)
        self.frames.forget()

    def rows_below_cursor(self) -> int:
        """At the end: rows of the agent's last frame below its cursor (all rows if not known).

        What the model has not taken yet is fed at once, when it is little (a flood's end is
        not worth the time: then the whole screen is assumed)."""
        rest = len(self.todo) - self.done + self.backlog_size
        if self.flooded or rest > SETTLE_AT_END:
            return self.screen.size[1]
        if self.done < len(self.todo):
            self.screen.feed(self.todo[self.done :])
        self.screen.feed(b"".join(data for _, data in self.backlog))
        self.todo, self.done = b"", 0
        self.backlog.clear()
        self.backlog_size = 0
        view = self.screen.view()
        last = max((i for i, line in enumerate(view.lines) if line.strip()), default=0)
        return max(0, last - view.cursor_row)

    def _pace(self, work: float) -> None:
        """After ``work`` seconds of pyte: while the agent is writing, pause in proportion."""
        now = self.clock()
        if self.marks:  # keys wait for a screen to be read: no pause until it was
            self.not_before = now
            return
        if now - self.last_output >= SCREEN_DELAY:  # the agent is quiet: catch up at once
            self.flooded = False
            self.not_before = now
            return
        share = SCREEN_FLOOD_SHARE if self.flooded else SCREEN_SHARE
        self.not_before = now + work * (1 / share - 1)
