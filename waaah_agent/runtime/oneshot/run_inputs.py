"""`waaah run`'s inputs, read and checked before any CLI starts: the prompt (or a task object on
stdin), the agent file and its persona, the context, and for each CLI of the chain its skill,
prompt size, permission and temperature flags (core/run_inputs.py decides); `--dry-run` prints
what would run and stops there."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from waaah_agent import adapters, settings
from waaah_agent.core.nesting import dumps_json
from waaah_agent.core.oneshot import models, present
from waaah_agent.core.oneshot import run_inputs as R
from waaah_agent.core.oneshot.run_inputs import CliPlan, InputError
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.secrets.secretenv import known_secrets
from waaah_agent.errors import UsageError
from waaah_agent.runtime import clis
from waaah_agent.runtime.oneshot import cli_env
from waaah_agent.runtime.oneshot.run_io import (
    ARGV_PROMPT_LIMIT,
    PROMPT_CAP,
    InvalidPrompt,
    RunOptions,
    decoded,
    input_envelope,
    ms,
    read_prompt,
    refuse_nul,
    show_failure,
)
from waaah_agent.safe_read import read_capped, read_head, why


@dataclass
class Prepared:
    """The prompt as every CLI gets it (agent text, context, the user's prompt), and its parts."""

    prompt: str
    task: str  # the user's prompt alone (what --role's task words are looked for in)
    context_source: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    persona: str | None = None
    agent_sent: bool = False


def prepare(
    opts: RunOptions,
    workspace: Path,
    stdin: IO[str],
    warnings: list[str],
    replay: Callable[[str], str] | None = None,
) -> Prepared:
    """Read the prompt, the task data, the agent file and the context; InvalidPrompt on bad input.
    ``replay`` puts a restored run's log (--continue-from, --continue-from-tree) before the prompt, under the
    context and the agent text."""
    inputs = opts.inputs
    prompt = read_prompt(opts, stdin, warnings)
    task: dict[str, str] = {}
    try:
        if (opts.prompt is None or opts.prompt == "-") and R.looks_like_task(prompt):
            task, ignored = R.parse_task(prompt)
            if ignored:  # an extra key is never an error: the older wrappers' callers send them
                warnings.append(R.ignored_keys_note(ignored))
            prompt = task["prompt"]
            refuse_nul(prompt, "the task data's prompt")
            # The flags win over the object's keys.
            opts.model = opts.model or task.get("model") or None
            opts.agent = opts.agent or task.get("agent") or None
            inputs.persona = inputs.persona or task.get("persona") or None
            inputs.skill = inputs.skill or task.get("skill") or None
            if inputs.agent_file is None and task.get("agent_file"):
                inputs.agent_file = Path(task["agent_file"])
        agent = read_agent_file(inputs.agent_file) if inputs.agent_file else None
        persona = R.pick_persona(agent, inputs.persona)
        if inputs.skill:
            R.check_skill_name(inputs.skill)
    except InputError as bad:
        raise InvalidPrompt(str(bad)) from None
    user_prompt = prompt
    if replay is not None:
        prompt = replay(prompt)
    prompt, source, context = read_context(prompt, opts, workspace, task.get("context"), warnings)
    # A continued session's conversation already holds the agent text: it is not sent again.
    sent = agent is not None and not opts.session
    if agent is not None and sent:
        try:
            prompt = R.agent_block(agent, persona) + prompt
        except InputError as bad:
            raise InvalidPrompt(str(bad)) from None
    return Prepared(prompt, user_prompt, source, context, persona, sent)


def read_agent_file(path: Path) -> R.AgentFile:
    """The parsed agent file; an unreadable one is a UsageError, a malformed one an InputError."""
    try:
        data = read_capped(path, R.AGENT_FILE_CAP)
    except OSError as err:
        raise UsageError(f"cannot read the agent file {path}: {why(err)}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"the agent file {path} is not valid UTF-8 (byte {data[err.start]:#04x} at offset {err.start})"
        ) from None
    return R.parse_agent_file(text, path.name)


def read_context(
    prompt: str, opts: RunOptions, workspace: Path, task_context: str | None, warnings: list[str]
) -> tuple[str, str, dict[str, Any]]:
    """``prompt`` with the context before it, the context's source, and what dry-run shows of it:
    --context FILE, else CONTEXT.md of --context-dir, else the task data's context, else (unless
    --skip-context-file) the workspace's CONTEXT.md; cut to --context-max bytes. The workspace's
    CONTEXT.md (named by nobody) is not followed out of the workspace: a warning, no context."""
    inputs = opts.inputs
    cap = inputs.context_max
    if opts.context is not None and inputs.context_dir is not None:
        raise UsageError("give --context FILE or --context-dir DIR, not both")
    path = opts.context
    if path is None and inputs.context_dir is not None:
        try:
            is_dir = inputs.context_dir.is_dir()
        except (OSError, ValueError) as err:  # a name too long
            raise UsageError(f"--context-dir cannot be used ({why(err)})") from None
        if not is_dir:
            raise UsageError(f"--context-dir {inputs.context_dir} is not a folder")
        path = inputs.context_dir / "CONTEXT.md"
        if not (path.exists() or path.is_symlink()):
            raise UsageError(f"no CONTEXT.md in the context folder {inputs.context_dir}")
    if path is None and task_context:
        refuse_nul(task_context[:cap], "the task data's context")
        size = len(task_context.encode("utf-8"))
        info = {"source": "task data", "bytes": size, "cut": size > cap, "max_bytes": cap}
        if size > cap:
            warnings.append(f"the task data's context was cut to {cap:,} of {size:,} bytes (--context-max)")
        return present.with_context(prompt, task_context, "task data", cap=cap), "task data", info
    if path is None:
        default = workspace / "CONTEXT.md"
        if inputs.skip_context_file or not (default.exists() or default.is_symlink()):
            return prompt, "", {}
        if outside := _outside(default, workspace):
            warnings.append(
                f"the workspace's CONTEXT.md was not read: it is a symlink to {outside}, outside the "
                f"workspace (to send that file on purpose: --context {default})"
            )
            return prompt, "", {}
        path = default
    read_cap = min(cap, PROMPT_CAP) + 4  # a cut never splits a character it could have kept
    try:
        data, size = read_head(path, read_cap)
    except OSError as err:
        raise UsageError(f"cannot read the context file {path}: {why(err)}") from None
    source = f"the context file {path}"
    text = decoded(data, source, warnings) if size <= read_cap else data.decode("utf-8", "replace")
    refuse_nul(text[:cap], source)  # what is past the cap is not sent
    info = {"source": str(path), "bytes": size, "cut": size > cap, "max_bytes": cap}
    if size > cap:
        warnings.append(f"the context file {path} was cut to {cap:,} of {size:,} bytes (--context-max)")
    return present.with_context(prompt, text, path.name, cap=cap, total=size), str(path), info


def _outside(path: Path, workspace: Path) -> str:
    """Where the symlink ``path`` leads when that is outside ``workspace`` (a repository can
    commit ``CONTEXT.md -> ~/.ssh/id_ed25519``); "" when it is no symlink or stays inside."""
    if not path.is_symlink():
        return ""
    try:
        target = path.resolve()
        inside = target.is_relative_to(workspace.resolve())
    except (OSError, RuntimeError):  # a loop: what the read says
        return ""
    return "" if inside else str(target)


def plan_chain(
    chain: list[str],
    prepared: Prepared,
    opts: RunOptions,
    workspace: Path,
    env: Mapping[str, str],
    warnings: list[str],
) -> dict[str, CliPlan]:
    """Each CLI's prompt and flags, checked (skill found, size, permission mode); the plans are
    kept on ``opts.inputs`` for the attempts. InvalidPrompt when a CLI of the chain cannot take them."""
    inputs = opts.inputs
    plans: dict[str, CliPlan] = {}
    known = adapters.registry()
    try:
        for name in chain:
            refused = [
                n
                for n in known[name].config_env_refused(env, workspace)
                if not cli_env.matches(n, opts.pass_env)
            ]
            if refused:
                warnings.append(
                    f"{name}: the workspace's config names {', '.join(refused)}, not given to it (a "
                    f"workspace's config may name only model providers' *_API_KEY); to give one on "
                    f"purpose: --pass-env {refused[0]}"
                )
            headless = known[name].headless
            cli = headless.inputs if headless else None
            if cli is None:
                continue
            prompt, skill_path = prepared.prompt, ""
            if inputs.skill:
                prompt, skill_path = with_skill(name, cli, inputs.skill, prompt, workspace, env)
            args = R.permission_args(name, cli, inputs.permission_mode, inputs.yolo)
            more, note = R.temperature_args(name, cli, inputs.temperature)
            tools, tools_note = R.allowed_tools_args(name, cli, inputs.allowed_tools)
            warning = R.check_size(prompt, name, cli)
            warnings.extend(w for w in (note, tools_note, warning) if w)
            # The tools first: claude's list option takes every word after it up to the next option.
            flags = tuple(tools + args + more)
            plans[name] = CliPlan(prompt, flags, R.prompt_stats(prompt, cli), skill_path)
    except InputError as bad:
        raise InvalidPrompt(str(bad)) from None
    inputs.plans = plans
    return plans


def with_skill(
    name: str, cli: R.CliInputs, skill: str, prompt: str, workspace: Path, env: Mapping[str, str]
) -> tuple[str, str]:
    """``prompt`` as the CLI runs ``skill`` with it, and the SKILL.md found."""
    if not cli.skills or cli.skill_prompt is None:
        raise InputError(f"--skill: {name} has no skills waaah can run ({cli.no_skills_note})")
    home = Path(env.get("HOME") or Path.home())
    looked: list[str] = []
    for base, rel in R.skill_candidates(cli, skill):
        path = (workspace if base == "workspace" else home) / rel
        looked.append(str(path))
        if not path.is_file():
            continue
        try:
            text = read_capped(path, R.SKILL_FILE_CAP).decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"cannot read the skill file {path}: {err}") from None
        return cli.skill_prompt(skill, text, str(path.parent), prompt), str(path)
    raise InputError(f"no skill '{skill}' for {name}: looked for {', '.join(looked)}")


def refuse(
    bad: Exception, opts: RunOptions, out: IO[str], err: IO[str], started: float, env: Mapping[str, str]
) -> int:
    """A run refused before any CLI started: the invalid_input envelope and one line."""
    envelope = input_envelope(str(bad), opts.agent or "", opts.model, opts.inputs.skill)
    envelope["duration_ms"] = ms(time.monotonic() - started)
    show_failure(envelope, opts, out, Redactor(known_secrets(settings.with_private({**env, **opts.cli_env}))))
    print(f"waaah: invalid_input: {bad}", file=err)
    return int(envelope["exit_code"])


def dry_run(
    chain: list[str],
    prepared: Prepared,
    opts: RunOptions,
    env: Mapping[str, str],
    resume_id: str,
    warnings: list[str],
    out: IO[str],
    layers: list[models.Providers] | None = None,
    budget: dict[str, Any] | None = None,
) -> int:
    """What the run would do, as one JSON object; nothing is started and no log is written.
    Each CLI's model is resolved as the run would (``layers``: the providers files)."""
    known = adapters.registry()
    inputs = opts.inputs
    clis_out: list[dict[str, Any]] = []
    for index, name in enumerate(chain):
        adapter = known[name]
        headless = adapter.headless
        assert headless is not None  # pick() checked the chain
        prompt, args = inputs.for_cli(name, prepared.prompt)
        binary = clis.find(adapter, env)
        in_argv = len(prompt.encode("utf-8")) <= ARGV_PROMPT_LIMIT and not headless.stdin_prompt
        resume = bool(resume_id) and index == 0
        session = resume_id if resume else ("<new-session-id>" if headless.own_session_ids else "")
        resolution = models.resolve(name, opts.model, index == 0, layers or [])
        model = resolution.model
        argv = [
            binary or adapter.binary,
            *headless.argv("<prompt>" if in_argv else None, session, resume, model),
            *args,
            *opts.extra_args,
        ]
        plan = inputs.plans.get(name)
        clis_out.append(
            {
                "agent": name,
                "binary": binary,
                "installed": binary is not None,
                "model": model or "",
                "model_resolution": resolution.text(),
                "argv": argv,
                "prompt_on_stdin": not in_argv,
                "prompt": plan.stats if plan else {},
                **({"skill_file": plan.skill_path} if plan and plan.skill_path else {}),
            }
        )
        if binary is None:
            warnings.append(f"{name} is not installed (not on PATH nor in the project's install)")
    first = clis_out[0]
    result: dict[str, Any] = {
        "dry_run": True,
        "ok": True,
        "agent": chain[0],
        "model": first["model"],
        "model_resolution": first["model_resolution"],
        "binary": first["binary"],
        "argv": first["argv"],
        "prompt_on_stdin": first["prompt_on_stdin"],
        "prompt": first["prompt"],
        "context": prepared.context or None,
        "agent_file": str(inputs.agent_file) if inputs.agent_file else None,
        "persona": prepared.persona,
        "agent_text_sent": prepared.agent_sent,
        "skill": inputs.skill,
        "session": opts.session,
        "fallback_chain": chain,
        "budget": budget,
        "clis": clis_out,
        "warnings": warnings,
    }
    # Masked as a run's log and envelope are: a dry run's output is what gets pasted into reports.
    redact = Redactor(known_secrets(settings.with_private(dict(env))))
    out.write(redact(dumps_json(result, indent=2, ensure_ascii=False)) + "\n")
    out.flush()
    return 0
