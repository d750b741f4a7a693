"""What `waaah run` puts in front of a prompt and checks before any CLI starts: agent files and
their personas, task data given as a JSON object on stdin, a CLI's prompt size figures, its
permission and model knobs (``CliInputs``, on each adapter's ``Headless``), and skills.

Pure: the caller reads the files (runtime/run_inputs.py) and hands the text in.

An agent file is Markdown::

    ---
    name: reviewer
    description: Reviews a change
    persona: strict          # the persona used when --persona is not given (optional)
    ---
    Shared text, sent with every persona.

    ## persona: strict
    Point out every problem.

    ## persona: kind
    Start with what is good.

Front matter (``key: value`` lines between ``---`` lines) is optional and only ``persona`` is
read from it; every ``## persona: ID`` heading starts a persona that runs to the next such heading.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from waaah_agent.core import names
from waaah_agent.core.nesting import loads_json
from waaah_agent.core.oneshot import present

#: An agent file larger than this is refused.
AGENT_FILE_CAP = 1024 * 1024
#: A skill's SKILL.md larger than this is refused.
SKILL_FILE_CAP = 1024 * 1024
#: `--context-max`'s default: a context file is cut to this many bytes, with a visible marker.
CONTEXT_MAX = present.CONTEXT_CAP
#: Bytes per token for the estimate (English text and code average about four).
BYTES_PER_TOKEN = 4

_PERSONA = re.compile(r"^##[ \t]+persona:[ \t]*(\S*)[ \t]*$", re.IGNORECASE | re.MULTILINE)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SKILL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9._-]")
_DOTS = re.compile(r"\.{2,}")
#: A ticket id is cut to this many characters in a log file's name: with ``_<uuid>`` after it,
#: the log id is still a name ``--session`` and ``--continue-from`` take (core/names.py).
TICKET_CAP = names.MAX_NAME - 37

#: The keys of a task object on stdin that are read (see README, "Task data on stdin"); any
#: other is ignored, named in one warning. ``task`` is the older wrappers' name of the prompt.
TASK_KEYS = ("prompt", "task", "persona", "agent_file", "skill", "context", "model", "agent")
#: Keys whose value may be any JSON (an object or list is given as its JSON text).
_TEXT_KEYS = ("prompt", "task", "context")

#: The portable permission modes (claude's names); each CLI maps them to its own flags.
PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions")


@dataclass
class RunInputs:
    """`waaah run`'s input options (cli_oneshot.py) and, once checked, each CLI's plan."""

    agent_file: Path | None = None
    persona: str | None = None
    skill: str | None = None
    context_dir: Path | None = None
    context_max: int = CONTEXT_MAX
    skip_context_file: bool = False
    yolo: bool = False
    permission_mode: str | None = None
    temperature: float | None = None
    dry_run: bool = False
    allowed_tools: tuple[str, ...] = ()  # --allowed-tools: tools the CLI may run without asking
    plans: dict[str, CliPlan] = field(default_factory=dict)

    def for_cli(self, name: str, prompt: str) -> tuple[str, list[str]]:
        """The prompt and the extra flags a run of CLI ``name`` gets."""
        plan = self.plans.get(name)
        return (plan.prompt, list(plan.args)) if plan else (prompt, [])


@dataclass(frozen=True)
class CliPlan:
    """One CLI's checked inputs: its prompt (with a skill applied), its flags, its figures."""

    prompt: str
    args: tuple[str, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)
    skill_path: str = ""


class InputError(ValueError):
    """Input no CLI should be given: the message is one line a user can act on."""


@dataclass(frozen=True)
class AgentFile:
    source: str  # the file's name, for the block's source attribute and messages
    front: dict[str, str]
    body: str
    personas: dict[str, str]  # id -> text, in file order


