"""`waaah run`'s options: parsed here, carried out by runtime/oneshot.py."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from waaah_agent import settings
from waaah_agent.commands.options import (
    CLI_NAMES,
    FORMATS,
    HEADLESS_CLIS,
    POSITIVE,
    WorkspaceOption,
    _cli_args,
    _flag_only,
    _format,
    _headless_cli,
    renamed,
)
from waaah_agent.commands.route import CooldownOption, RoleOption, _from_env
from waaah_agent.commands.run_callers import (
    AllowedToolsOption,
    EnvOption,
    FallbackOption,
    LlmMaxLinesOption,
    NoFallbackOption,
    TicketOption,
    VerboseOption,
    env_dict,
)
from waaah_agent.commands.run_callers import no_fallback as no_fallback_value
from waaah_agent.commands.run_inputs import (
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
from waaah_agent.commands.running import _exit, _masked
from waaah_agent.core import failures as F
from waaah_agent.core.oneshot import outputs, present
from waaah_agent.core.oneshot.run_inputs import CONTEXT_MAX, RunInputs, split_tools
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.secrets.secretenv import known_secrets
from waaah_agent.errors import SessionNotFound, UsageError, WaaahError


def run(
    ctx: typer.Context,
    prompt: Annotated[
        str | None,
        typer.Argument(help='The prompt. Omitted or "-": read from stdin. Example: waaah run "explain x.py"'),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            *reversed(CLI_NAMES),
            envvar=settings.DEFAULT_AGENT_VAR,
            callback=_headless_cli,
            metavar=HEADLESS_CLIS,
            help="The CLI to run (else the one of --session, else the variable, else "
            f"{settings.DEFAULT_AGENT}). Example: --agent claude",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Model of the first CLI, or an alias (fast, smart, pro, or one of a providers file) "
            "that each CLI of the chain resolves. Else each CLI's model comes from $WAAAH_PROVIDERS, "
            "then providers.yaml or .waaah/providers.yaml, else the CLI's own default. "
            "Example: --model gemini-2.5-flash",
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Continue a run (its log id or its CLI's session id) through the CLI's own resume; "
            "appends to its log.",
        ),
    ] = None,
    continue_from: Annotated[
        str | None,
        typer.Option(
            "--continue-from",
            help="Start a new session (of any CLI) with an earlier run (its log id or session id) "
            "replayed before the prompt. Example: --continue-from <log_id> --agent claude",
        ),
    ] = None,
    continue_from_tree: Annotated[
        str | None,
        typer.Option(
            "--continue-from-tree",
            help="As --continue-from, with every run under it (by --parent) too, in tree order. "
            "Example: --continue-from-tree <log_id>",
        ),
    ] = None,
    old_resume: Annotated[
        str | None, typer.Option("--resume", hidden=True, callback=renamed("--continue-from"))
    ] = None,
    old_resume_tree: Annotated[
        str | None, typer.Option("--resume-tree", hidden=True, callback=renamed("--continue-from-tree"))
    ] = None,
    list_runs: Annotated[
        bool, typer.Option("--list", hidden=True, callback=renamed("waaah sessions"))
    ] = False,
    paths: Annotated[bool, typer.Option("--paths", hidden=True)] = False,
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
    fallback: FallbackOption = None,
    no_fallback: NoFallbackOption = False,
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
    workspace: WorkspaceOption = None,
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
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            envvar=settings.RUN_MAX_TOKENS,
            min=1,
            metavar="N",
            help="Token budget of this run (input + output over its attempts): once spent, no retry or "
            "fallback starts (error_kind budget, exit 17); the attempt in hand finishes. "
            "Example: --max-tokens 200000",
        ),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            envvar=settings.RUN_MAX_COST,
            min=0.000001,
            max=1_000_000,  # and never inf: the envelope stays JSON
            metavar="USD",
            help="The same in US dollars: the CLI's own figure (claude, opencode), else the tokens at "
            "your price table's prices (README Budgets). Example: --max-cost 0.50",
        ),
    ] = None,
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
    stream: Annotated[
        bool,
        typer.Option(
            "--stream",
            help="JSON lines as the run goes (json format only): the start record at once, "
            '{"record": "session", "session_id", "agent"} as soon as each attempt\'s CLI names its '
            'session, the envelope last. Example: waaah run "..." --stream | jq -c .',
        ),
    ] = False,
    allowed_tools: AllowedToolsOption = None,
    cli_env: EnvOption = None,
    ticket: TicketOption = None,
    verbose: VerboseOption = False,
    llm_max_lines: LlmMaxLinesOption = present.LLM_MAX_LINES,
    reasoning_fallback: Annotated[
        bool,
        typer.Option(
            "--reasoning-fallback",
            help="With --session ID and no prompt: print the reasoning and token figures of that "
            "run from its log (else the CLI's session file), without calling the CLI. "
            "Example: waaah run --reasoning-fallback --session <log or session id>",
        ),
    ] = False,
) -> None:
    """Run one prompt headless and print one JSON envelope.

    One prompt through an agent CLI headless, one JSON envelope (on a failure too).

    Retries transient errors, waits out short rate limits, falls back to the next CLI of the
    chain (--fallback, else the other usable CLIs) on a crash or timeout, all within --timeout
    (and --max-tokens/--max-cost). The envelope has the fields of the older per-CLI wrappers
    (docs/run.md). The
    prompt can carry an agent file and persona, a skill, context; --model is resolved per CLI
    (providers.yaml, aliases); --dry-run shows it all and starts nothing; --stream prints JSON
    lines as the run goes; --continue-from/--continue-from-tree replay earlier runs into a new
    session of any CLI (`waaah sessions` lists them). Anything after `--` goes to the CLI. Each run is logged
    to .waaah/runs/<day>/<log id>.jsonl (or under WAAAH_LOG_DIR).
    """
    from waaah_agent.runtime.oneshot import run as oneshot
    from waaah_agent.runtime.oneshot import run_io

    if reasoning_fallback:
        from waaah_agent.runtime.oneshot import run_reasoning

        _exit(
            _enveloped(
                lambda: run_reasoning.main(session, prompt, workspace, dict(os.environ), sys.stdout),
                fmt,
            )
        )

    if paths and not list_runs:
        raise typer.BadParameter("only with --list (waaah sessions [ID] --paths)", param_hint="'--paths'")
    if list_runs:
        # json is the envelope's default format: the tree is text unless --format json is given.
        source = getattr(ctx.get_parameter_source("fmt"), "name", "")
        as_json = fmt == "json" and source == "COMMANDLINE"
        _exit(
            _enveloped(
                lambda: _list(prompt, workspace, paths, as_json),
                fmt,  # a refusal is the envelope, as for any run (unless --format text)
            )
        )
    # --role wins over WAAAH_DEFAULT_AGENT and WAAAH_FALLBACK; --agent and --session over --role
    routed = role and not session and (agent is None or _from_env(ctx, "agent"))
    env_only = {n for n in ("agent", "fallback") if routed and _from_env(ctx, n)}
    no_fallback_at_all = no_fallback or (no_fallback_value(fallback) and "fallback" not in env_only)
    options = run_io.RunOptions(
        prompt=prompt,
        agent=None if "agent" in env_only else agent,
        model=model,
        session=session,
        parent=parent,
        timeout=timeout,
        fallback=[]
        if "fallback" in env_only or no_fallback_at_all
        else [a.strip() for a in (fallback or "").split(",") if a.strip()],
        default_fallback=not no_fallback_at_all,
        context=context,
        format=fmt,
        extra_args=_cli_args(ctx),
        workspace=workspace,
        pass_env=settings.pass_env(pass_env, os.environ),
        role=role,
        breaker_cooldown=breaker_cooldown,
        max_tokens=max_tokens,
        max_cost=max_cost,
        continue_from=_one_of(continue_from, old_resume, "--continue-from", "--resume"),
        continue_from_tree=_one_of(
            continue_from_tree, old_resume_tree, "--continue-from-tree", "--resume-tree"
        ),
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
            allowed_tools=split_tools(allowed_tools or []),
        ),
        stream=stream,
        cli_env=env_dict(cli_env),
        ticket=settings.ticket(ticket, os.environ),
        verbose=verbose,
        llm_max_lines=llm_max_lines,
    )

    def go() -> int:
        oneshot.interrupt_on_sigterm()
        return oneshot.main(options, dict(os.environ), sys.stdin, sys.stdout, sys.stderr)

    _exit(go)


def _enveloped(action: Callable[[], int], fmt: str) -> Callable[[], int]:
    """``action``, whose refusal (a bad id, an unreadable log folder) prints the envelope too."""

    def go() -> int:
        from waaah_agent.runtime.oneshot.run_io import RunOptions, show_failure

        try:
            return action()
        except WaaahError as bad:
            usage = isinstance(bad, UsageError)
            envelope = outputs.failure_envelope(
                F.INVALID_INPUT
                if usage
                else F.INVALID_SESSION
                if isinstance(bad, SessionNotFound)
                else F.UNKNOWN,
                _masked(str(bad)),
                bad.exit_code,
                version=present.ENVELOPE_VERSION,
            )
            show_failure(
                envelope,
                RunOptions(format=fmt),
                sys.stdout,
                Redactor(known_secrets(settings.with_private(os.environ))),
            )
            raise

    return go


def _list(wanted: str | None, workspace: Path | None, paths: bool, as_json: bool) -> int:
    """The old `waaah run --list [ID] [--paths]`: what `waaah sessions` prints."""
    from waaah_agent.runtime.oneshot import listing
    from waaah_agent.runtime.workspace import workspace_root

    print(_masked(listing.show(workspace_root(workspace), wanted, paths, as_json)))
    return 0


def _one_of(new: str | None, old: str | None, new_name: str, old_name: str) -> str | None:
    """An option given by its name or its old one (not both, unless with the same value)."""
    if new is not None and old is not None and new != old:
        raise typer.BadParameter(
            f"give {new_name} once ({old_name} is its old name)", param_hint=f"'{old_name}'"
        )
    return new if new is not None else old
