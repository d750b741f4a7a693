"""`waaah run`'s input decisions: agent files and personas, task data, prompt size, permission
and temperature flags per CLI, skills (core/run_inputs.py)."""

from __future__ import annotations

import pytest

from waaah_agent import adapters
from waaah_agent.core.oneshot import run_inputs as R
from waaah_agent.core.oneshot.run_inputs import InputError

AGENT = """---
name: reviewer
description: "Reviews a change"   # a comment
persona: kind
---
You review code.

## persona: strict
Point out every problem.

## Checklist
- tests

## persona: kind
Start with what is good.
"""


def cli(name: str) -> R.CliInputs:
    headless = adapters.registry()[name].headless
    assert headless is not None and headless.inputs is not None
    return headless.inputs


def test_an_agent_file_has_front_matter_a_shared_body_and_personas() -> None:
    agent = R.parse_agent_file(AGENT, "reviewer.md")
    assert agent.front == {"name": "reviewer", "description": "Reviews a change", "persona": "kind"}
    assert agent.body == "You review code."
    assert list(agent.personas) == ["strict", "kind"]
    # A plain `##` heading stays inside the persona it follows.
    assert agent.personas["strict"] == "Point out every problem.\n\n## Checklist\n- tests"
    block = R.agent_block(agent, "strict")
    assert block.startswith('<agent source="reviewer.md" persona="strict">\nYou review code.\n\n')
    assert "Point out every problem." in block and "Start with" not in block
    assert block.endswith("</agent>\n\n")


def test_the_persona_is_the_flag_else_the_front_matter_else_none() -> None:
    agent = R.parse_agent_file(AGENT, "a.md")
    assert R.pick_persona(agent, "strict") == "strict"
    assert R.pick_persona(agent, None) == "kind"
    plain = R.parse_agent_file("Just text.\r\n", "plain.md")
    assert R.pick_persona(plain, None) is None
    assert R.agent_block(plain, None) == '<agent source="plain.md">\nJust text.\n</agent>\n\n'
    assert R.pick_persona(None, None) is None


@pytest.mark.parametrize(
    ("text", "persona", "message"),
    [
        (AGENT, "nope", "unknown persona 'nope' (--persona) in a.md; known: strict, kind"),
        (
            "No personas here.",
            "x",
            "unknown persona 'x' (--persona) in a.md; known: none: it has no '## persona: ID' sections",
        ),
        ("---\npersona: gone\n---\nbody\n## persona: a\nA", None, "unknown persona 'gone' (its front"),
    ],
)
def test_an_unknown_persona_lists_the_known_ones(text: str, persona: str | None, message: str) -> None:
    agent = R.parse_agent_file(text, "a.md")
    with pytest.raises(InputError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        R.pick_persona(agent, persona)


def test_a_persona_without_an_agent_file_is_refused() -> None:
    with pytest.raises(InputError, match="--persona needs an agent file"):
        R.pick_persona(None, "strict")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\nname: x\nno end\n", "opens front matter (---) and never closes it"),
        ("body\n## persona: a\nA\n## persona: a\nB", "defines the persona 'a' twice"),
        ("## persona:\nA", "has a persona heading without a valid id (line 1"),
        ("## persona: bad/id\nA", "without a valid id"),
        ("text\x00more", "holds a NUL byte"),
    ],
)
def test_malformed_agent_files_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        R.parse_agent_file(text, "a.md")
    assert "\n" not in str(err.value)


def test_an_agent_file_with_nothing_to_send_is_refused() -> None:
    agent = R.parse_agent_file("---\nname: x\n---\n\n## persona: empty\n\n", "e.md")
    with pytest.raises(InputError, match="has no text to send"):
        R.agent_block(agent, "empty")


