"""`waaah run`'s inputs through the real command: agent files (hostile ones too), personas,
context options, task data on stdin, prompt size, permission flags, skills and --dry-run. No
CLI is installed here: everything is checked before one would start."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.test_run_inputs import run

AGENT = "---\npersona: kind\n---\nYou review code. SHARED-TEXT\n\n## persona: strict\nSTRICT-TEXT\n\n## persona: kind\nKIND-TEXT\n"


def dry(ws: Path, *args: str, stdin: str = "") -> dict[str, Any]:
    done = run(ws, "--dry-run", "--agent", "claude", *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert not (ws / ".waaah").exists()  # no run log
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def one_line_error(done: Any, code: int = 2) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("waaah: "), done.stderr
    return str(lines[0])


def test_dry_run_shows_what_would_run_and_starts_nothing(ws: Path) -> None:
    (ws / "agent.md").write_text(AGENT)
    out = dry(ws, "--agent-file", "agent.md", "--persona", "strict", "--model", "opus", "review x.py")
    assert out["dry_run"] is True and out["agent"] == "claude" and out["model"] == "opus"
    assert out["binary"] is None and out["clis"][0]["installed"] is False  # none installed here
    assert out["argv"][:4] == ["claude", "-p", "<prompt>", "--output-format"]
    assert out["argv"][-2:] == ["--model", "opus"] and "review x.py" not in json.dumps(out["argv"])
    prompt = '<agent source="agent.md" persona="strict">\nYou review code. SHARED-TEXT\n\nSTRICT-TEXT\n</agent>\n\nreview x.py'
    assert out["prompt"] == {
        "bytes": len(prompt),
        "chars": len(prompt),
        "tokens_estimate": -(-len(prompt) // 4),
        "warn_bytes": 200_000,
        "max_bytes": 800_000,
    }
    assert out["persona"] == "strict" and out["agent_text_sent"] is True and out["context"] is None
    assert "claude is not installed" in out["warnings"][0]


def test_the_front_matter_names_the_default_persona(ws: Path) -> None:
    (ws / "agent.md").write_text(AGENT)
    assert dry(ws, "--agent-file", "agent.md", "hi")["persona"] == "kind"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "waaah: cannot read the agent file {p}: No such file or directory"),
        (lambda p: os.mkfifo(p), "waaah: cannot read the agent file {p}: is a FIFO, not a regular file"),
        (lambda p: p.mkdir(), "waaah: cannot read the agent file {p}: is a directory, not a regular file"),
        (
            lambda p: p.write_bytes(b"x" * (1024 * 1024 + 1)),
            "waaah: cannot read the agent file {p}: is 1,048,577 bytes, more than the 1,048,576",
        ),
        (
            lambda p: p.write_bytes(b"ok\n\xff\xfe"),
            "waaah: invalid_input: the agent file {p} is not valid UTF-8 (byte 0xff at offset 3)",
        ),
        (
            lambda p: p.write_text("No personas.\n"),
            "waaah: invalid_input: unknown persona 'strict' (--persona) in {p}; known: none",
        ),
    ],
)
def test_hostile_agent_files_are_one_line_errors(ws: Path, make: Any, message: str) -> None:
    path = ws / "a.md"
    make(path)
    done = run(ws, "--agent-file", "a.md", "--persona", "strict", "hi")
    assert one_line_error(done).startswith(message.format(p="a.md"))
    assert not (ws / ".waaah").exists()


def test_an_unknown_persona_is_an_invalid_input_envelope(ws: Path) -> None:
    (ws / "agent.md").write_text(AGENT)
    done = run(ws, "--agent-file", "agent.md", "--persona", "lazy", "hi")
    line = one_line_error(done)
    assert line == "waaah: invalid_input: unknown persona 'lazy' (--persona) in agent.md; known: strict, kind"
    envelope = json.loads(done.stdout)
    assert envelope["error_type"] == "invalid_input" and envelope["exit_code"] == 2


def test_the_context_options(ws: Path) -> None:
    (ws / "CONTEXT.md").write_text("W" * 60_000)
    out = dry(ws, "hi")
    assert out["context"] == {
        "source": str(ws / "CONTEXT.md"),
        "bytes": 60_000,
        "cut": True,
        "max_bytes": 51_200,
    }
    assert out["prompt"]["bytes"] > 51_200
    small = dry(ws, "--context-max", "1000", "hi")
    assert small["context"]["cut"] is True and small["prompt"]["bytes"] < 1_200
    assert dry(ws, "--skip-context-file", "hi")["context"] is None
    (ws / "docs").mkdir()
    (ws / "docs" / "CONTEXT.md").write_text("short")
    assert dry(ws, "--context-dir", "docs", "hi")["context"]["cut"] is False
    empty = ws / "empty"
    empty.mkdir()
    assert one_line_error(run(ws, "--context-dir", "empty", "hi")) == (
        "waaah: no CONTEXT.md in the context folder empty"
    )
    assert "not both" in one_line_error(run(ws, "--context-dir", "docs", "--context", "x", "hi"))


def test_task_data_on_stdin_and_flags_win(ws: Path) -> None:
    (ws / "agent.md").write_text(AGENT)
    task = {"prompt": "fix TASK-PROMPT", "persona": "kind", "agent_file": "agent.md", "model": "m1"}
    out = dry(ws, "--persona", "strict", stdin=json.dumps(task))
    assert out["persona"] == "strict" and out["model"] == "m1" and out["agent_file"] == "agent.md"
    with_context = dry(ws, stdin=json.dumps({"prompt": "p", "context": "CTX"}))
    assert with_context["context"] == {"source": "task data", "bytes": 3, "cut": False, "max_bytes": 51_200}
    # The older wrappers' callers' shape: `task` is the prompt, an extra key one warning, no error.
    extra = dry(ws, stdin='{"task": "x", "colour": "red", "files": ["a.py"]}')
    assert extra["warnings"][0] == (
        'the task data on stdin: "colour", "files" not used '
        "(read: prompt, task, persona, agent_file, skill, context, model, agent)"
    )
    line = one_line_error(run(ws, "--dry-run", stdin='{"task": "x", "model": 3}'))
    assert line == "waaah: invalid_input: 'model' in the task data on stdin must be a string"


def test_prompt_size_per_cli(ws: Path) -> None:
    out = dry(ws, stdin="w" * 200_001)
    assert out["prompt_on_stdin"] is True
    assert any("over the 200,000 at which claude" in w for w in out["warnings"])
    done = run(ws, "--agent", "claude", "--fallback", "gemini", stdin="w" * 800_001)
    assert "more than the 800,000 claude takes" in one_line_error(done)
    assert json.loads(done.stdout)["error_type"] == "invalid_input"


def test_permission_flags_and_temperature(ws: Path) -> None:
    out = dry(
        ws, "--fallback", "codex,gemini", "--permission-mode", "acceptEdits", "--temperature", "0.3", "hi"
    )
    argvs = {c["agent"]: c["argv"] for c in out["clis"]}
    assert argvs["claude"][-2:] == ["--permission-mode", "acceptEdits"]
    assert argvs["codex"][-2:] == ["-c", 'sandbox_mode="workspace-write"']
    assert argvs["gemini"][-2:] == ["--approval-mode", "auto_edit"]
    assert sum("--temperature 0.3 is not applied" in w for w in out["warnings"]) == 3
    done = run(ws, "--agent", "opencode", "--permission-mode", "acceptEdits", "hi")
    assert "opencode cannot run in permission mode 'acceptEdits'" in one_line_error(done)


def test_skills_are_found_where_the_cli_looks(ws: Path) -> None:
    skill = ws / ".claude" / "skills" / "review" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: review\n---\nReview carefully.\n")
    out = dry(ws, "--skill", "review", "check x.py")
    assert out["clis"][0]["skill_file"] == str(skill)
    home_skill = ws.parent / ".gemini" / "skills" / "review" / "SKILL.md"  # HOME is ws.parent
    home_skill.parent.mkdir(parents=True)
    home_skill.write_text("Review carefully.\n")
    both = dry(ws, "--skill", "review", "--fallback", "gemini", "check x.py")
    assert both["clis"][1]["skill_file"] == str(home_skill)
    assert both["clis"][1]["prompt"]["bytes"] > both["clis"][0]["prompt"]["bytes"]  # SKILL.md inlined
    missing = one_line_error(run(ws, "--agent", "claude", "--skill", "nope", "hi"))
    assert "no skill 'nope' for claude: looked for " + str(ws / ".claude/skills/nope/SKILL.md") in missing
    codex = one_line_error(run(ws, "--agent", "codex", "--skill", "review", "hi"))
    assert "--skill: codex has no skills waaah can run" in codex


def test_dry_run_resolves_each_cli_s_model_and_shows_the_budget(ws: Path) -> None:
    """The model each CLI of the chain would get (the workspace's providers.yaml, the bundled
    aliases), in argv and in model_resolution, and the run's budget, before anything starts."""
    (ws / "providers.yaml").write_text(
        "claude:\n  aliases: {quick: claude-haiku-5-5}\ngemini:\n  model: gemini-2.5-pro\n"
    )
    out = dry(ws, "--fallback", "gemini", "--model", "quick", "--max-tokens", "9000", "hi")
    claude, gemini = out["clis"]
    assert (claude["model"], claude["argv"][-2:]) == ("claude-haiku-5-5", ["--model", "claude-haiku-5-5"])
    assert claude["model_resolution"] == "quick -> claude-haiku-5-5 (alias, providers.yaml)"
    assert out["model"] == "claude-haiku-5-5" and out["model_resolution"] == claude["model_resolution"]
    assert gemini["model"] == "gemini-2.5-pro" and gemini["argv"][-2:] == ["--model", "gemini-2.5-pro"]
    assert "providers.yaml" in gemini["model_resolution"]
    assert out["budget"] == {"tokens": 0, "spent": False, "max_tokens": 9000}
    assert dry(ws, "hi")["budget"] is None


