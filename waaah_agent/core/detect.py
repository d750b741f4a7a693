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

from waaah_agent.core.screen import ScreenView

STATES = ("starting", "ready", "busy", "tool", "dialog", "login", "limited", "exiting", "exited")


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


def is_busy(rules: ScreenRules, view: ScreenView) -> bool:
    if find(rules.title_busy, view.title):
        return True
    return bool(rules.busy.search(region(rules, view)))


def is_ready(rules: ScreenRules, view: ScreenView) -> bool:
    """At the input prompt and not working (the input box may hold a draft)."""
    if is_busy(rules, view) or find(rules.dialog, dialog_region(rules, view)):
        return False
    return bool(rules.input_ready.search(region(rules, view)))


def input_is_empty(rules: ScreenRules, view: ScreenView) -> bool:
    return bool(rules.input_empty.search(region(rules, view)))


def detect(rules: ScreenRules, view: ScreenView, evidence: Evidence = Evidence()) -> tuple[str, str]:
    """One of ``STATES``, with the evidence that decided it."""
    if not evidence.alive:
        return "exited", "process: the CLI is gone"
    tall = dialog_region(rules, view)
    if m := find(rules.login, tall):
        return "login", f"screen: {m.group(0)!r}"
    if m := find(rules.exited, tall):
        return "exiting", f"screen: {m.group(0)!r}"
    if evidence.limits and (m := find(rules.limit, tall)):  # gemini's limit dialog: under a busy title
        return "limited", f"screen: {m.group(0)!r}"
    if evidence.wait_in_flight:
        return "tool", "MCP tap: wait_for_prompt in flight"
    if is_busy(rules, view):
        return "busy", f"title {view.title!r}" if view.title else "screen: busy marker"
    if m := find(rules.dialog, tall):
        return "dialog", f"screen: {m.group(0)!r}"
    if is_ready(rules, view):
        box = "empty" if input_is_empty(rules, view) else "with a draft"
        return "ready", f"screen: input prompt, {box} (title {view.title!r})"
    return "starting", "no input prompt yet"
