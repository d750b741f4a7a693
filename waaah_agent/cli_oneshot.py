"""`waaah run`'s options: parsed here, carried out by runtime/oneshot.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from waaah_agent import settings
from waaah_agent.cli_inputs import (
    AgentFileOption,
    ContextDirOption,
    ContextMaxOption,
    DryRunOption,
    PermissionModeOption,
    PersonaOption,
    SkillOption,
    SkipContextOption,
    TemperatureOption,
    YoloOption,
)
from waaah_agent.cli_options import (
    FORMATS,
    HEADLESS_CLIS,
    POSITIVE,
    _cli_args,
    _flag_only,
    _format,
    _headless_cli,
    _headless_list,
    _headless_names,
)
from waaah_agent.cli_route import CooldownOption, RoleOption, _from_env
from waaah_agent.cli_run import _exit
from waaah_agent.core.run_inputs import CONTEXT_MAX, RunInputs


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
            envvar=settings.DEFAULT_AGENT_VAR,
            callback=_headless_cli,
            metavar=HEADLESS_CLIS,
            help="The CLI to run (else the one of --session, else the variable, else "
            f"{settings.DEFAULT_AGENT}). Example: --agent claude",
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
            envvar=settings.PARENT_ID,
            callback=_flag_only,
            help="Link this run under a run or supervised session (else the variable) in `waaah sessions`.",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            callback=POSITIVE,
            metavar="SECONDS>0",
            help="Seconds for the whole run: every attempt, wait and fallback. Example: --timeout 300",
        ),
    ] = settings.RUN_TIMEOUT,
    fallback: Annotated[
        str | None,
        typer.Option(
            "--fallback",
            envvar="WAAAH_FALLBACK",
            callback=_headless_list,
            metavar="CLI[,CLI...]",
            help=f"CLIs to try next, in order, each one of {', '.join(_headless_names())}. "
            "Example: --fallback claude,gemini",
        ),
    ] = None,
    context: Annotated[
        Path | None,
        typer.Option(
            "--context", help="A file put before the prompt (default: CONTEXT.md of the workspace)."
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            callback=_format,
            metavar=f"[{'|'.join(FORMATS)}]",
            help="json (the envelope), text (the answer) or llm (for a model). Example: --format text",
        ),
    ] = "json",
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Run here (its git root). Default: the current directory."),
    ] = None,
    pass_env: Annotated[
        list[str] | None,
        typer.Option(
            "--pass-env",
            envvar=settings.PASS_ENV,
            callback=_flag_only,
            metavar="NAME",
            help="Also give the CLI this variable (repeatable; NAME_ is a prefix; the variable "
            "adds more, comma-separated: A,B_). Other providers' keys and cloud credentials are "
            "withheld by default. Example: --pass-env AWS_",
        ),
    ] = None,
    role: RoleOption = None,
    breaker_cooldown: CooldownOption = None,
    agent_file: AgentFileOption = None,
    persona: PersonaOption = None,
    skill: SkillOption = None,
    context_dir: ContextDirOption = None,
    context_max: ContextMaxOption = CONTEXT_MAX,
    skip_context_file: SkipContextOption = False,
    yolo: YoloOption = False,
    permission_mode: PermissionModeOption = None,
    temperature: TemperatureOption = None,
    dry_run: DryRunOption = False,
) -> None:
    """Run one prompt through an agent CLI headless and print one JSON envelope.

    Retries transient errors, waits out short rate limits, falls back to the next CLI of
    --fallback on a crash or timeout, all within --timeout. Anything after `--` goes to the CLI.
    Each run is logged to .waaah/runs/<day>/<log id>.jsonl.
    """
    from waaah_agent.runtime import oneshot, run_io

    # --role wins over WAAAH_DEFAULT_AGENT and WAAAH_FALLBACK; --agent and --session over --role
    routed = role and not session and (agent is None or _from_env(ctx, "agent"))
    env_only = {n for n in ("agent", "fallback") if routed and _from_env(ctx, n)}
    options = run_io.RunOptions(
        prompt=prompt,
        agent=None if "agent" in env_only else agent,
        model=model,
        session=session,
        parent=parent,
        timeout=timeout,
        fallback=[]
        if "fallback" in env_only
        else [a.strip() for a in (fallback or "").split(",") if a.strip()],
        context=context,
        format=fmt,
        extra_args=_cli_args(ctx),
        workspace=workspace,
        pass_env=settings.pass_env(pass_env, os.environ),
        role=role,
        breaker_cooldown=breaker_cooldown,
        inputs=RunInputs(
            agent_file=agent_file,
            persona=persona,
            skill=skill,
            context_dir=context_dir,
            context_max=context_max,
            skip_context_file=skip_context_file,
            yolo=yolo,
            permission_mode=permission_mode,
            temperature=temperature,
            dry_run=dry_run,
        ),
    )

    def go() -> int:
        oneshot.interrupt_on_sigterm()
        return oneshot.execute(options, dict(os.environ), sys.stdin, sys.stdout, sys.stderr)

    _exit(go)
