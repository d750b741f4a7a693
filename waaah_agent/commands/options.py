"""The parser's side of the command line: arguments after `--`, `--resume [ID]`, choices and
ranges checked as the options are read, `--version`, the options several commands share (declared
once here) and the old spellings kept for one release. settings.py still resolves the environment."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from waaah_agent import adapters, settings

FORMATS = ("json", "text", "llm")
CLI_ARGS = "waaah.cli_args"  # ctx.meta key: what came after `--`
RESUME_ID = "waaah.resume_id"  # ctx.meta key: the session `--resume ID` names
# The parser's own exceptions (recent typer releases carry a copy of click of their own).
_UsageError: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_NoSuchOption: Any = sys.modules[_UsageError.__module__].NoSuchOption


class PassThrough(TyperCommand):
    """A command whose arguments after the first `--` go to the agent CLI unchanged. Before it,
    an unknown option (or a stray argument) is a usage error, as with any other command."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" in args:
            at = args.index("--")
            ctx.meta[CLI_ARGS] = args[at + 1 :]
            args = args[:at]
        else:
            ctx.meta[CLI_ARGS] = []
        # `--resume` is a flag that may name a session: the word after it (not an option) is the id.
        if "--resume" in args and any(p.name == "resume" for p in self.params):
            at = args.index("--resume") + 1
            if at < len(args) and not args[at].startswith("-"):
                ctx.meta[RESUME_ID] = args[at]
                args = args[:at] + args[at + 1 :]
        try:
            return list(super().parse_args(ctx, args))
        except _NoSuchOption as err:
            if err.option_name == "--json" and self._takes("fmt"):  # as `waaah sessions --json` is
                raise _NoSuchOption(
                    "--json", "No such option: --json (for JSON: --format json)", ctx=ctx
                ) from None
            raise
        except _UsageError as err:
            if err.message.startswith("Got unexpected extra argument") and self._takes("agent_file"):
                raise _UsageError(
                    f"{err.message}: the prompt is one argument (quote it), and an agent file goes with "
                    "--agent-file FILE",
                    ctx,
                ) from None
            raise

    def _takes(self, name: str) -> bool:
        return any(p.name == name for p in self.params)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- CLI_ARGS...]"]


def _cli_args(ctx: typer.Context) -> list[str]:
    return list(ctx.meta.get(CLI_ARGS, []))


# ----- validation of choices and ranges (the parser's; settings.py resolves the environment) -----


def _from_env(ctx: typer.Context, param: typer.CallbackParam) -> bool:
    source = ctx.get_parameter_source(param.name or "")
    return getattr(source, "name", "") == "ENVIRONMENT"


def _one_of(value: str, names: list[str]) -> str:
    if value not in names:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, names))}")
    return value


def _headless_names() -> list[str]:
    return sorted(n for n, a in adapters.registry().items() if a.headless)


