"""`waaah run`'s options for callers of the older wrappers (--allowed-tools, --env, --ticket,
--verbose/--debug, --no-fallback, --llm-max-lines), and the envelope a usage error prints on
stdout before click's own lines on stderr."""

from __future__ import annotations

import os
import re
import sys
from typing import Annotated, Any

import typer

from waaah_agent import settings
from waaah_agent.commands.options import PassThrough, _headless_list, _UsageError
from waaah_agent.core import failures as F
from waaah_agent.core.oneshot import outputs, present
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.secrets.secretenv import known_secrets

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_pairs(ctx: typer.Context, param: typer.CallbackParam, value: list[str] | None) -> list[str] | None:
    for pair in value or []:
        name, sep, _ = pair.partition("=")
        if not sep or not _ENV_NAME.match(name):
            raise typer.BadParameter(
                f"{pair.split('=')[0][:60]!r}: give KEY=VALUE (KEY of letters, digits, _)"
            )
    return value


def _fallback(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """`--fallback A,B`, or "none" (no fallback at all, not even the default chain)."""
    if value is not None and value.strip().lower() == "none":
        return value
    return _headless_list(ctx, param, value)


def no_fallback(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "none"


def env_dict(pairs: list[str] | None) -> dict[str, str]:
    """--env KEY=VAL, in order (a later one wins)."""
    return dict(pair.split("=", 1) for pair in pairs or [])


FallbackOption = Annotated[
    str | None,
    typer.Option(
        "--fallback",
        envvar=settings.FALLBACK,
        callback=_fallback,
        metavar="CLI[,CLI...]|none",
        help="CLIs to try next, in order (none: no fallback). Without it, the others of gemini, "
        "claude, codex usable now follow (installed, logged in, breaker closed, no usage limit). "
        "Example: --fallback claude,gemini",
    ),
]
NoFallbackOption = Annotated[
    bool,
    typer.Option("--no-fallback", help="Only the first CLI: no fallback, not even the default chain."),
]
AllowedToolsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-tools",
        metavar="TOOL[,TOOL...]",
        help="Tools the CLI may run without asking, passed the way each CLI takes a list (claude "
        "and gemini --allowed-tools; codex and opencode take none: a warning). Repeatable. "
        'Example: --allowed-tools "Read,Bash(git log:*)"',
    ),
]
EnvOption = Annotated[
    list[str] | None,
    typer.Option(
        "--env",
        metavar="KEY=VALUE",
        callback=_env_pairs,
        help="One more variable for the CLI (repeatable; masked in logs when it looks secret). "
        "Example: --env PROJECT_ID=42",
    ),
]
TicketOption = Annotated[
    str | None,
    typer.Option(
        "--ticket",
        envvar=settings.TICKET_ID,
        metavar="ID",
        help=f"Name the run's log after this id (<ID>_<uuid>.jsonl; else the variable, else "
        f"{settings.OLD_TICKET_ID}). Example: --ticket PROJ-123",
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose", "--debug", help="Diagnostics on stderr: each run log record as it is written (masked)."
    ),
]
LlmMaxLinesOption = Annotated[
    int,
    typer.Option(
        "--llm-max-lines",
        min=1,
        metavar="N",
        help=f"--format llm: answers over N lines are cut to a head and a tail (default "
        f"{present.LLM_MAX_LINES}). Example: --llm-max-lines 80",
    ),
]


class RunCommand(PassThrough):
    """`waaah run`: a usage error (an unknown option, a bad value) prints the invalid_input
    envelope on stdout, then click's usage lines on stderr, exit 2."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except _UsageError as err:
            fmt, stream = _format_in(args)
            usage_envelope(err.format_message(), fmt, stream)
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as err:
            usage_envelope(
                err.format_message(), ctx.params.get("fmt") or "json", bool(ctx.params.get("stream"))
            )
            raise


def _format_in(args: list[str]) -> tuple[str, bool]:
    """The --format and --stream of a command line that did not parse (json when unknown)."""
    fmt, stream = "json", False
    before = args[: args.index("--")] if "--" in args else args
    for at, arg in enumerate(before):
        if arg == "--format" and at + 1 < len(before):
            fmt = before[at + 1]
        elif arg.startswith("--format="):
            fmt = arg.split("=", 1)[1]
        stream = stream or arg == "--stream"
    return (fmt if fmt in ("json", "text", "llm") else "json"), stream


def usage_envelope(message: str, fmt: str, stream: bool) -> None:
    """The envelope of a command line `waaah run` refused, on stdout (none for --format text)."""
    from waaah_agent.runtime.oneshot.run_io import RunOptions, show_failure

    envelope = outputs.failure_envelope(F.INVALID_INPUT, message, 2, version=present.ENVELOPE_VERSION)
    opts = RunOptions(format=fmt, stream=stream)
    out = sys.stdout
    redact = _redactor()
    try:
        show_failure(envelope, opts, out, redact)
    except OSError:
        pass  # a closed stdout: the usage lines still go to stderr


def _redactor() -> Redactor:
    return Redactor(known_secrets(settings.with_private(os.environ)))
