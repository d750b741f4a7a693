"""`waaah`: the command line. Parses, calls one runtime entry, maps errors to exit codes."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from waaah_agent import adapters, settings
from waaah_agent.errors import RUN_EXIT_CODES, ExitCode, UsageError, WaaahError, exit_codes, table

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Keep an AI coding CLI working inside the WAAAH loop, in a supervised terminal.",
)

EXIT_TABLE = table(exit_codes(settings.RESTART_BUDGET, settings.RESTART_WINDOW), "\n\n")
RUN_EXITS = table(RUN_EXIT_CODES, "; ")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog=f"Exit codes:\n\n{EXIT_TABLE}",
)
def agent(
    ctx: typer.Context,
    start: Annotated[
        str,
        typer.Option(
            "--start",
            help=f"The agent CLI to run: {', '.join(adapters.names())} "
            "('simulated' is a demo agent with no model). Example: --start=gemini",
        ),
    ],
    workflow: Annotated[
        str,
        typer.Option(
            "--as",
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
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            help="Run the agent here (its git root). Default: the current directory. "
            "Example: --workspace ~/src/project",
        ),
    ] = None,
    stop_grace: Annotated[
        float,
        typer.Option("--stop-grace", help="Seconds the agent gets after SIGTERM before SIGKILL."),
    ] = settings.STOP_GRACE,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            help=f"WAAAH server URL (else {settings.SERVER_URL}, else the CLI's existing waaah entry; "
            f"asked on a terminal). Example: --server {settings.DEFAULT_SERVER_URL}",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", help=f"WAAAH API key (else {settings.API_KEY}). Never logged."),
    ] = None,
    no_mcp: Annotated[
        bool, typer.Option("--no-mcp", help="Do not configure the waaah MCP server for the CLI.")
    ] = False,
    heartbeat: Annotated[
        float,
        typer.Option(
            "--heartbeat",
            help="Seconds idle at the prompt before a heartbeat prompt. Example: --heartbeat 300",
        ),
    ] = settings.HEARTBEAT,
    stall_timeout: Annotated[
        float,
        typer.Option(
            "--stall-timeout",
            help="Seconds busy with nothing changing before Esc (then a restart if still stuck). Example: --stall-timeout 1800",
        ),
    ] = settings.STALL_TIMEOUT,
    restart_budget: Annotated[
        int,
        typer.Option(
            "--restart-budget",
            help=f"Restarts allowed per {settings.minutes(settings.RESTART_WINDOW)} before giving up.",
        ),
    ] = settings.RESTART_BUDGET,
    no_nudge: Annotated[
        bool,
        typer.Option(
            "--no-nudge", help="Never type continue or heartbeat prompts (crash restarts still happen)."
        ),
    ] = False,
) -> None:
    """Run an agent CLI in a supervised terminal and give it its workflow.

    Anything after `--` goes to the CLI unchanged, e.g.
    `waaah agent --start=gemini --as=waaah-orc -- --model gemini-2.5-pro`.
    Ctrl+C opens a small menu: continue, save and exit, or pass Ctrl+C to the agent.
    """
    from waaah_agent.core.backoff import BackoffConfig
    from waaah_agent.core.policy import PolicyConfig
    from waaah_agent.runtime.session import AgentOptions, default_console, environment, run_agent

    resume_id = _resume_id(sys.argv[1:]) if resume else ""
    extra = [a for a in ctx.args if a != "--"]
    if resume_id in extra:
        extra.remove(resume_id)

    def go() -> int:
        env = environment()
        from_env = settings.agent_env(env)
        options = AgentOptions(
            start=start,
            workflow=workflow,
            resume=resume,
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
        )
        return run_agent(options, env, default_console())

    _exit(go)


def _resume_id(argv: list[str]) -> str:
    """The session ``--resume ID`` names ("" for the newest): the flag takes no value, so the
    word after it (before any ``--``, not an option) is the id."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    if "--resume" not in words:
        return ""
    at = words.index("--resume") + 1
    return words[at] if at < len(words) and not words[at].startswith("-") else ""


