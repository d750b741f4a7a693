"""`waaah run` as a drop-in for callers of the older wrappers, over the real gemini and claude
CLIs offline: every envelope is checked against their shape as a JSON schema
(tests/envelope_schema.py): an answer with reasoning and a tool call, a skill run, each error
class the fake model API can bring about; then what those callers pass in (their stdin task,
--allowed-tools, --env, a ticket id naming the log, --verbose) and the default fallback chain."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.doubles.fake_model import FakeModel, HttpError, Rule, Text, ToolCall
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import both_env, records, waaah_run
from tests.envelope_schema import check
from tests.runtime.helpers import WAAAH

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def read_call(cli: str, path: Path) -> ToolCall:
    return ToolCall("read_file" if cli == "gemini" else "Read", {"file_path": str(path)}, server=None)


def write_call(cli: str, path: Path) -> ToolCall:
    args = {"file_path": str(path), "content": "written by the model"}
    return ToolCall("write_file" if cli == "gemini" else "Write", args, server=None)


def test_an_answer_with_reasoning_and_a_tool_call(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    notes = ws / "notes.txt"
    notes.write_text("the notes\n")
    turn = [read_call(cli, notes), Text("Done reading.", thinking="I should read the notes first.")]
    with FakeModel([Rule(turn, marker="SHAPE-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "SHAPE-MARKER read the notes", "--agent", cli)
    assert code == 0, err
    check(out)
    assert out["response"] == "Done reading." and out["session_id"] == out["attempts"][-1]["session_id"]
    assert out["reasoning"] == "I should read the notes first."
    # claude streams its thinking; gemini's stream has none, its session file holds the thoughts.
    source = "raw_output" if cli == "claude" else "session_assistant"
    assert out["metadata"] == {
        "token_usage_available": True,
        "reasoning_available": True,
        "reasoning_source": source,
        "reasoning_absent_reason": "available",
        "tool_activity": {
            "call_count": 1,
            "write_count": 0,
            "error_count": 0,
            "tool_names": [read_call(cli, notes).name],
            "result_classes": ["read"],
            "activity_class": "tool_active",
            "source": f"wrapper:{cli}",
            "class_counts": {"read": 1},
        },
    }
    used = out["tokens_used"]
    assert used["estimated_output_tokens"] == len("Done reading.") // 4
    assert used["input_tokens"] == out["tokens"]["input"] and used["total_tokens"] == out["tokens"]["total"]
    assert out["model_resolution"] == "(none) -> (CLI default) (nothing configured)"
    assert (out["used_fallback"], out["max_attempts"], out["circuit_state"]) == (False, 4, "closed")
    assert "skill" not in out and "error" not in out


def test_a_skill_run_names_its_skill(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    skill = ws / {"gemini": ".gemini", "claude": ".claude"}[cli] / "skills" / "greet" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: greet\ndescription: Greets.\n---\nSKILL-BODY: greet warmly.\n")
    with FakeModel([Rule(Text("Hello there."), marker="SKILL-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "SKILL-MARKER greet me", "--agent", cli, "--skill", "greet")
        assert code == 0, err
        assert "SKILL-BODY" in json.dumps(fake.main_requests()[-1]["body"])
    assert check(out)["skill"] == "greet" and out["response"] == "Hello there."
    assert out["metadata"]["reasoning_absent_reason"] == "model_not_emitted" and out["reasoning"] == ""


#: (CLI, what the fake model does, extra arguments, error_type, error_kind, exit code); a case
#: with no rule runs without a key.
ERRORS: list[tuple[str, HttpError | Text | None, tuple[str, ...], str, str, int]] = [
    ("claude", None, (), "provider_error", "auth", 6),
    ("gemini", HttpError(429, retryable=False), (), "quota", "quota", 18),
    # a wait of 10 s for the rate limit does not fit in 8 s: no retry
    ("claude", HttpError(429, retryable=False), ("--timeout", "8"), "rate_limit", "rate_limit", 13),
    ("claude", HttpError(500, retryable=False), (), "provider_error", "provider_error", 19),
    ("gemini", HttpError(404), ("--model", "gemini-9-ultra"), "invalid_model", "invalid_model", 14),
    ("claude", HttpError(400), (), "invalid_input", "invalid_input", 2),
    ("claude", Text("too late", delay=60), ("--timeout", "6"), "timeout", "timeout", 12),
]


@pytest.mark.parametrize(
    ("cli", "reply", "args", "error_type", "kind", "code"),
    ERRORS,
    ids=[f"{e[0]}-{e[4]}" for e in ERRORS],
)
def test_each_error_class_has_the_error_shape(
    tmp_path: Path,
    cli: str,
    reply: HttpError | Text | None,
    args: tuple[str, ...],
    error_type: str,
    kind: str,
    code: int,
) -> None:
    ws = workspace_for(tmp_path)
    rules = [Rule(reply, marker="FAIL-MARKER")] if reply is not None else []
    with FakeModel(rules) as fake:
        env = both_env(tmp_path, ws, fake.url, api_key="default" if reply is not None else None)
        got, out, err = waaah_run(ws, env, "FAIL-MARKER go", "--agent", cli, *args)
    assert got == code, err
    check(out)
    assert (out["error_type"], out["error_kind"], out["exit_code"]) == (error_type, kind, code)
    assert out["error"] and out["attempts"][-1]["outcome"] == kind
    assert f"waaah: {kind}: " in err


def test_a_lost_session_is_invalid_session(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel([Rule(Text("first"), marker="LOST-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, first, err = waaah_run(ws, env, "LOST-MARKER one", "--agent", "claude")
        assert code == 0, err
        sid = first["session_id"]
        kept = [p for p in (tmp_path / "home").rglob(f"{sid}.jsonl")]
        assert kept, "claude wrote no session file"
        for path in kept:
            path.unlink()
        code, out, err = waaah_run(ws, env, "LOST-MARKER two", "--session", sid)
    assert code == 7, err
    check(out)
    assert (out["error_type"], out["error_kind"], out["recoverable"]) == (
        "invalid_session",
        "invalid_session",
        True,
    )
    assert out["session_id"] == sid and out["metadata"]["reasoning_absent_reason"] == "error_path"


def test_the_other_usable_clis_follow_when_no_chain_is_given(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    rules = [
        Rule(HttpError(429, retryable=False), marker="CHAIN-MARKER", api="gemini"),  # a spent quota
        Rule(Text("claude answered"), marker="CHAIN-MARKER", api="anthropic"),
    ]
    with FakeModel(rules) as fake:
        env = both_env(tmp_path, ws, fake.url)
        del env["WAAAH_FALLBACK"]
        code, out, err = waaah_run(ws, env, "CHAIN-MARKER go", "--agent", "gemini")
        assert code == 0, err
        check(out)
        assert out["agent"] == "claude" and out["response"] == "claude answered"
        assert [(a["agent"], a["outcome"]) for a in out["attempts"]] == [
            ("gemini", "quota"),
            ("claude", "ok"),
        ]
        assert (out["used_fallback"], out["circuit_state"]) == (True, "closed")
        start = records(out["log_path"], "start")[0]
        # codex is installed but has no login here, opencode is never a default: claude alone.
        assert (start["fallback"], start["fallback_source"]) == (["claude"], "default")
        assert out["max_attempts"] == 2 * 4
        # Opted out: the flag, the variable, the config file's empty list.
        config = tmp_path / "config.toml"
        config.write_text("fallback = []\n")
        for n, (args, more) in enumerate(
            ((("--no-fallback",), {}), ((), {"WAAAH_FALLBACK": "none"}), ((), {"WAAAH_CONFIG": str(config)}))
        ):
            more["XDG_STATE_HOME"] = str(tmp_path / f"state-{n}")  # no breaker opened by the runs before
            code, out, err = waaah_run(ws, {**env, **more}, "CHAIN-MARKER go", "--agent", "gemini", *args)
            assert code == 18, (args, more, err)
            check(out)
            assert [a["agent"] for a in out["attempts"]] == ["gemini"] and out["used_fallback"] is False
            assert (out["error_type"], out["max_attempts"]) == ("quota", 4)


def test_allowed_tools_reach_each_cli_as_it_takes_them(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    target = ws / "out.txt"
    rules = [
        Rule([write_call(cli, target), Text("done")], marker="DENIED-MARKER"),
        Rule([write_call(cli, target), Text("done")], marker="ALLOWED-MARKER"),
    ]
    with FakeModel(rules) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "DENIED-MARKER write it", "--agent", cli)
        assert code == 0, err
        # Headless, a write needs approval: claude asks for it, gemini does not offer the tool.
        assert not target.exists() and out["metadata"]["tool_activity"]["activity_class"] == "tool_errors"
        tool = write_call(cli, target).name
        code, out, err = waaah_run(
            ws, env, "ALLOWED-MARKER write it", "--agent", cli, "--allowed-tools", tool
        )
        assert code == 0, err
    assert target.read_text() == "written by the model"
    check(out)
    assert out["metadata"]["tool_activity"]["activity_class"] == "write_active"
    argv = records(out["log_path"], "attempt")[0]["argv"]
    assert f"--allowed-tools={tool}" in argv


def test_env_gives_the_cli_one_more_variable_masked_in_the_log(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    secret = "tok-4f9a1c77e2b84d0d"
    bash = ToolCall("Bash", {"command": "printenv CALLER_API_TOKEN PLAIN_SETTING"}, server=None)
    rules = [
        Rule(Text("the variables were there"), tool_result="Bash", result_has="plain-value"),
        Rule(Text("the variables were missing"), tool_result="Bash"),
        Rule(bash, marker="ENV-MARKER"),
    ]
    with FakeModel(rules) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(
            ws, env, "ENV-MARKER show them", "--agent", "claude", "--allowed-tools", "Bash",
            "--env", f"CALLER_API_TOKEN={secret}", "--env", "PLAIN_SETTING=plain-value",
        )  # fmt: skip
        assert code == 0, err
        results = [r["tool_result_text"] for r in fake.main_requests() if r.get("tool_result_text")]
    assert out["response"] == "the variables were there" and secret in results[-1]
    log = Path(out["log_path"]).read_text()
    assert "plain-value" in log and secret not in log  # a secret-looking name: masked where we write
    assert secret not in json.dumps(out)


def test_a_ticket_id_names_the_log(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel([Rule(Text("ok"), marker="TICKET-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(
            ws, {**env, "A8_TICKET_ID": "PROJ-7"}, "TICKET-MARKER a", "--agent", "claude"
        )
        assert code == 0, err
        log = Path(out["log_path"])
        assert log.name == f"{out['log_id']}.jsonl" and out["log_id"] == f"PROJ-7_{out['session_id']}"
        code, again, err = waaah_run(ws, env, "TICKET-MARKER b", "--session", out["log_id"])
        assert code == 0 and again["log_path"] == str(log), err  # the log id continues the run
        code, other, err = waaah_run(
            ws,
            {**env, "WAAAH_TICKET_ID": "T/9"},
            "TICKET-MARKER c",
            "--agent",
            "claude",
            "--ticket",
            "../T 10",
        )
        assert code == 0, err
    assert Path(other["log_path"]).name.startswith("_T_10_") and Path(other["log_path"]).parent == log.parent


def test_the_cli_s_stderr_is_kept_on_success_and_verbose_says_each_record(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel([Rule(Text("fine"), marker="LOUD-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "LOUD-MARKER go", "--agent", "gemini", "--yolo", "--verbose")
    assert code == 0, err
    assert "YOLO mode is enabled" in check(out)["stderr"]  # gemini's own line, on stderr
    end = records(out["log_path"], "attempt_end")[-1]
    assert end["outcome"] == "ok" and "YOLO mode is enabled" in end["stderr"]
    debug = [line for line in err.splitlines() if line.startswith("waaah: debug: ")]
    kinds = [json.loads(line.removeprefix("waaah: debug: ")[:1000]).get("record") for line in debug[:2]]
    assert kinds[0] == "start" and any('"record": "end"' in line for line in debug)


def test_llm_answers_are_cut_by_lines_and_a_cut_context_is_a_warning(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    answer = "\n".join(f"row {n}" for n in range(500))  # 4 KB: only the line count is over
    (ws / "big.md").write_text("context " * 100)
    with FakeModel([Rule(Text(answer), marker="ROWS-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        outs = []
        for more in ((), ("--llm-max-lines", "30")):
            done = _run_text(ws, env, "ROWS-MARKER list", "--agent", "claude", "--format", "llm",
                             "--context", "big.md", "--context-max", "100", *more)  # fmt: skip
            outs.append(done)
    default, short = (text.splitlines() for text in outs)
    assert default[:133] == answer.splitlines()[:133] and default[133].startswith("[... ")
    assert "(300 lines) cut; full output: " in default[133] and default[134:201] == answer.splitlines()[433:]
    assert short[:20] == answer.splitlines()[:20] and short[21:31] == answer.splitlines()[490:]
    warning = "[warning: the context file big.md was cut to 100 of 800 bytes (--context-max)]"
    assert warning in default and short[-1].startswith("[exit:0 | ")


def test_the_older_wrappers_stdin_task_is_taken(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    task = {"task": "TASKDATA-MARKER analyze this code", "context": {"files": ["a.py"]}, "ticket": "X-1"}
    with FakeModel([Rule(Text("analyzed"), marker="TASKDATA-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "--agent", "gemini", stdin=json.dumps(task))
        assert code == 0, err
        prompt = fake.main_requests()[-1]["prompt_text"]
    assert check(out)["response"] == "analyzed"
    assert "TASKDATA-MARKER analyze this code" in prompt and '{"files": ["a.py"]}' in prompt
    note = 'the task data on stdin: "ticket" not used'
    assert out["warnings"][0].startswith(note) and f"waaah: warning: {note}" in err


def _run_text(ws: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run([WAAAH, "run", *args], cwd=ws, env=env, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr
    return done.stdout