@dataclass(frozen=True)
class CliInputs:
    """What a CLI's headless mode accepts besides the prompt (recorded from its pinned `--help`).

    ``prompt_warn`` / ``prompt_max``: bytes of prompt over which a run warns / is refused;
    ``prompt_basis`` says where the figures come from. ``permission``: a mode (portable or the
    CLI's own name) -> the flags that set it; ``yolo``: the flags that approve everything.
    ``temperature``: T -> flags, None when the CLI has no way to set it for one run (then
    ``temperature_note`` says why); ``allowed_tools`` the same for a list of tools it may run
    without asking (``allowed_tools_note``). ``skills``: where the CLI finds skills (relative to the
    workspace and to HOME), empty when waaah cannot run one; ``skill_prompt`` builds the prompt
    that runs skill (name, SKILL.md text, path) with the prompt."""

    prompt_warn: int
    prompt_max: int
    prompt_basis: str
    permission: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    yolo: tuple[str, ...] = ()
    temperature: Callable[[float], list[str]] | None = None
    temperature_note: str = ""
    skills: tuple[str, ...] = ()
    skill_prompt: Callable[[str, str, str, str], str] | None = None
    no_skills_note: str = ""
    allowed_tools: Callable[[tuple[str, ...]], list[str]] | None = None
    allowed_tools_note: str = ""


# --------------------------------------------------------------------------------------------
# Agent files and personas
# --------------------------------------------------------------------------------------------


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(the front matter's lines, the text after it) of a text opening with ``---``; (None, the
    text) when it has none or never closes it. An empty block (``---`` twice) is front matter."""
    if not text.startswith("---\n"):
        return None, text
    end = 3 if text.startswith("---\n---") else text.find("\n---", 4)
    if end < 0 or text[end + 4 : end + 5] not in ("", "\n"):
        return None, text
    return text[4:end], text[end + 4 :].lstrip("\n")


def parse_agent_file(text: str, source: str) -> AgentFile:
    """The agent file's front matter, shared body and personas; a duplicate or malformed
    persona id is an :class:`InputError`."""
    if "\x00" in text:
        raise InputError(f"the agent file {source} holds a NUL byte")
    text = text.replace("\r\n", "\n").lstrip("\ufeff")
    front: dict[str, str] = {}
    block, text = split_front_matter(text)
    if block is None and text.startswith("---\n"):
        raise InputError(f"the agent file {source} opens front matter (---) and never closes it")
    for line in (block or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line.startswith((" ", "\t", "#")):
            front[key.strip().lower()] = value.split(" #")[0].strip().strip("\"'")
    heads = list(_PERSONA.finditer(text))
    body = text[: heads[0].start()] if heads else text
    personas: dict[str, str] = {}
    for at, head in enumerate(heads):
        pid = head.group(1)
        if not _ID.match(pid):
            at_line = text.count("\n", 0, head.start()) + 1
            raise InputError(
                f"the agent file {source} has a persona heading without a valid id "
                f"(line {at_line} of the body: '## persona: ID', ID of letters, digits, _ . -)"
            )
        if pid in personas:
            raise InputError(f"the agent file {source} defines the persona '{pid}' twice")
        end = heads[at + 1].start() if at + 1 < len(heads) else len(text)
        personas[pid] = text[head.end() : end].strip()
    return AgentFile(source, front, body.strip(), personas)


def pick_persona(agent: AgentFile | None, persona: str | None) -> str | None:
    """The persona id to use: ``persona``, else the file's default; unknown ones are an error
    that lists the known ones."""
    if agent is None:
        if persona:
            raise InputError("--persona needs an agent file (--agent-file FILE) that defines it")
        return None
    chosen = persona or agent.front.get("persona") or None
    if chosen is None:
        return None
    if refused := names.refusal("persona", str(chosen)):
        raise InputError(refused)
    if chosen not in agent.personas:
        known = ", ".join(agent.personas) or "none: it has no '## persona: ID' sections"
        where = "--persona" if persona else "its front matter's persona"
        raise InputError(f"unknown persona '{chosen}' ({where}) in {agent.source}; known: {known}")
    return chosen


def agent_block(agent: AgentFile, persona: str | None) -> str:
    """The text sent before the prompt: the shared body, then the persona's text."""
    parts = [agent.body, agent.personas[persona] if persona else ""]
    text = "\n\n".join(p for p in parts if p)
    if not text:
        raise InputError(f"the agent file {agent.source} has no text to send")
    label = f' persona="{persona}"' if persona else ""
    return f'<agent source="{agent.source}"{label}>\n{text}\n</agent>\n\n'


