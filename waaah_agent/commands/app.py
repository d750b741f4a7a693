"""`waaah`: the command line. Parses, calls one runtime entry, maps errors to exit codes."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from waaah_agent import adapters, settings
from waaah_agent.commands.config import config
from waaah_agent.commands.control import attach, pause, resume, send, stop, tail, unpause
from waaah_agent.commands.mcp import mcp_app, mcp_proxy
from waaah_agent.commands.options import (
    ALL_CLIS,
    CLI_NAMES,
    NOT_NEGATIVE,
    POSITIVE,
    RESUME_ID,
    JsonOption,
    PassThrough,
    WorkflowOption,
    WorkspaceOption,
    _any_clis,
    _cli_args,
    _interactive_cli,
    _log_format,
    _version,
    api_key_option,
    server_option,
)
from waaah_agent.commands.reading import replay, sessions, status
from waaah_agent.commands.report import report
from waaah_agent.commands.route import quota, route
from waaah_agent.commands.run import run
from waaah_agent.commands.run_callers import RunCommand
from waaah_agent.commands.running import _exit, _masked
from waaah_agent.commands.service import service_app
from waaah_agent.errors import RUN_EXIT_CODES, WaaahError, exit_codes, table

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help and the usual usage errors, also when piped
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_TABLE = table(exit_codes(settings.RESTART_BUDGET, settings.RESTART_WINDOW), "\n\n")
RUN_EXITS = table(RUN_EXIT_CODES, "; ")


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Keep an AI coding CLI working inside the WAAAH loop, in a supervised terminal."""