@pytest.mark.parametrize(
    ("args", "stdin", "extra_env", "said"),
    [
        ((), '{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}", {}, "is not a JSON object"),
        (
            (),
            '{"prompt": "x", "agent_file": "a\\u0000b"}',
            {},
            "'agent_file' in the task data on stdin holds a NUL",
        ),
        (("q", "--context-dir", "a" * 300), "", {}, "--context-dir cannot be used (File name too long)"),
        (("q",), "", {"WAAAH_PROVIDERS": "a" * 300}, "WAAAH_PROVIDERS names a path that cannot be used"),
    ],
)
def test_absurd_task_data_and_paths_are_one_line_never_a_traceback(
    ws: Path, args: tuple[str, ...], stdin: str, extra_env: dict[str, str], said: str
) -> None:
    from tests.runtime.helpers import WAAAH

    env = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent), "LANG": "C.UTF-8", **extra_env}
    done = subprocess.run(
        [WAAAH, "run", "--agent", "claude", "--dry-run", *args],
        cwd=ws,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert said in one_line_error(done)


def test_dry_run_masks_the_secrets_a_real_run_masks(ws: Path) -> None:
    from tests.runtime.helpers import WAAAH

    secret = "sk-ant-api03-" + "S3CR3T" * 6
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent), "LANG": "C.UTF-8", "ANTHROPIC_API_KEY": secret}
    args = ["run", "q", "--agent", "claude", "--dry-run", "--", "--settings", f'{{"apiKey": "{secret}"}}']
    done = subprocess.run([WAAAH, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr and "--settings" in done.stdout


def test_paths_without_list_is_a_usage_error_and_a_dry_run_makes_no_log_folder(ws: Path) -> None:
    from tests.runtime.test_run_inputs import run as plain_run

    done = plain_run(ws, "explain x.py", "--paths")
    assert done.returncode == 2 and "only with --list" in done.stderr
    from tests.runtime.helpers import WAAAH

    env = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent), "WAAAH_LOG_DIR": str(ws.parent / "logs")}
    done = subprocess.run(
        [WAAAH, "run", "q", "--agent", "claude", "--dry-run"], cwd=ws, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and not (ws.parent / "logs").exists(), done.stderr