# --------------------------------------------------------------------------------------------
# Task data on stdin
# --------------------------------------------------------------------------------------------


def looks_like_task(text: str) -> bool:
    """Stdin is read as task data when it is one JSON object (it starts with ``{``)."""
    return text.lstrip().startswith("{")


def parse_task(text: str) -> tuple[dict[str, str], list[str]]:
    """The task object's values (as text) and the keys it holds that are not read. The prompt is
    ``prompt``, else ``task``; ``prompt``, ``task`` and ``context`` may hold any JSON (an object
    is sent as its JSON text), the other keys read are names (strings); null is as absent."""
    try:
        data: Any = loads_json(text)
    except (ValueError, RecursionError) as err:  # RecursionError: nested beyond any real task
        raise InputError(
            f"stdin starts with '{{' but is not a JSON object ({err}); give a text prompt that "
            'starts with { as the argument instead (waaah run "$(cat file)")'
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"the task data on stdin is JSON {type(data).__name__}, not an object")
    values: dict[str, str] = {}
    for key in TASK_KEYS:
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            if key not in _TEXT_KEYS:
                raise InputError(f"'{key}' in the task data on stdin must be a string")
            value = json.dumps(value, ensure_ascii=False)
        if "\x00" in value:
            raise InputError(
                f"'{key}' in the task data on stdin holds a NUL byte, which no CLI or file name can take"
            )
        values[key] = value
    ignored = [k for k in data if k not in TASK_KEYS]
    if values.get("prompt", "").strip():
        if "task" in values:
            ignored.insert(0, "task")  # the prompt wins
    elif values.get("task", "").strip():
        values["prompt"] = values["task"]
    else:
        raise InputError("the task data on stdin has no 'prompt' (or 'task')")
    values.pop("task", None)
    return values, ignored


def ignored_keys_note(keys: list[str], shown: int = 10) -> str:
    """One line naming the task object's keys that were not read (the first ``shown``)."""
    names = ", ".join(json.dumps(k[:40], ensure_ascii=True) for k in keys[:shown])
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return f"the task data on stdin: {names}{more} not used (read: {', '.join(TASK_KEYS)})"


# --------------------------------------------------------------------------------------------
# Prompt size
# --------------------------------------------------------------------------------------------


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8", "replace")) / BYTES_PER_TOKEN)


def prompt_stats(prompt: str, cli: CliInputs) -> dict[str, Any]:
    return {
        "bytes": len(prompt.encode("utf-8", "replace")),
        "chars": len(prompt),
        "tokens_estimate": estimate_tokens(prompt),
        "warn_bytes": cli.prompt_warn,
        "max_bytes": cli.prompt_max,
    }


def check_size(prompt: str, name: str, cli: CliInputs) -> str | None:
    """A warning for a prompt over the CLI's warning figure; over its maximum, an InputError."""
    size = len(prompt.encode("utf-8", "replace"))
    if size > cli.prompt_max:
        raise InputError(
            f"the prompt is {size:,} bytes, more than the {cli.prompt_max:,} {name} takes "
            f"({cli.prompt_basis}); shorten it or its context (--context-max)"
        )
    if size > cli.prompt_warn:
        return (
            f"the prompt is {size:,} bytes (about {estimate_tokens(prompt):,} tokens), over the "
            f"{cli.prompt_warn:,} at which {name} may lose track of it or be slow"
        )
    return None


# --------------------------------------------------------------------------------------------
# Permissions, temperature, skills
# --------------------------------------------------------------------------------------------


