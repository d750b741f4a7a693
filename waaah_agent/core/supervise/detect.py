"""The agent's state from evidence, strongest first. Pure: a screen snapshot and facts in.

Evidence, in the order it is trusted: process facts (the CLI is gone), the MCP tap (a
``wait_for_prompt`` call in flight means the agent is inside its loop, whatever the screen
shows), then the screen, read only in bounded regions through per-CLI, per-version rules:
the bottom rows (input box, busy line, footer), a taller bottom region for dialogs, login
and limit screens, and the window title. Never the whole scrollback: the agent's own output
contains every phrase a rule could look for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from waaah_agent.core.supervise.screen import ScreenView

_VOLATILE = re.compile(r"[\u2800-\u28ff·✢✳✶✻✽✦◐◑◒◓⊶⊷]|\d+")


class AgentState(str, Enum):
    """What the agent is doing, as far as the evidence tells."""

    STARTING = "starting"
    READY = "ready"  # at its input prompt, not working (the box may hold a draft)
    BUSY = "busy"
    TOOL = "tool"  # a wait_for_prompt call in flight (MCP tap)
    DIALOG = "dialog"
    LOGIN = "login"
    LIMITED = "limited"
    EXITING = "exiting"
    EXITED = "exited"


STATES = tuple(s.value for s in AgentState)


@dataclass(frozen=True)
class ScreenRules:
    """Regexes for one CLI version, each applied to a named region of the screen.

    ``input_ready`` / ``input_empty`` / ``busy`` look at the bottom ``region_rows`` rows (input
    box and footer); ``dialog`` / ``login`` / ``limit`` / ``exited`` at the bottom
    ``dialog_rows`` rows; ``title_*`` at the window title (OSC 0/2).
    """

    input_ready: re.Pattern[str]
    input_empty: re.Pattern[str]
    busy: re.Pattern[str]
    title_ready: re.Pattern[str] | None = None
    title_busy: re.Pattern[str] | None = None
    dialog: re.Pattern[str] | None = None
    login: re.Pattern[str] | None = None
    exited: re.Pattern[str] | None = None  # the CLI's goodbye (it is about to exit)
    limit: re.Pattern[str] | None = None  # a usage-limit banner or dialog
    # A screen where a secret is typed (an API key or login code): what it echoes is not recorded.
    secret_entry: re.Pattern[str] | None = None
    # The CLI's own loop detector: its question whether to keep it on, and its halt message.
    loop_dialog: re.Pattern[str] | None = None
    loop_halted: re.Pattern[str] | None = None
    # On its login screen: the CLI's login failed for good (the account cannot use this CLI).
    login_refused: re.Pattern[str] | None = None
    region_rows: int = 12
    dialog_rows: int = 25


@dataclass(frozen=True)
class Evidence:
    """What is known besides the screen."""

    alive: bool = True  # process facts
    wait_in_flight: bool = False  # MCP tap: a wait_for_prompt call is running
    limits: bool = True  # False: a limit banner on the screen was already waited out


def region(rules: ScreenRules, view: ScreenView) -> str:
    return "\n".join(view.bottom(rules.region_rows))


def dialog_region(rules: ScreenRules, view: ScreenView) -> str:
    return "\n".join(view.bottom(rules.dialog_rows))


def find(pattern: re.Pattern[str] | None, text: str) -> re.Match[str] | None:
    return pattern.search(text) if pattern is not None else None


def fingerprint(screen_text: str) -> str:
    """The screen with spinners and counters removed: equal while nothing really changes."""
    return _VOLATILE.sub("", screen_text)


@dataclass(frozen=True)
class Reading:
    """Everything the screen says, read once through one CLI's rules (bounded regions only).

    Each ``str | None`` field is the text that matched (the evidence), None when nothing did.
    """

    login: str | None = None
    secret_entry: str | None = None  # a screen where a key or code is typed
    exiting: str | None = None
    limit: str | None = None  # the whole screen line holding a usage-limit banner
    busy: str | None = None
    dialog: str | None = None
    loop_dialog: str | None = None  # the CLI asks whether to keep its loop detection on
    loop_halted: str | None = None  # the CLI's loop detector halted the turn (its message)
    login_refused: str | None = None  # the login failed for good: what the CLI said, one line
    input_ready: bool = False  # the input prompt is drawn
    input_empty: bool = False
    title: str = ""
    fingerprint: str = ""  # the screen minus spinners and counters: equal while nothing changes

    @property
    def ready(self) -> bool:
        """At the input prompt and not working (the input box may hold a draft)."""
        return self.input_ready and self.busy is None and self.dialog is None


def read(rules: ScreenRules, view: ScreenView) -> Reading:
    """One pass of every rule over its region of ``view``."""
    return ScreenReader(rules).read(view)


_BottomFacts = tuple[bool, bool, bool]  # the busy marker, the input prompt, the prompt empty


def _bottom_facts(rules: ScreenRules, bottom: str) -> _BottomFacts:
    return (
        bool(rules.busy.search(bottom)),
        bool(rules.input_ready.search(bottom)),
        bool(rules.input_empty.search(bottom)),
    )


def _tall_facts(rules: ScreenRules, tall: str) -> dict[str, str | None]:
    """What the rules of the tall region find (``limit``: the banner's words; its whole line is
    looked up in the view of the moment)."""
    return {
        "login": _said(find(rules.login, tall)),
        "secret_entry": _said(find(rules.secret_entry, tall)),
        "exiting": _said(find(rules.exited, tall)),
        "limit": _said(find(rules.limit, tall)),
        "dialog": _said(find(rules.dialog, tall)),
        "loop_dialog": _said(find(rules.loop_dialog, tall)),
        "loop_halted": _said(find(rules.loop_halted, tall)),
        "login_refused": _one_line(find(rules.login_refused, tall)),
    }


def _reading(
    rules: ScreenRules, view: ScreenView, bottom: _BottomFacts, tall: dict[str, str | None], print_: str
) -> Reading:
    busy: str | None = None
    if find(rules.title_busy, view.title):
        busy = f"title {view.title!r}"
    elif bottom[0]:
        busy = f"title {view.title!r}" if view.title else "screen: busy marker"
    limit = tall["limit"]
    return Reading(
        **{**tall, "limit": _line_of(view, limit) if limit is not None else None},
        busy=busy,
        input_ready=bottom[1],
        input_empty=bottom[2],
        title=view.title,
        fingerprint=print_,
    )


class ScreenReader:
    """:func:`read` for one CLI's rules, run again only on what changed: each region's rules
    when its text changed, the fingerprint when a line did, the title's rule every time.

    A CLI waiting on a tool redraws its spinner many times a second and mostly leaves its
    lines as they were (codex: 96 % of its waiting redraws change only colours or the title).
    A whole reading costs ~0.5 ms, most of it the dialog and login rules over the 25-row region
    (alternations with no common prefix, tried at each position): read each time, that was the
    larger part of the CPU while codex waits. The same reading as :func:`read`'s, always."""

    def __init__(self, rules: ScreenRules) -> None:
        self.rules = rules
        self._bottom: tuple[str, _BottomFacts] | None = None
        self._tall: tuple[str, dict[str, str | None]] | None = None
        self._print: tuple[tuple[str, ...], str] | None = None

    def read(self, view: ScreenView) -> Reading:
        rules = self.rules
        bottom, tall = region(rules, view), dialog_region(rules, view)
        if self._bottom is None or self._bottom[0] != bottom:
            self._bottom = (bottom, _bottom_facts(rules, bottom))
        if self._tall is None or self._tall[0] != tall:
            self._tall = (tall, _tall_facts(rules, tall))
        if self._print is None or self._print[0] != view.lines:
            self._print = (view.lines, fingerprint(view.text()))
        return _reading(rules, view, self._bottom[1], self._tall[1], self._print[1])


