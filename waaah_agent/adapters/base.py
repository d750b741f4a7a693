"""What the supervisor and `waaah run` need to know about one agent CLI.

An adapter is declarative where it can be: argv for a fresh start and a resume, the
environment, and the screen rules that tell (in bounded screen regions only) whether the
CLI sits at its input prompt, is busy, or shows a dialog. Everything that differs between
CLIs is a field here, an object or a function, never a name looked up elsewhere: how the CLI
is given the waaah MCP server (``mcp``) and hooks (``hooks``), how its transcript's tokens are
counted (``tokens``), which parser reads its headless stream (``Headless.parser``). Each CLI
is one package here (``adapters/<cli>/``: its rules in ``__init__``, its stream in ``stream.py``,
its transcript in ``transcript.py``) that defines ``ADAPTER``; the runtime carries out what it
declares, and it imports nothing of ``runtime/`` (docs/adding-a-cli.md).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from waaah_agent import settings
from waaah_agent.core.mcp.givers import HooksPerRun, McpShape
from waaah_agent.core.oneshot.run_inputs import CliInputs
from waaah_agent.core.oneshot.streams import StreamParser
from waaah_agent.core.supervise.detect import ScreenRules
from waaah_agent.core.tokens import UsageCounter
from waaah_agent.core.versions import ReleaseSupport

__all__ = ["HEADLESS_ONLY_RULES", "Adapter", "Headless", "ScreenRules"]


@dataclass(frozen=True)
class Headless:
    """How `waaah run` drives the CLI: one prompt, a JSON stream on stdout, then exit.

    ``argv(prompt, session_id, resume, model)`` returns the arguments after the binary;
    ``prompt`` is None when the prompt goes to stdin instead (long prompts never go through
    argv). ``session_id`` is ours for a fresh run when ``own_session_ids`` (the CLI accepts
    it), the CLI's own when resuming, "" for a fresh run of a CLI that picks its own id."""

    argv: Callable[[str | None, str, bool, str | None], list[str]]
    # A new parser of the CLI's JSON stream, one per run (core/oneshot/streams.py; what each
    # event means: adapters/<cli>/stream.py).
    parser: Callable[[], StreamParser]
    own_session_ids: bool = True
    # Always give the prompt on stdin (argv gets None): for a CLI that alters prompts in argv.
    stdin_prompt: bool = False
    # Prompt size figures, permission and temperature flags, skills (core/run_inputs.py).
    inputs: CliInputs | None = None


CHECKOUT = Path(__file__).resolve().parents[2]  # the source checkout, for an editable install


def install_command(name: str, package: str, version: str) -> str:
    """How to install the release of a CLI that waaah is tested with, the project's own way:
    the checkout's script, into ``.cache/clis`` (never globally); without the checkout (an
    installed package), npm into a folder of the user's that ``WAAAH_CLI_DIR`` then names."""
    script = CHECKOUT / "scripts" / "install_clis.sh"
    if script.is_file():
        where = CHECKOUT / ".cache" / "clis"
        return f"{shlex.quote(str(script))} {name} (the pinned {version}, into {where}; make run AGENT={name} does it too)"
    folder = "~/.local/share/waaah-agent/clis"
    return (
        f"npm install --prefix {folder} {package}@{version}, then set "
        f"{settings.CLI_DIR}={folder}/node_modules/.bin"
    )


#: Screen rules that never match, for CLIs that only run headless (``interactive=False``).
_NEVER = re.compile(r"(?!)")
HEADLESS_ONLY_RULES = ScreenRules(input_ready=_NEVER, input_empty=_NEVER, busy=_NEVER)