def test_task_data_is_a_json_object_whose_extra_keys_are_ignored() -> None:
    assert R.looks_like_task('  {"prompt": "x"}') and not R.looks_like_task("fix {this}")
    task, ignored = R.parse_task('{"prompt": "fix it", "persona": "strict", "model": "m", "context": "C"}')
    assert task == {"prompt": "fix it", "persona": "strict", "model": "m", "context": "C"} and ignored == []
    # The older wrappers' shape: `task` is the prompt, any other key is named, never an error.
    task, ignored = R.parse_task('{"task": "Analyze this code", "files": ["a.py"], "colour": null}')
    assert task == {"prompt": "Analyze this code"} and ignored == ["files", "colour"]
    note = R.ignored_keys_note(ignored)
    assert note.startswith('the task data on stdin: "files", "colour" not used') and "\n" not in note
    # A context or task that is JSON is sent as its JSON text; the prompt wins over `task`.
    task, ignored = R.parse_task('{"prompt": "p", "task": "t", "context": {"a": [1, 2]}}')
    assert task == {"prompt": "p", "context": '{"a": [1, 2]}'} and ignored == ["task"]
    assert R.parse_task('{"task": {"goal": "x"}}')[0]["prompt"] == '{"goal": "x"}'
    many = R.ignored_keys_note([f"k{n}\x1b" for n in range(15)])
    assert "and 5 more" in many and "\x1b" not in many  # a key is quoted, control bytes escaped
    for text, message in [
        ('{"prompt": "x", "persona": 3}', "'persona' in the task data on stdin must be a string"),
        ('{"persona": "a"}', "the task data on stdin has no 'prompt' \\(or 'task'\\)"),
        ('{"task": "  ", "files": []}', "has no 'prompt'"),
        ("{not json", "stdin starts with '{' but is not a JSON object"),
        ('{"task": "a\\u0000b"}', "'task' in the task data on stdin holds a NUL byte"),
    ]:
        with pytest.raises(InputError, match=message):
            R.parse_task(text)
    with pytest.raises(InputError, match="is JSON list, not an object"):
        R.parse_task("[1, 2]")


def test_allowed_tools_are_split_at_commas_outside_parentheses() -> None:
    assert R.split_tools(["Read,Bash(git log:*, git diff:*)", " Edit ", "Read", ""]) == (
        "Read",
        "Bash(git log:*, git diff:*)",
        "Edit",
    )
    claude, codex = cli("claude"), cli("codex")
    assert R.allowed_tools_args("claude", claude, ("Read", "Edit")) == (["--allowed-tools=Read,Edit"], "")
    assert R.allowed_tools_args("gemini", cli("gemini"), ("read_file", "glob")) == (
        ["--allowed-tools=read_file", "--allowed-tools=glob"],
        "",
    )
    flags, note = R.allowed_tools_args("codex", codex, ("Read",))
    assert flags == [] and note.startswith("--allowed-tools is not applied: codex exec takes no list")
    assert R.allowed_tools_args("codex", codex, ()) == ([], "")


def test_a_ticket_id_is_a_file_name() -> None:
    assert R.ticket_name("PROJ-123") == "PROJ-123"
    assert R.ticket_name("../../etc/x y") == "_._etc_x_y"
    assert R.ticket_name("..hidden") == "hidden" and R.ticket_name("  ") == ""
    assert len(R.ticket_name("x" * 500)) == R.TICKET_CAP


@pytest.mark.parametrize(
    "ticket", ["../../x", "a..b", "...", "-rf", "--x", ".-.x", "x" * 500, "é/../\\..\x00", "a" * 63 + ".."]
)
def test_a_ticket_s_log_id_is_one_session_and_continue_from_take(ticket: str) -> None:
    from waaah_agent.core import names

    log_id = f"{R.ticket_name(ticket)}_11111111-2222-3333-4444-555555555555"
    assert names.problem(log_id) is None, (log_id, names.problem(log_id))