@app.command()
def doctor(
    agent: Annotated[
        list[str] | None,
        typer.Option(
            "--agent",
            help="Check only this CLI (repeatable; also the headless-only ones, e.g. codex). "
            "Example: --agent gemini",
        ),
    ] = None,
    workflow: Annotated[
        str, typer.Option("--as", help="The workflow to look for.")
    ] = settings.DEFAULT_WORKFLOW,
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
    server: Annotated[str | None, typer.Option("--server", help="WAAAH server URL to check.")] = None,
    api_key: Annotated[str | None, typer.Option("--api-key", help="WAAAH API key to try.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check the set-up: CLIs and versions, login, MCP entry, server and key, git, workflow, .waaah/.

    Exit code 1 when any check fails. Example: waaah doctor --agent gemini --server http://localhost:3456
    """
    from waaah_agent.runtime import doctor as doc

    for name in agent or []:
        if name not in adapters.registry():
            print(
                f"waaah: unknown agent '{name}'; choose one of: {', '.join(adapters.all_names())}",
                file=sys.stderr,
            )
            raise typer.Exit(ExitCode.USAGE)
    checks = doc.run_checks(
        doc.default_env(), (workspace or Path.cwd()).resolve(), workflow, agent, server, api_key
    )
    if as_json:
        print(_masked(json.dumps([c.to_json() for c in checks], indent=2), api_key))
    else:
        for check in checks:
            print(_masked(check.line(), api_key))
    raise typer.Exit(doc.exit_code(checks))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog=f"Exit codes: {RUN_EXITS}",
)
def run(
    ctx: typer.Context,
    prompt: Annotated[
        str | None,
        typer.Argument(help='The prompt. Omitted or "-": read from stdin. Example: waaah run "explain x.py"'),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help=f"The CLI to run: {', '.join(n for n, a in adapters.registry().items() if a.headless)} "
            f"(else {settings.DEFAULT_AGENT_VAR}, else {settings.DEFAULT_AGENT}). Example: --agent claude",
        ),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model of the first CLI.")] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Continue a run (its log id or its CLI's session id) through the CLI's own resume; "
            "appends to its log.",
        ),
    ] = None,
    parent: Annotated[
        str | None,
        typer.Option(
            "--parent",
            help=f"Link this run under a run or supervised session (else {settings.PARENT_ID}) "
            "in `waaah sessions`.",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="Seconds for the whole run: every attempt, wait and fallback."),
    ] = settings.RUN_TIMEOUT,
    fallback: Annotated[
        str | None,
        typer.Option("--fallback", help="CLIs to try next, in order. Example: --fallback claude,gemini"),
    ] = None,
    context: Annotated[
        Path | None,
        typer.Option(
            "--context", help="A file put before the prompt (default: CONTEXT.md of the workspace)."
        ),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="json (the envelope), text (the answer) or llm (for a model).")
    ] = "json",
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Run here (its git root). Default: the current directory."),
    ] = None,
    pass_env: Annotated[
        list[str] | None,
        typer.Option(
            "--pass-env",
            help="Also give the CLI this variable (repeatable; NAME_ is a prefix; also "
            f"{settings.PASS_ENV}=A,B). Other providers' keys and cloud credentials are withheld "
            "by default. Example: --pass-env AWS_",
        ),
    ] = None,
) -> None:
    """Run one prompt through an agent CLI headless and print one JSON envelope.

    Retries transient errors, waits out short rate limits, falls back to the next CLI of
    --fallback on a crash or timeout, all within --timeout. Anything after `--` goes to the CLI.
    Each run is logged to .waaah/runs/<day>/<log id>.jsonl.
    """
    from waaah_agent.runtime import oneshot

    options = oneshot.RunOptions(
        prompt=prompt,
        agent=agent,
        model=model,
        session=session,
        parent=parent,
        timeout=timeout,
        fallback=[a.strip() for a in (fallback or "").split(",") if a.strip()],
        context=context,
        format=fmt,
        extra_args=[a for a in ctx.args if a != "--"],
        workspace=workspace,
        pass_env=settings.pass_env(pass_env, os.environ),
    )

    def go() -> int:
        oneshot.check_format(fmt)
        if timeout <= 0:
            raise UsageError("--timeout must be more than 0 seconds")
        oneshot.interrupt_on_sigterm()
        return oneshot.execute(options, dict(os.environ), sys.stdin, sys.stdout, sys.stderr)

    _exit(go)


@app.command()
def sessions(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Supervised sessions and `waaah run` runs of this workspace as a tree, newest day first:
    id, kind, agent, status, tokens in/out, first prompt line."""
    from waaah_agent.runtime import runlog
    from waaah_agent.runtime.workspace import git_root

    start = (workspace or Path.cwd()).resolve()
    roots = runlog.tree(git_root(start) or start)
    print(
        _masked(json.dumps([r.to_json() for r in roots], indent=2) if as_json else runlog.render_tree(roots))
    )


@app.command()
def status(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Default: the current directory.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """What the running (else the newest) session is doing now. Exit code 7 when there is none."""
    from waaah_agent.runtime import report

    rows = report.reports_for(workspace or Path.cwd())
    chosen = [r for r in rows if r.live] or rows[:1]
    if not chosen:
        print(
            "waaah: no sessions in this workspace; start one with: waaah agent --start=gemini",
            file=sys.stderr,
        )
        raise typer.Exit(ExitCode.NO_SESSION)
    if as_json:
        print(_masked(json.dumps([r.to_json() for r in chosen], indent=2)))
    else:
        print(_masked("\n\n".join(report.detail(r) for r in chosen)))


@app.command("mcp-proxy")
def mcp_proxy(
    server: Annotated[
        str | None, typer.Option("--server", help=f"WAAAH server URL (env {settings.SERVER_URL}).")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", help=f"API key (env {settings.API_KEY}).")
    ] = None,
    agent_id: Annotated[
        str | None,
        typer.Option("--agent-id", help=f"Agent id filled into calls (env {settings.AGENT_ID})."),
    ] = None,
    inbox: Annotated[
        Path | None,
        typer.Option(
            "--inbox", help=f"File that receives one JSON line per tool call (env {settings.INBOX})."
        ),
    ] = None,
) -> None:
    """Serve the WAAAH agent tools over stdio MCP, forwarding each call to the WAAAH server."""
    from waaah_agent import mcp_proxy as proxy

    given = settings.proxy_settings(os.environ, server, api_key, agent_id, inbox)
    _exit(lambda: proxy.run(given))


def _exit(action: object) -> None:
    try:
        code = action()  # type: ignore[operator]
    except WaaahError as err:
        print(f"waaah: {_masked(str(err))}", file=sys.stderr)
        raise typer.Exit(err.exit_code) from None
    except BrokenPipeError:
        raise typer.Exit(ExitCode.INTERNAL) from None
    except KeyboardInterrupt:
        print("waaah: interrupted", file=sys.stderr)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    raise typer.Exit(int(code or 0))


def _masked(text: str, *secrets: str | None) -> str:
    """What we print, with the secrets of this environment (and any given by a flag) masked."""
    from waaah_agent.core.redact import Redactor, known_secrets

    redact = Redactor(known_secrets(os.environ))
    for secret in secrets:
        redact.add(secret)
    return redact(text)


def main() -> None:
    logging.basicConfig(level=settings.log_level(os.environ), format="waaah: %(message)s")
    app()


if __name__ == "__main__":
    main()
