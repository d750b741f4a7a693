"""Typing a prompt into the agent, verified: paste, a separate Enter, confirmation.

Pure: fed the time and what the screen shows, it returns the bytes to write. A prompt is
never typed twice into the box: the text goes in again only into a box seen empty (the CLI
emptied it before any Enter, or never showed the paste at all), and only the Enter is re-sent
when the text stays in the box: three times, 3 s apart, then after 5 s, 10, 20, 40 and every
60 s, while the agent sits at its prompt with the text the user did not touch.

A paste the CLI never shows (it was drawing something else, or too slow under load) is not
given up on: the delivery waits and pastes again into the empty box, after 5 s, then 10, 20,
40 and every 60 s, for as long as the run lasts. A prompt given up on is work lost: the
workflow never reaches the agent (nothing nudges an agent that never had it), a prompt of
`waaah send` is dropped. Should the first paste show up late after all, its Enter follows; and
while the CLI has not even read it (frozen, too busy: the shell tells from the terminal's input
queue), nothing goes in again, or the text would land twice once the CLI catches up. A prompt
whose Enter the CLI drops is not given up on either: the text stays in the box, in sight of
anyone who looks, and the Enter goes again, more slowly, until the box empties.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from waaah_agent.core.printable import printable

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
ENTER = b"\r"
READ_SETTLE = 2.0  # after the CLI read what was typed, the time it has to draw it


class Phase(Enum):
    WAITING = "waiting"  # for the agent to be ready with an empty input box
    PASTED = "pasted"  # text is in the input box; Enter comes after the delay
    ENTERED = "entered"  # Enter sent; waiting for the screen or a hook to confirm
    CONFIRMED = "confirmed"


@dataclass(frozen=True)
class Observation:
    """What the detector sees now."""

    ready: bool  # at the input prompt, not busy
    busy: bool
    input_empty: bool
    draft: bool = False  # the input box is drawn and holds text (busy or not)
    typed_at: float | None = None  # the user's last key to the agent
    unread: int | None = 0  # bytes typed to the agent it has not read yet (None: unknown)


class Step(NamedTuple):
    """What one step does: bytes to write to the agent now, and a note when the phase moved."""

    writes: list[bytes]
    note: str | None = None


@dataclass
class Delivery:
    kind: str  # "workflow", "continue", "heartbeat", ...
    text: str
    enter_delay: float = 0.5
    confirm_timeout: float = 3.0
    max_enter_retries: int = 3  # re-sent confirm_timeout apart; then the retries' waits
    paste_timeout: float = 5.0
    first_retry: float = 5.0  # the wait before a paste that never showed goes in again
    max_retry: float = 60.0  # the retries' waits double up to this
    phase: Phase = Phase.WAITING
    since: float = 0.0
    enters: int = 0
    shown: bool = False  # the pasted text was seen in the box
    repasted: bool = False
    unseen: int = 0  # pastes the CLI never showed
    pasted_at: float | None = None  # the last paste
    retry_at: float = 0.0  # no paste before this (after one that never showed)
    unread_at: float | None = None  # last seen with typed bytes it had not read

    @property
    def done(self) -> bool:
        return self.phase is Phase.CONFIRMED

    def payload(self) -> bytes:
        """The text as one bracketed paste. Every control character in it is typed as its
        visible escape (``\\x1b``, ``\\x03``): a paste end marker, however it is split or
        nested, cannot end the paste early, and nothing after it becomes keys (a Ctrl+C that
        exits the agent). Line breaks stay line breaks (CR LF and CR as LF), tabs stay tabs."""
        body = printable(self.text.replace("\r\n", "\n").replace("\r", "\n"))
        return PASTE_START + body.encode("utf-8") + PASTE_END

    def step(self, now: float, seen: Observation, confirmed_by_hook: bool = False) -> Step:
        """Advance with the current observation: what to write to the agent now, and why."""
        if self.phase is Phase.WAITING:
            return self._waiting(now, seen)
        if self.phase is Phase.PASTED:
            return self._pasted(now, seen)
        if self.phase is Phase.ENTERED:
            return self._entered(now, seen, confirmed_by_hook)
        return Step([])

    def _waiting(self, now: float, seen: Observation) -> Step:
        if self.unseen and seen.ready and seen.draft and self._ours(seen):
            self.shown = True
            return self._go(Phase.PASTED, now, "the paste showed late: Enter follows", [])
        if self.unseen and self._note_unread(now, seen):
            # The CLI has not even read the last paste (frozen, or too busy to read): another
            # now would land in the box twice once it catches up. It goes in only after the
            # CLI read everything and had READ_SETTLE to draw it.
            return Step([])
        if now < self.retry_at or not (seen.ready and seen.input_empty):
            return Step([])
        self.pasted_at = now
        note = f"pasted again ({self.unseen})" if self.unseen else "pasted"
        return self._go(Phase.PASTED, now, note, [self.payload()])

    def _pasted(self, now: float, seen: Observation) -> Step:
        self.shown = self.shown or seen.draft
        self._note_unread(now, seen)
        if now < self.since + self.enter_delay:
            return Step([])
        if seen.draft:
            self.enters = 1
            return self._go(Phase.ENTERED, now, "enter", [ENTER])
        if seen.ready and seen.input_empty and self.shown and not self.repasted:
            # The CLI emptied the box before any Enter (gemini --resume redraws once its
            # history is loaded): nothing was sent, so the text goes in again, once.
            self.repasted, self.shown = True, False
            self.pasted_at = now
            note = "pasted again: the input box was emptied before the Enter"
            return self._go(Phase.PASTED, now, note, [self.payload()])
        # Not in the box (yet), or no box drawn (a redraw): an Enter now would submit
        # nothing and look like success.
        if now < self.since + self.paste_timeout:
            return Step([])
        wait = self._retry_wait(self.unseen)
        self.unseen += 1
        self.retry_at = now + wait
        note = f"paste never appeared in the input box: pasting again in {wait:.0f} s"
        if self._reading(now):
            note += ", once the agent has read it (it has not yet)"
        return self._go(Phase.WAITING, now, note, [])

    def _entered(self, now: float, seen: Observation, confirmed_by_hook: bool) -> Step:
        # The text gone from the box is the prompt taken (every CLI shows its emptied box
        # while it works); busy alone is not: gemini --resume shows its box, then loads the
        # history under a busy marker, its box hidden, and drops the Enter.
        if confirmed_by_hook or seen.input_empty:
            return self._go(Phase.CONFIRMED, now, "confirmed", [])
        if now < self.since + self._enter_wait():
            return Step([])
        if not (seen.draft and self._ours(seen)):
            # No box showing the text (a dialog over it, a redraw), or the user typed since:
            # an Enter now would answer whatever is drawn, or submit their draft. The screen
            # changing back brings the next step.
            return Step([])
        slow = self.enters > self.max_enter_retries
        if slow and not seen.ready:
            return Step([])  # past the quick re-sends: only at the agent's prompt, nothing over it
        self.enters += 1
        note = f"enter re-sent ({self.enters - 1})"
        if self.enters > self.max_enter_retries:
            note += f": the prompt is still in the input box; again in {self._enter_wait():.0f} s if it stays"
        return self._go(Phase.ENTERED, now, note, [ENTER])

    def _enter_wait(self) -> float:
        """The wait after the last Enter before the next: confirm_timeout for the first re-sends,
        then the retries' doubling waits."""
        late = self.enters - self.max_enter_retries - 1
        if late < 0:
            return self.confirm_timeout
        return self._retry_wait(late)

    def _retry_wait(self, n: int) -> float:
        """The wait before retry number ``n`` (from 0): first_retry, doubling up to max_retry."""
        return min(self.max_retry, self.first_retry * 2.0 ** min(n, 16))

    def _note_unread(self, now: float, seen: Observation) -> bool:
        """Keep when the CLI last had typed bytes unread; then :meth:`_reading`."""
        if seen.unread:
            self.unread_at = now
        return self._reading(now)

    def _reading(self, now: float) -> bool:
        """Is something typed still unread by the CLI, or read too lately to be drawn yet?"""
        return self.unread_at is not None and now < self.unread_at + READ_SETTLE

    @property
    def asks_unread(self) -> bool:
        """Whether the next step looks at ``Observation.unread`` (the shell asks only then)."""
        return self.phase is Phase.PASTED or (self.phase is Phase.WAITING and self.unseen > 0)

    def _ours(self, seen: Observation) -> bool:
        """What the box holds was not typed by the user since the last paste."""
        return seen.typed_at is None or self.pasted_at is None or seen.typed_at < self.pasted_at

    def next_deadline(self, now: float) -> float | None:
        """When ``step`` should run again even if the screen does not change."""
        if self.phase is Phase.WAITING and self.unseen:
            # While the CLI leaves the paste unread, asked again each second (reading it and
            # dropping it may change nothing on the screen).
            return now + 1.0 if self._reading(now) else max(self.retry_at, now + 0.25)
        if self.phase is Phase.PASTED:
            return max(self.since + self.enter_delay, now + 0.25)
        if self.phase is Phase.ENTERED and now < self.since + self._enter_wait():
            return self.since + self._enter_wait()
        return None

    def _go(self, phase: Phase, now: float, note: str, out: list[bytes]) -> Step:
        self.phase, self.since = phase, now
        return Step(out, note)