def env_names_in(
    paths: Sequence[Path], pattern: re.Pattern[str], clean: Callable[[str], str] = lambda text: text
) -> tuple[str, ...]:
    """The variable names ``pattern`` (one group) finds in these config files (each ``clean``-ed
    first: its comments removed); unreadable ones are skipped."""
    from waaah_agent.safe_read import read_capped  # I/O, only when a run asks

    names: list[str] = []
    for path in paths:
        try:
            text = read_capped(path, 1024 * 1024).decode("utf-8", "replace")
        except OSError:
            continue
        names += pattern.findall(clean(text))
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Adapter:
    """One agent CLI."""

    name: str
    display_name: str
    binary: str
    install_hint: str
    rules: ScreenRules
    # The CLI version the screen rules were recorded from (tests/fixtures/screens/<name>-<v>).
    tested_version: str = ""
    # Keys that take the CLI's own usage-limit screen back to work once the limit has reset
    # (gemini: Enter picks its default "Keep trying"); empty when the banner is not modal.
    limit_resume_keys: bytes = b""
    # Keys that answer the CLI's own loop-detector question by turning it off for the rest of
    # the CLI's session (gemini: "2", "Disable loop detection for this session"): identical
    # wait_for_prompt calls are what an agent waiting in its loop makes.
    loop_dialog_keys: bytes = b""
    # What a user runs to log in, after "<name> requires login. Run: ".
    login_hint: str = ""
    # What works instead when the CLI's login failed for good (``ScreenRules.login_refused``).
    refused_hint: str = ""
    # What its errors say when its login refused the account for good (`waaah run` then adds
    # ``refused_hint`` to the failure's message); None: it has no such error.
    account_refused: re.Pattern[str] | None = None
    # Seconds between the bracketed paste and the separate Enter (gemini needs >= 0.2 s).
    enter_delay: float = 0.5
    fresh_args: Callable[[str], list[str]] = field(default=lambda sid: [])
    resume_args: Callable[[str], list[str]] = field(default=lambda sid: [])
    # Where the CLI keeps the native transcript of ``session_id`` (to know resume can work).
    transcript: Callable[[Mapping[str, str], Path, str], Path | None] = field(
        default=lambda env, ws, sid: None
    )
    # The files in which the CLI keeps session ``session_id``: kept before each native resume
    # and put back when the CLI removed or emptied them (runtime/session_keep.py). None: it
    # keeps no files of its own per session (opencode's one database holds all of them).
    session_files: Callable[[Mapping[str, str], Path, str], list[Path]] | None = None
    # When the usage limit the CLI hit resets, as its own files state it (codex's session file:
    # ``rate_limits.resets_at``): (env, workspace, session id) -> aware time, None: not stated.
    limit_reset: Callable[[Mapping[str, str], Path, str], datetime | None] | None = None
    # The compactions its transcript's lines mark, by key (adapters/<cli>/transcript.py); None: not read.
    compactions: Callable[[Iterable[str]], set[str]] | None = None
    # Whether a session file's lines hold a conversation (adapters/<cli>/transcript.py); None: unknown.
    holds_conversation: Callable[[Iterable[str]], bool | None] = field(default=lambda lines: None)
    extra_env: dict[str, str] = field(default_factory=dict)
    # Variables removed from the CLI's environment (names, or prefixes ending in "_").
    drop_env: tuple[str, ...] = ()
    # Its provider's variables and its own settings variables (names, or prefixes ending in
    # "_"): `waaah run` passes these to it, besides the system essentials (runtime/cli_env.py).
    provider_env: tuple[str, ...] = ()
    # More of those, named by the CLI's own config files (codex's env_key, opencode's {env:NAME}).
    config_env: Callable[[Mapping[str, str], Path], tuple[str, ...]] = field(default=lambda env, ws: ())
    # What the workspace's config files name and are not given (config_env leaves them out: a
    # repository's file may name only its provider's keys); `waaah run` says so in one line.
    config_env_refused: Callable[[Mapping[str, str], Path], tuple[str, ...]] = field(
        default=lambda env, ws: ()
    )
    # From the credential state alone (env, credential files): is a login needed first?
    needs_login: Callable[[Mapping[str, str]], bool] = field(default=lambda env: False)
    # How this CLI is given the waaah MCP server, as data (core/mcp/givers.py: a home of its own
    # per run, a file per run named by a flag, or arguments and variables only) that
    # runtime/mcp/givers.py carries out; None: it gets no MCP server from us. The user's own
    # files are written only by `waaah mcp install`.
    mcp: McpShape | None = None
    # Per-run hooks that report the CLI's events to the session inbox; None: it has none.
    hooks: HooksPerRun | None = None
    # A new token counter for the CLI's transcript (core/tokens.py); None: no known format.
    tokens: Callable[[], UsageCounter] | None = None
    # The model's thinking in the last turn of its transcript's lines, for `waaah run` when the
    # stream carries none; None: its stream carries the reasoning.
    reasoning: Callable[[Iterable[str]], str] | None = None
    # `waaah run`'s bundled aliases for --model (e.g. fast, smart, pro -> models the pinned
    # release lists itself); empty: none (core/oneshot/models.py).
    model_aliases: Mapping[str, str] = field(default_factory=dict)
    # (model that failed, what the CLI said) -> the smaller model its one model retry takes after
    # a capacity error, else None; None: no such retry.
    smaller_model: Callable[[str, str], str | None] | None = None
    # Its headless stream reports what a run cost (else --max-cost needs a price table).
    reports_cost: bool = False
    simulated: bool = False
    # One-shot JSON-stream mode for `waaah run` (None: the CLI has none).
    headless: Headless | None = None
    # False for CLIs that `waaah agent` cannot supervise yet (no recorded screen rules).
    interactive: bool = True
    # It draws nothing until the terminal answers its queries (cursor position, attributes,
    # colours): with no terminal attached, the supervisor answers them (core/termanswers.py).
    answers_queries: bool = False
    # Its releases: the pinned one, the oldest supported, the options waaah needs (core/versions.py);
    # None: not asked (the simulated agent, the headless-only CLIs).
    releases: ReleaseSupport | None = None
    # For a CLI (or a release of it) that picks its own session id (fresh_args name none, or the
    # release lacks ``releases.own_id_option``): (env, workspace, started) -> the id of the
    # session it began in ``workspace`` since ``started`` (epoch seconds), None while there is
    # none; resume_args then get that id.
    own_session: Callable[[Mapping[str, str], Path, float], str | None] | None = None

    def refused_login(self) -> tuple[re.Pattern[str], str] | None:
        """What its errors say when its login refused the account for good, and what works instead."""
        return (self.account_refused, self.refused_hint) if self.account_refused is not None else None

    def argv(
        self, binary: str, session_id: str, resume: bool, extra: Sequence[str], own_ids: bool = True
    ) -> list[str]:
        """The command line; a fresh start of a release that takes no id of ours gets none."""
        fresh = self.fresh_args(session_id) if own_ids else []
        return [binary, *(self.resume_args(session_id) if resume else fresh), *extra]