def permission_args(name: str, cli: CliInputs, mode: str | None, yolo: bool) -> list[str]:
    """The CLI's flags for ``--permission-mode MODE`` / ``--yolo``; a mode it cannot honour is
    an InputError that lists the ones it can."""
    if yolo and mode not in (None, "bypassPermissions", "yolo"):
        raise InputError(f"--yolo and --permission-mode {mode} disagree; give one")
    if yolo:
        if not cli.yolo:
            raise InputError(f"{name} has no flag that approves every action (--yolo)")
        return list(cli.yolo)
    if mode is None:
        return []
    if mode not in cli.permission:
        raise InputError(
            f"{name} cannot run in permission mode '{mode}'; it takes: {', '.join(cli.permission)}"
        )
    return list(cli.permission[mode])


def temperature_args(name: str, cli: CliInputs, temperature: float | None) -> tuple[list[str], str]:
    """The CLI's flags for ``--temperature`` and, where it has none, the warning to give."""
    if temperature is None:
        return [], ""
    if cli.temperature is None:
        return [], f"--temperature {temperature:g} is not applied: {name} {cli.temperature_note}"
    return cli.temperature(temperature), ""


def allowed_tools_args(name: str, cli: CliInputs, tools: tuple[str, ...]) -> tuple[list[str], str]:
    """The CLI's flags for ``--allowed-tools`` and, where it takes no list, the warning to give
    (the tools then ask as they would: nothing more is allowed than without the option)."""
    if not tools:
        return [], ""
    if cli.allowed_tools is None:
        return [], f"--allowed-tools is not applied: {name} {cli.allowed_tools_note}"
    return cli.allowed_tools(tools), ""


def split_tools(values: list[str]) -> tuple[str, ...]:
    """--allowed-tools values as one list: each value split at commas outside parentheses
    (``Bash(git log:*),Edit``), blanks dropped, each tool once."""
    tools: list[str] = []
    for value in values:
        depth, part = 0, ""
        for char in f"{value},":
            depth += (char == "(") - (char == ")")
            if char == "," and depth <= 0:
                if part.strip() and part.strip() not in tools:
                    tools.append(part.strip())
                depth, part = 0, ""
            else:
                part += char
    return tuple(tools)


def check_skill_name(skill: str) -> None:
    if not _SKILL.match(skill):
        raise InputError(f"invalid skill name '{skill}' (letters, digits, _ . : -)")
    if refused := names.refusal("skill", skill):  # a..b: a name, never part of a path
        raise InputError(refused)


def skill_candidates(cli: CliInputs, skill: str) -> list[tuple[str, str]]:
    """Where the CLI looks for ``skill``, as (base, relative path) with base "workspace" or
    "home", the workspace first (it wins over the user's, as in the CLIs)."""
    return [(base, f"{folder}/{skill}/SKILL.md") for base in ("workspace", "home") for folder in cli.skills]


def slash_skill(skill: str, text: str, path: str, prompt: str) -> str:
    """A skill run as the CLI's own slash command: ``/NAME prompt``."""
    return f"/{skill} {prompt}"


def inline_skill(skill: str, text: str, path: str, prompt: str) -> str:
    """A skill given as its SKILL.md before the prompt, as the CLI's skill activation would
    add it (for a CLI whose activation asks for consent, which headless mode cannot give)."""
    return (
        f'<skill name="{skill}" path="{path}">\n{text.strip()}\n</skill>\n\n'
        f"Follow the skill above for this task.\n\n{prompt}"
    )


def ticket_name(ticket: str) -> str:
    """A ticket id as the start of a log file's name: each character but letters, digits and
    ``. _ -`` becomes ``_``, a run of dots one dot (never ``..``), no leading dot or dash, at most
    TICKET_CAP characters ("" for none)."""
    name = _DOTS.sub(".", _NOT_IN_NAME.sub("_", ticket.strip()))
    return name[:TICKET_CAP].lstrip(".-")