@app.command(cls=PassThrough, epilog=f"Exit codes:\n\n{EXIT_TABLE}")
def agent(
    ctx: typer.Context,
    start: Annotated[
        str,
        typer.Option(
            *CLI_NAMES,
            envvar=settings.START,
            callback=_interactive_cli,
            metavar=f"[{'|'.join(adapters.names())}]",
            help="The agent CLI to run ('simulated' is a demo agent with no model; the "
            "headless-only ones run with waaah run). Example: --start=gemini",
        ),
    ],
    workflow: Annotated[
        str,
        typer.Option(
            "--as",
            envvar=settings.WORKFLOW,
            help="The workflow to give the agent: .agent/workflows/NAME.md in the workspace, "
            f"else the bundled one. Example: --as={settings.DEFAULT_WORKFLOW}",
        ),
    ] = settings.DEFAULT_WORKFLOW,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Carry on a session of this workspace and agent: the one named (--resume ID, "
            "as `waaah sessions` lists it), else the newest (same conversation, through the CLI's "
            "own resume), with the options it was started with unless given again. "
            "Example: waaah agent --start=claude --resume",
        ),
    ] = False,
    resume_or_start: Annotated[
        bool,
        typer.Option(
            "--resume-or-start",
            help="--resume when this agent has a session here, else a new one (what `waaah service` runs).",
        ),
    ] = False,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            envvar=settings.WORKSPACE,
            help="Run the agent here (its git root). Default: the current directory. "
            "Example: --workspace ~/src/project",
        ),
    ] = None,
    stop_grace: Annotated[
        float,
        typer.Option(
            "--stop-grace",
            callback=NOT_NEGATIVE,
            metavar="SECONDS>=0",
            help="Seconds the agent gets after SIGTERM before SIGKILL. Example: --stop-grace 10",
        ),
    ] = settings.STOP_GRACE,
    server: Annotated[
        str | None,
        server_option(
            "WAAAH server URL (else the variable, else the CLI's existing waaah entry; "
            f"asked on a terminal). Example: --server {settings.DEFAULT_SERVER_URL}"
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        api_key_option("WAAAH API key (else the variable). Never logged."),
    ] = None,
    no_mcp: Annotated[
        bool, typer.Option("--no-mcp", help="Do not configure the waaah MCP server for the CLI.")
    ] = False,
    heartbeat: Annotated[
        float,
        typer.Option(
            "--heartbeat",
            envvar="WAAAH_HEARTBEAT",
            callback=POSITIVE,
            metavar="SECONDS>0",
            help="Seconds idle at the prompt before a heartbeat prompt. Example: --heartbeat 300",
        ),
    ] = settings.HEARTBEAT,
    stall_timeout: Annotated[
        float,
        typer.Option(
            "--stall-timeout",
            envvar="WAAAH_STALL_TIMEOUT",
            callback=POSITIVE,
            metavar="SECONDS>0",
            help="Seconds busy with nothing changing before Esc (then a restart if still stuck). Example: --stall-timeout 1800",
        ),
    ] = settings.STALL_TIMEOUT,
    restart_budget: Annotated[
        int,
        typer.Option(
            "--restart-budget",
            callback=NOT_NEGATIVE,
            metavar="N>=0",
            help=f"Restarts allowed per {settings.minutes(settings.RESTART_WINDOW)} before giving up "
            "(0: never restart, stop at the first crash or stall). Example: --restart-budget 10",
        ),
    ] = settings.RESTART_BUDGET,
    no_nudge: Annotated[
        bool,
        typer.Option(
            "--no-nudge", help="Never type continue or heartbeat prompts (crash restarts still happen)."
        ),
    ] = False,
    record_budget: Annotated[
        int,
        typer.Option(
            "--record-budget",
            envvar=settings.RECORD_BUDGET_MB,
            callback=POSITIVE,
            metavar="MB>0",
            help="Disk for the session's logs and screen record together (rolled parts are compressed; "
            "the oldest go beyond it). Example: --record-budget 500",
        ),
    ] = settings.RECORD_BUDGET,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            envvar=settings.MAX_TOKENS,
            min=1,
            metavar="N",
            help="Token budget of the session (input + output, from the CLI's own transcript, read every "
            "minute): once reached, no more nudges; the agent finishes the task in hand, the session is "
            "saved, an alert goes out and waaah exits with 17. Example: --max-tokens 5000000",
        ),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            envvar=settings.MAX_COST,
            min=0.000001,
            max=1_000_000,  # and never inf: the envelope stays JSON
            metavar="USD",
            help="Cost budget of the session in US dollars, from the transcript's tokens per model and "
            "your price table (prices.toml in waaah's config folder, or WAAAH_PRICES; see README "
            "Budgets); reached, it ends the session as --max-tokens does. Example: --max-cost 20",
        ),
    ] = None,
    notify: Annotated[
        list[str] | None,
        typer.Option(
            "--notify",
            metavar="URL",
            help="Send alerts here (repeatable; any apprise URL: ntfy://, slack://, tgram://, mailto://, "
            f"json://...; {settings.NOTIFY} adds more, space-separated): gave up, needs a login, a "
            "usage-limit wait starts and ends, evicted, stalled. A URL given here is in the process "
            f"list (ps) for anyone on the machine: prefer {settings.NOTIFY} or notify in the config "
            "file (waaah config). Example: --notify ntfys://ntfy.sh/my-topic",
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            envvar=settings.METRICS_PORT,
            min=0,
            max=65535,
            metavar="PORT",
            help="Serve /healthz, /readyz and /metrics (Prometheus) on this port (0: any free one, "
            "named in the events); off by default. Example: --metrics-port 9464",
        ),
    ] = None,
    metrics_host: Annotated[
        str,
        typer.Option(
            "--metrics-host",
            envvar=settings.METRICS_HOST,
            help="The address --metrics-port listens on (0.0.0.0 in a container). Example: --metrics-host 0.0.0.0",
        ),
    ] = settings.METRICS_HOST_DEFAULT,
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            envvar=settings.LOG_FORMAT,
            metavar="[text|json]",
            callback=_log_format,
            help="Headless: text (a line a person reads per event) or json (every event as one JSON "
            "object on stderr, as in events.jsonl, secrets masked). Example: --log-format json",
        ),
    ] = "text",
) -> None:
    """Supervise an agent CLI and keep it in its workflow.

    Runs the CLI in a supervised terminal and gives it its workflow.

    Anything after `--` goes to the CLI unchanged, e.g.
    `waaah agent --start=gemini --as=waaah-orc -- --model gemini-2.5-pro`.
    Ctrl+C opens a small menu: continue, save and exit, or pass Ctrl+C to the agent.
    """
    from waaah_agent.core.supervise.backoff import BackoffConfig
    from waaah_agent.core.supervise.policy import PolicyConfig
    from waaah_agent.runtime.supervise.session.options import AgentOptions
    from waaah_agent.runtime.supervise.session.start import default_console, environment, run_agent

    resume_id = str(ctx.meta.get(RESUME_ID, "")) if resume else ""
    extra = _cli_args(ctx)

    def go() -> int:
        env = environment()
        from_env = settings.agent_env(env)
        options = AgentOptions(
            start=start,
            workflow=workflow,
            resume=resume,
            resume_or_start=resume_or_start,
            resume_id=resume_id,
            given=frozenset(
                n for n in ctx.params if getattr(ctx.get_parameter_source(n), "name", "") == "COMMANDLINE"
            )
            | ({"extra_args"} if extra else set()),
            workspace=workspace,
            extra_args=extra,
            stop_grace=stop_grace,
            server=server,
            api_key=api_key,
            no_mcp=no_mcp,
            server_check_every=from_env.server_check_every,
            limit_margin=from_env.limit_margin,
            limit_default=from_env.limit_default,
            policy=None
            if no_nudge
            else PolicyConfig(
                heartbeat=heartbeat,
                stall_timeout=stall_timeout,
                stall_grace=min(settings.STALL_GRACE, stall_timeout),
            ),
            backoff=BackoffConfig(budget=restart_budget, base=from_env.restart_base),
            record_budget=record_budget * 1024 * 1024,
            notify=settings.notify_urls(notify, env),
            max_tokens=max_tokens,
            max_cost=max_cost,
            tokens_every=from_env.tokens_every,
            log_roll=from_env.log_roll,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            log_format=log_format,
        )
        return run_agent(options, env, default_console(log_format))

    _exit(go)