def _interactive_cli(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """`waaah agent --start`: a CLI it can supervise. A headless-only one (codex) passes, for the
    start to say where it runs instead (runtime/supervise/session/opening.py, one line, exit 2)."""
    known = adapters.registry()
    if value is None or (value in known and not known[value].interactive):
        return value
    try:
        return _one_of(value, adapters.names())
    except typer.BadParameter as bad:  # named as the seed spells it, whichever spelling was given
        raise typer.BadParameter(bad.message, param_hint=f"'--start' (env var: '{param.envvar}')") from None


def _headless_one(value: str) -> str:
    known = adapters.registry()
    if value in known and known[value].headless is None:
        raise typer.BadParameter(
            f"{value} has no headless mode; choose one of: {', '.join(_headless_names())}"
        )
    return _one_of(value, _headless_names())


def _headless_cli(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """`waaah run --agent` (or its variable, which settings.py resolves: None here)."""
    if value is None:
        return None
    from_env = _from_env(ctx, param)
    try:
        _headless_one(value)
    except typer.BadParameter as bad:  # name the variable only when the value came from it
        where = f" (env var: '{param.envvar}')" if from_env else ""
        raise typer.BadParameter(bad.message, param_hint=f"'--agent'{where}") from None
    return None if from_env else value


def _headless_list(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """`--fallback A,B`: each one a headless CLI."""
    for name in (value or "").split(","):
        if name.strip():
            _headless_one(name.strip())
    return value


def _any_clis(ctx: typer.Context, param: typer.CallbackParam, value: list[str] | None) -> list[str] | None:
    for name in value or []:
        try:
            _one_of(name, adapters.all_names())
        except typer.BadParameter as bad:
            raise typer.BadParameter(bad.message, param_hint="'--agent'") from None
    return value


def _format(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    return _one_of(value, list(FORMATS))


def _log_format(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """`waaah agent --log-format`: text or json."""
    return _one_of(value, list(settings.LOG_FORMATS))


def _flag_only(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """An option whose variable is declared for --help: settings.py resolves the variable (the
    flag, else the variable, else the default), so here only a value given as a flag counts."""
    return None if _from_env(ctx, param) else value


def finite(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """A number option: nan, inf and -inf are refused (a comparison with nan is always false, so
    a range check alone lets it through: --timeout nan would be no timeout at all)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a number")
    return value


def _at_least(low: float, *, strict: bool) -> Callable[[typer.Context, typer.CallbackParam, Any], Any]:
    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        value = finite(ctx, param, value)
        if value is not None and (value <= low if strict else value < low):
            bound = f"more than {low:g}" if strict else f"{low:g} or more"
            raise typer.BadParameter(f"{value:g} is not {bound}")
        return value

    return check


POSITIVE = _at_least(0, strict=True)
NOT_NEGATIVE = _at_least(0, strict=False)
ALL_CLIS = f"[{'|'.join(adapters.all_names())}]"
HEADLESS_CLIS = f"[{'|'.join(_headless_names())}]"


def _version(value: bool) -> None:
    if value:
        try:
            version = metadata.version("waaah-agent")
        except metadata.PackageNotFoundError:
            version = "unknown"
        print(f"waaah {version}")
        raise typer.Exit()


# ----- options several commands share, declared once -----

WorkspaceOption = Annotated[
    Path | None,
    typer.Option("--workspace", help="The workspace (its git root). Default: the current directory."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print as JSON.")]
#: `--as NAME` where a workflow is named but not given to an agent (`waaah agent --as` also reads
#: its variable): .agent/workflows/NAME.md in the workspace, else the bundled one.
WorkflowOption = Annotated[
    str,
    typer.Option(
        "--as", metavar="NAME", help="The workflow (.agent/workflows/NAME.md, else the bundled one)."
    ),
]
SessionOption = Annotated[
    str | None, typer.Option("--session", help="The session (id or its start) when more than one runs here.")
]


def server_option(purpose: str) -> Any:
    """`--server URL`. Its variable is shown here and read in one place, settings.waaah_server."""
    return typer.Option(
        "--server", metavar="URL", show_default=False, help=f"{purpose}  [env var: {settings.SERVER_URL}]"
    )


def api_key_option(purpose: str) -> Any:
    """`--api-key KEY`, read with its variable in settings.waaah_server (never logged)."""
    return typer.Option("--api-key", metavar="KEY", help=f"{purpose}  [env var: {settings.API_KEY}]")


#: The CLI's option: `--start` (as `waaah agent` has it) and `--agent` are one option everywhere.
CLI_NAMES = ("--start", "--agent")


# ----- old spellings: they work for one release and say so in one line on stderr -----


def deprecated(old: str, new: str) -> None:
    """The one line an old spelling prints: on stderr, so `waaah run`'s stdout stays its JSON."""
    print(
        f"waaah: '{old}' is deprecated and will be removed in the next release; use '{new}'", file=sys.stderr
    )


def renamed(new: str) -> Callable[[typer.Context, typer.CallbackParam, Any], Any]:
    """The callback of an option kept under its old name (hidden from --help): given on the
    command line, it says once to use ``new`` instead."""

    def warn(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value and getattr(ctx.get_parameter_source(param.name or ""), "name", "") == "COMMANDLINE":
            deprecated(param.opts[0], new)
        return value

    return warn
