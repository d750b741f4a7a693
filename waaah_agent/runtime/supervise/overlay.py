"""What the supervisor itself puts on the user's terminal, around the agent's screen.

The agent's screen is the user's terminal: the supervisor writes only the Ctrl+C menu (on the
bottom row, in the form that fits, never wrapping or scrolling), terminal titles (a usage-limit
wait, a login it waits for, a pane too small to read) and, at the end, what leaves the terminal
sane with the cursor on a fresh line below the agent's last frame. None of it is ever written
inside one of the agent's escape sequences, strings or UTF-8 characters: it waits for them to
end, for HOLD_MAX at most (then a CAN ends the agent's sequence first).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from waaah_agent.core.supervise.escapes import OpenSequence

# The Ctrl+C menu, longest first: the first that fits the width without its last column.
MENU_FORMS = (
    " waaah: [c] continue   [s] save and exit   [p] pass Ctrl+C to the agent ",
    " waaah: [c]ontinue [s]ave+exit [p]ass ^C ",
    " [c] [s] [p] ",
)
TITLE_SET = re.compile(rb"\x1b\][02];")  # OSC 0 (icon name and title) or OSC 2 (title)
ALT_SCREEN = b"\x1b[?1049"  # + h: the alternate screen; + l: back to the main one
TAIL = len(ALT_SCREEN)  # bytes of the agent's output kept: a title or switch cut by the reads
# How long our bytes wait for the agent's open sequence or string to end. An agent that opens
# one and pauses (or never ends it) must not keep the Ctrl+C menu off the screen: past this,
# CAN goes first. CAN aborts any sequence in a terminal (ECMA-48, DEC's parser: from any state
# to ground), without carrying it out: a clipboard or an image is not set from a cut payload, as
# ST would, and the rest of the payload shows as text, which the agent's next frame covers.
HOLD_MAX = 1.0
CANCEL = b"\x18"
# At the end, the modes a CLI may leave on: attributes, a hidden cursor, no autowrap, a scroll
# region, bracketed paste, mouse reports, focus events, application keys, the kitty keyboard.
LEAVE_MODES = (
    b"\x1b[0m\x1b[?25h\x1b[?7h\x1b7\x1b[r\x1b8\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l"
    b"\x1b[?1006l\x1b[?1004l\x1b[?1l\x1b>\x1b[<u"
)
# The smallest pane whose screen the rules can read: the input box and its placeholder on one
# row (gemini's box and hint need ~40 columns) and the bottom rows a dialog or footer takes.
MIN_COLS, MIN_ROWS = 40, 12


class Overlay:
    """The supervisor's own bytes for the terminal, kept out of the agent's sequences."""

    def __init__(
        self,
        write: Callable[[bytes], None],
        size: tuple[int, int],
        clock: Callable[[], float] = time.monotonic,
        due: Callable[[float], None] = lambda at: None,
    ) -> None:
        self.write = write  # to the terminal (its queue)
        self.size = size
        self.clock = clock
        self.due = due  # told when held bytes must go out even if the sequence is still open
        self.menu_shown = False
        self.tail = b""  # the end of the last output relayed (a title or a switch cut in two?)
        self.open = OpenSequence()  # is the agent's output inside a sequence, string or character?
        self.held = b""  # our own bytes, held until the agent's open escape sequence ends
        self.held_at = 0.0  # when the first of them was held
        self.alt_screen = False  # the agent is on the alternate screen (it sent CSI ?1049h)
        self.too_small = False  # the pane is too small to read the agent's screen (title says so)
        self.small_title = ""
        self.agent_title = ""
        self.held_title = ""  # ours, kept over the agent's own titles while set (a limit, a login...)

    def relayed(self, data: bytes) -> None:
        """The agent's ``data`` just went to the terminal: what of ours waited may follow."""
        self._alt_screen_in(data)
        ours = self._title_over_agents()
        # The agent set its own title over ours: ours again right after it (the screen's reads
        # come later, and a title set and set back between two of them is never seen there).
        retitle = bool(ours) and TITLE_SET.search(self.tail[-3:] + data) is not None
        self.tail = data[-TAIL:] if len(data) >= TAIL else (self.tail + data)[-TAIL:]
        self.open.feed(data)
        if retitle:
            self.title(ours)  # now, or once the agent's title sequence ended (held)
        if self.menu_shown or self.held:
            if not self.open.inside:
                held, self.held = self.held, b""
                self.write(held)
                if self.menu_shown:  # the agent may have drawn over it
                    self.draw_menu()
            else:  # held: out once it ended, or after HOLD_MAX
                if self.menu_shown and not self.held:
                    self.draw_menu()
                self.overdue()

    def _alt_screen_in(self, data: bytes) -> None:
        """The last ``CSI ?1049h``/``l`` in ``data`` (or cut in two by the last read) wins."""
        switch = None
        edge = self.tail[-len(ALT_SCREEN) :] + data[: len(ALT_SCREEN) + 1]
        if (at := edge.rfind(ALT_SCREEN)) >= 0 and at + len(ALT_SCREEN) < len(edge):
            switch = edge[at + len(ALT_SCREEN)]
        # A lone "?" first (memchr: most floods hold none), then the forward search: a search
        # for the sequence itself costs ~0.07 s of CPU per 100 MB, and rfind has no fast path.
        if (
            b"?" in data
            and ALT_SCREEN in data
            and (at := data.rfind(ALT_SCREEN)) + len(ALT_SCREEN) < len(data)
        ):
            switch = data[at + len(ALT_SCREEN)]
        if switch in (ord("h"), ord("l")):
            self.alt_screen = switch == ord("h")

    def own(self, data: bytes) -> None:
        """Bytes of ours: now, or once the agent's open escape sequence ended (HOLD_MAX at most)."""
        if not self.open.inside:
            self.write(data)
            return
        if not self.held:
            self.held_at = self.clock()
            self.due(self.held_at + HOLD_MAX)
        self.held += data

    def overdue(self) -> None:
        """Held bytes of ours waited HOLD_MAX: CAN ends the agent's sequence, and they go out."""
        if self.held and self.clock() >= self.held_at + HOLD_MAX:
            held, self.held = self.held, b""
            self.open.reset()
            self.write(CANCEL + held)

    def title(self, text: str) -> None:
        self.own(f"\x1b]0;{text}\x07".encode())

    def our_title(self, text: str, hold: bool) -> None:
        """A title of the supervisor's; held, it stays over the agent's own until released."""
        self.held_title = text if hold else ""
        if not self.too_small:  # the pane's warning comes first
            self.title(text if hold else (self.agent_title or text))

    def agent_titled(self, title: str) -> None:
        """The agent's title read on its screen changed: over a small pane's warning or a held
        title, say that again (the agent's title sequences in its output already did, in
        ``relayed``; this is for a title set some other way)."""
        if title != self.agent_title:
            self.agent_title = title
            if ours := self._title_over_agents():
                self.title(ours)

    def _title_over_agents(self) -> str:
        """Our title that stays over the agent's own ("" when the agent's may show)."""
        return self.small_title if self.too_small else self.held_title

    # -- the Ctrl+C menu --------------------------------------------------------------------
    def menu(self, show: bool) -> None:
        """Draw the menu on the bottom row, or clear that row (the caller has the agent repaint).

        The menu never wraps or scrolls: one form or another fits the width without its last
        column (writing the bottom-right cell would scroll some terminals), and no newline is
        written.
        """
        self.menu_shown = show
        if show:
            self.draw_menu()
        else:
            self.own(f"\x1b7\x1b[{self.size[1]};1H\x1b[2K\x1b8".encode())

    def draw_menu(self) -> None:
        cols, rows = self.size
        self.own(f"\x1b7\x1b[{rows};1H\x1b[2K\x1b[7m{menu_text(cols)}\x1b[0m\x1b8".encode())

    def resized(self, size: tuple[int, int]) -> None:
        self.size = size
        if self.menu_shown:
            self.draw_menu()  # on the new bottom row, in the form that fits

    # -- a pane too small ------------------------------------------------------------------
    def check_size(self) -> tuple[bool, bool]:
        """(too small now, changed since last time); the title says so while it is too small."""
        cols, rows = self.size
        small = cols < MIN_COLS or rows < MIN_ROWS
        if small:
            self.small_title = f"waaah: pane {cols}x{rows} too small, make it {MIN_COLS}x{MIN_ROWS}+"
            self.title(self.small_title)
        changed = small != self.too_small
        if changed and not small:
            self.title(self.held_title or self.agent_title)
        self.too_small = small
        return small, changed

    # -- the end ---------------------------------------------------------------------------
    def leave(self, rows_below_cursor: int) -> bytes:
        """What leaves the terminal sane after the agent, with the cursor on a fresh line below
        its last frame: where our lines (the exit text, a restart notice) begin."""
        out = (CANCEL if self.open.inside else b"") + self.held + LEAVE_MODES
        self.held = b""
        self.open.reset()
        if self.alt_screen:  # its frames go with it; the cursor is back where the agent began
            return out + b"\x1b[?1049l\r\n\x1b[J"
        down = f"\x1b[{rows_below_cursor}B" if rows_below_cursor else ""  # CUD never scrolls
        return out + f"{down}\r\n\x1b[J".encode()


def menu_text(cols: int) -> str:
    """The Ctrl+C menu in the longest form that leaves the last column free."""
    for form in MENU_FORMS:
        if len(form) < cols:
            return form
    return MENU_FORMS[-1][: max(0, cols - 1)]