@app.command()
def doctor(
    agent: Annotated[
        list[str] | None,
        typer.Option(
            *reversed(CLI_NAMES),
            callback=_any_clis,
            metavar=ALL_CLIS,
            help="Check only this CLI (repeatable; also the headless-only ones, e.g. codex). "
            "Example: --agent gemini",
        ),
    ] = None,
    workflow: WorkflowOption = settings.DEFAULT_WORKFLOW,
    workspace: WorkspaceOption = None,
    server: Annotated[
        str | None,
        server_option("WAAAH server URL to check."),
    ] = None,
    api_key: Annotated[
        str | None,
        api_key_option("WAAAH API key to try."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check the set-up and say what to fix.

    CLIs and versions, login, MCP entry, server and key, git, workflow, .waaah/.

    Exit code 1 when any check fails. Example: waaah doctor --agent gemini --server http://localhost:3456
    """
    from waaah_agent.runtime.night import doctor as doc

    checks = doc.run_checks(
        doc.default_env(), (workspace or Path.cwd()).resolve(), workflow, agent, server, api_key
    )
    if as_json:
        from waaah_agent.runtime.night.doctor_clis import doctor_json

        print(_masked(doctor_json(checks, agent, (workspace or Path.cwd()).resolve()), api_key))
    else:
        for check in checks:
            print(_masked(check.line(), api_key))
    raise typer.Exit(doc.exit_code(checks))


app.command(cls=RunCommand, epilog=f"Exit codes: {RUN_EXITS}")(run)
app.command()(sessions)
app.command()(status)
app.command()(replay)
app.command()(report)
for _control in (send, pause, unpause, stop, tail, attach):
    app.command()(_control)
app.command(hidden=True)(resume)  # the old name of unpause, for one release
app.command()(config)
app.add_typer(service_app)
app.add_typer(mcp_app)
app.command()(route)
app.command()(quota)


app.command("mcp-proxy")(mcp_proxy)


def main() -> None:
    logging.basicConfig(level=settings.log_level(os.environ), format="waaah: %(message)s")
    from waaah_agent.runtime import config_file

    try:  # the config file's keys become the variables not set: a flag or a variable wins
        config_file.apply(os.environ)
    except WaaahError as err:
        from waaah_agent.core.printable import printable

        print(f"waaah: {printable(str(err))}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    settings.take_private(os.environ)  # alert URLs: ours alone, never a child's
    app()


if __name__ == "__main__":
    main()