def test_prompt_size_warns_then_refuses_per_cli() -> None:
    claude = cli("claude")
    assert R.check_size("x" * claude.prompt_warn, "claude", claude) is None
    warning = R.check_size("x" * (claude.prompt_warn + 1), "claude", claude)
    assert warning and "over the 200,000 at which claude" in warning
    with pytest.raises(InputError, match="more than the 800,000 claude takes"):
        R.check_size("x" * (claude.prompt_max + 1), "claude", claude)
    # gemini's window is larger: the same prompt is fine there.
    assert R.check_size("x" * (claude.prompt_max + 1), "gemini", cli("gemini")) is None
    stats = R.prompt_stats("héllo", claude)
    assert stats == {
        "bytes": 6,
        "chars": 5,
        "tokens_estimate": 2,
        "warn_bytes": 200_000,
        "max_bytes": 800_000,
    }
    for name in ("gemini", "claude", "codex", "opencode"):
        figures = cli(name)
        assert 0 < figures.prompt_warn < figures.prompt_max <= 8 * 1024 * 1024 and figures.prompt_basis


@pytest.mark.parametrize(
    ("name", "mode", "yolo", "args"),
    [
        ("gemini", "acceptEdits", False, ["--approval-mode", "auto_edit"]),
        ("gemini", "plan", False, ["--approval-mode", "plan"]),
        ("gemini", None, True, ["--yolo"]),
        ("claude", "acceptEdits", False, ["--permission-mode", "acceptEdits"]),
        ("claude", "default", False, []),
        ("claude", "bypassPermissions", True, ["--dangerously-skip-permissions"]),
        ("codex", "acceptEdits", False, ["-c", 'sandbox_mode="workspace-write"']),
        ("codex", None, True, ["--dangerously-bypass-approvals-and-sandbox"]),
        ("opencode", "plan", False, ["--agent", "plan"]),
        ("opencode", None, True, ["--auto"]),
        ("opencode", None, False, []),
    ],
)
def test_permission_modes_map_to_each_clis_own_flags(
    name: str, mode: str | None, yolo: bool, args: list[str]
) -> None:
    assert R.permission_args(name, cli(name), mode, yolo) == args


def test_a_mode_a_cli_cannot_honour_is_an_error() -> None:
    with pytest.raises(
        InputError, match="opencode cannot run in permission mode 'acceptEdits'; it takes: default, plan"
    ):
        R.permission_args("opencode", cli("opencode"), "acceptEdits", False)
    with pytest.raises(InputError, match="--yolo and --permission-mode plan disagree"):
        R.permission_args("claude", cli("claude"), "plan", True)
    with pytest.raises(InputError, match="gemini cannot run in permission mode 'dontAsk'"):
        R.permission_args("gemini", cli("gemini"), "dontAsk", False)


def test_temperature_is_a_warning_where_a_cli_has_no_flag_for_it() -> None:
    assert R.temperature_args("claude", cli("claude"), None) == ([], "")
    args, warning = R.temperature_args("gemini", cli("gemini"), 0.2)
    assert args == [] and warning.startswith("--temperature 0.2 is not applied: gemini has no flag")
    takes = R.CliInputs(1, 2, "x", temperature=lambda t: ["--temp", str(t)])
    assert R.temperature_args("x", takes, 0.5) == (["--temp", "0.5"], "")


def test_skills_are_looked_for_in_the_workspace_then_home() -> None:
    assert R.skill_candidates(cli("claude"), "review") == [
        ("workspace", ".claude/skills/review/SKILL.md"),
        ("home", ".claude/skills/review/SKILL.md"),
    ]
    assert R.skill_candidates(cli("codex"), "review") == []
    assert R.slash_skill("review", "", "", "check x.py") == "/review check x.py"
    inlined = R.inline_skill("review", "Do it well.\n", "/s/review", "check x.py")
    assert inlined.startswith('<skill name="review" path="/s/review">\nDo it well.\n</skill>')
    assert inlined.endswith("check x.py")
    R.check_skill_name("code-review")
    with pytest.raises(InputError, match="invalid skill name '../x'"):
        R.check_skill_name("../x")


def test_empty_front_matter_is_front_matter() -> None:
    agent = R.parse_agent_file("---\n---\nShared text.\n", "a.md")
    assert agent.body.strip() == "Shared text." and agent.personas == {}