def classify(reading: Reading, evidence: Evidence = Evidence()) -> tuple[AgentState, str]:
    """The state, strongest evidence first, with the evidence that decided it."""
    if not evidence.alive:
        return AgentState.EXITED, "process: the CLI is gone"
    if reading.login is not None:
        return AgentState.LOGIN, f"screen: {reading.login!r}"
    if reading.secret_entry is not None:  # never typed into, like any dialog
        return AgentState.DIALOG, f"screen: {reading.secret_entry!r}"
    if reading.loop_dialog is not None:  # answered by the machine itself, nothing else typed
        return AgentState.DIALOG, f"screen: {reading.loop_dialog!r}"
    if reading.exiting is not None:
        return AgentState.EXITING, f"screen: {reading.exiting!r}"
    if evidence.limits and reading.limit is not None:  # gemini's limit dialog: under a busy title
        return AgentState.LIMITED, f"screen: {reading.limit!r}"
    if evidence.wait_in_flight:
        return AgentState.TOOL, "MCP tap: wait_for_prompt in flight"
    if reading.busy is not None:
        return AgentState.BUSY, reading.busy
    if reading.dialog is not None:
        return AgentState.DIALOG, f"screen: {reading.dialog!r}"
    if reading.ready:
        box = "empty" if reading.input_empty else "with a draft"
        return AgentState.READY, f"screen: input prompt, {box} (title {reading.title!r})"
    return AgentState.STARTING, "no input prompt yet"


def detect(rules: ScreenRules, view: ScreenView, evidence: Evidence = Evidence()) -> tuple[str, str]:
    """One of ``STATES``, with the evidence that decided it."""
    state, why = classify(read(rules, view), evidence)
    return state.value, why


def _said(match: re.Match[str] | None) -> str | None:
    return match.group(0) if match else None


def _one_line(match: re.Match[str] | None) -> str | None:
    """A match spread over a box's wrapped lines, as one line (borders and runs of spaces gone)."""
    if match is None:
        return None
    return " ".join(match.group(0).replace("│", " ").split())


def _line_of(view: ScreenView, fragment: str) -> str:
    """The whole screen line holding ``fragment`` (a banner's reset time may follow it)."""
    for line in view.lines:
        if fragment[:40] in line:
            return line.strip(" │")
    return fragment
