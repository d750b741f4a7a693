"""What the supervisor needs to know about one agent CLI.

An adapter is declarative where it can be: argv for a fresh start and a resume, the
environment, and the screen rules that tell (in bounded screen regions only) whether the
CLI sits at its input prompt, is busy, or shows a dialog. A new CLI joins by adding one
module to this package that defines ``ADAPTER``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from waaah_agent.core.screen import ScreenView


@dataclass(frozen=True)
class ScreenRules:
    """Regexes for one CLI version, each applied to a named region of the screen.

    ``input_ready`` / ``input_empty`` look at the bottom ``region_rows`` rows (input box and
    footer), ``busy`` at the same rows, ``title_*`` at the window title (OSC 0/2).
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
    # Dialogs and login screens are taller than the input box: search a bigger bottom region.
    dialog_rows: int = 25


@dataclass(frozen=True)
class Adapter:
    """One agent CLI."""

    name: str
    display_name: str
    binary: str
    install_hint: str
    rules: ScreenRules
    # What a user runs to log in, after "<name> requires login. Run: ".
    login_hint: str = ""
    # Seconds between the bracketed paste and the separate Enter (gemini needs >= 0.2 s).
    enter_delay: float = 0.5
    fresh_args: Callable[[str], list[str]] = field(default=lambda sid: [])
    resume_args: Callable[[str], list[str]] = field(default=lambda sid: [])
    # Where the CLI keeps the native transcript of ``session_id`` (to know resume can work).
    transcript: Callable[[Mapping[str, str], Path, str], Path | None] = field(
        default=lambda env, ws, sid: None
    )
    extra_env: dict[str, str] = field(default_factory=dict)
    # Variables removed from the CLI's environment (names, or prefixes ending in "_").
    drop_env: tuple[str, ...] = ()
    # From the credential state alone (env, credential files): is a login needed first?
    needs_login: Callable[[Mapping[str, str]], bool] = field(default=lambda env: False)
    # How this CLI is given the waaah MCP server: "gemini" (user settings), "claude"
    # (a per-run --mcp-config file), or None (it has no MCP).
    mcp: str | None = None
    simulated: bool = False

    def argv(self, binary: str, session_id: str, resume: bool, extra: Sequence[str]) -> list[str]:
        args = self.resume_args(session_id) if resume else self.fresh_args(session_id)
        return [binary, *args, *extra]

    def region(self, view: ScreenView) -> str:
        return "\n".join(view.bottom(self.rules.region_rows))

    def dialog_region(self, view: ScreenView) -> str:
        return "\n".join(view.bottom(self.rules.dialog_rows))

    def shows_dialog(self, view: ScreenView) -> re.Match[str] | None:
        return self.rules.dialog.search(self.dialog_region(view)) if self.rules.dialog else None

    def shows_login(self, view: ScreenView) -> re.Match[str] | None:
        return self.rules.login.search(self.dialog_region(view)) if self.rules.login else None

    def shows_limit(self, view: ScreenView) -> re.Match[str] | None:
        return self.rules.limit.search(self.dialog_region(view)) if self.rules.limit else None

    def shows_exit(self, view: ScreenView) -> re.Match[str] | None:
        return self.rules.exited.search(self.dialog_region(view)) if self.rules.exited else None

    def is_busy(self, view: ScreenView) -> bool:
        rules = self.rules
        if rules.title_busy is not None and rules.title_busy.search(view.title):
            return True
        return bool(rules.busy.search(self.region(view)))

    def is_ready(self, view: ScreenView) -> bool:
        """At the input prompt and not working (the input box may hold a draft)."""
        if self.is_busy(view):
            return False
        if self.shows_dialog(view):
            return False
        return bool(self.rules.input_ready.search(self.region(view)))

    def input_is_empty(self, view: ScreenView) -> bool:
        return bool(self.rules.input_empty.search(self.region(view)))
