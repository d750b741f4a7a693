"""What a CLI prints that it should not: `waaah run` still ends with one valid envelope, shows
nothing of the CLI's output raw on the terminal, and keeps its run log readable. Each test puts a
fake CLI on PATH that prints the stdout, stderr and exit code given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults.conftest import assert_no_traceback, clean_env, run_waaah

SESSION = "11111111-2222-3333-4444-555555555555"


def strict_json(text: str) -> dict:
    """``text`` as JSON as any reader takes it: NaN and Infinity refused."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the output: not JSON"))


def fake_cli(
    home: Path, name: str, stdout: str, stderr: str = "", code: int = 0, script: str = ""
) -> dict[str, str]:
    """An environment with a fake ``name`` CLI on PATH that prints ``stdout`` and ``stderr`` and
    exits with ``code`` (or runs ``script``)."""
    bin_dir = home / "bin"
    bin_dir.mkdir(exist_ok=True)
    (home / f"{name}.out").write_text(stdout)
    (home / f"{name}.err").write_text(stderr)
    fake = bin_dir / name
    fake.write_text(
        "#!/bin/sh\n" + (script or f'cat "{home}/{name}.out"\ncat "{home}/{name}.err" >&2\nexit {code}\n')
    )
    fake.chmod(0o755)
    env = clean_env(home, PATH=f"{bin_dir}:/usr/bin:/bin", WAAAH_CLI_DIR=str(home / "no-clis"))
    env.update(XDG_STATE_HOME=str(home / "state"), WAAAH_FALLBACK="none", GEMINI_API_KEY="fake-key-123")
    return env


def gemini_lines(stats: str) -> str:
    return "\n".join(
        [
            f'{{"type":"init","session_id":"{SESSION}","model":"m"}}',
            '{"type":"message","role":"assistant","content":"hello","delta":true}',
            f'{{"type":"result","status":"success","stats":{stats}}}',
            "",
        ]
    )


@pytest.mark.parametrize("value", ["1e999", "NaN", "-Infinity", "-7"])
def test_token_counts_that_are_no_numbers_count_as_absent(workspace: Path, home: Path, value: str) -> None:
    stats = f'{{"total_tokens":{value},"input_tokens":{value},"output_tokens":5}}'
    env = fake_cli(home, "gemini", gemini_lines(stats))
    done = run_waaah("run", "hi", "--agent", "gemini", cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    envelope = strict_json(done.stdout)
    assert envelope["ok"] and envelope["response"] == "hello"
    assert envelope["tokens_used"]["input_tokens"] == 0 and envelope["tokens_used"]["output_tokens"] == 5
    log = Path(envelope["log_path"]).read_text()
    for line in log.splitlines():  # every record, the CLI's events too
        strict_json(line)
    assert '"record": "end"' in log


@pytest.mark.parametrize("value", ["NaN", "1e999", "-3.5"])
def test_a_cost_that_is_no_number_is_not_reported(workspace: Path, home: Path, value: str) -> None:
    result = (
        f'{{"type":"result","subtype":"success","is_error":false,"result":"hi","session_id":"{SESSION}",'
        f'"total_cost_usd":{value},"usage":{{"input_tokens":3,"output_tokens":2}}}}\n'
    )
    env = fake_cli(home, "claude", result, code=0)
    env["ANTHROPIC_API_KEY"] = "fake-anthropic-key-123"
    done = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    envelope = strict_json(done.stdout)
    assert envelope["ok"] and envelope["tokens_used"]["cost_usd"] == 0.0
    assert "cost_usd" not in envelope["tokens"]  # not reported, rather than a made-up 0
    for line in Path(envelope["log_path"]).read_text().splitlines():
        strict_json(line)


def test_an_error_of_ours_while_the_cli_runs_still_ends_its_process_group(tmp_path: Path) -> None:
    import os
    import time

    from waaah_agent.core.oneshot.streams import StreamParser
    from waaah_agent.runtime.oneshot import headless

    pids = tmp_path / "pids"
    script = f'sleep 300 & echo $! > "{pids}"; echo "{{}}"; exec sleep 300'

    def broken(line: str) -> None:
        raise RuntimeError("a defect in the line callback")

    with pytest.raises(RuntimeError):
        headless.run_cli(
            ["sh", "-c", script], None, {"PATH": "/usr/bin:/bin"}, tmp_path,
            time.monotonic() + 30, StreamParser(lambda event, summary: None), broken,
        )  # fmt: skip
    child = int(pids.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as stat:  # a zombie not yet reaped is gone too
            if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.1)
    else:
        pytest.fail("the CLI's process group outlived the error")


ESCAPES = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mred\n"


@pytest.mark.parametrize("fmt", ["json", "llm", "text"])
def test_escape_sequences_from_the_cli_never_reach_the_terminal(
    workspace: Path, home: Path, fmt: str
) -> None:
    env = fake_cli(home, "gemini", "", stderr=ESCAPES, code=1)
    for _ in range(2):  # the second run reads the breaker's last error the first one saved
        done = run_waaah("run", "hi", "--agent", "gemini", "--format", fmt, cwd=workspace, env=env)
        assert_no_traceback(done.stdout, done.stderr)
        assert done.returncode == 15, done.stderr
        for text in (done.stdout, done.stderr):
            assert "\x1b" not in text and "\x07" not in text, text
        assert "red" in done.stderr and "\\x1b" in done.stderr  # shown, not acted on
    if fmt == "json":
        envelope = strict_json(done.stdout)
        assert "\x1b" not in envelope["error"] and "PWNED" in envelope["error"]
    breaker = json.loads((home / "state" / "waaah-agent" / "breakers" / "gemini.json").read_text())
    assert "\x1b" not in breaker["last_error"]


@pytest.mark.parametrize(
    "stdout", ["not json at all\n", "", '{"type":"init","session_id":"x","model":"m"}\n']
)
def test_a_cli_that_exits_0_without_its_result_is_an_error_not_an_empty_answer(
    workspace: Path, home: Path, stdout: str
) -> None:
    env = fake_cli(home, "gemini", stdout, stderr="a warning on the side\n", code=0)
    done = run_waaah("run", "hi", "--agent", "gemini", cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 15, done.stderr
    envelope = strict_json(done.stdout)
    assert not envelope["ok"] and envelope["error_kind"] == "crash" and envelope["response"] == ""
    assert envelope["error"].startswith("no result from the CLI"), envelope["error"]
    if stdout.startswith("not json"):
        assert "not json at all" in envelope["error"] and "not json at all" in done.stderr
    assert envelope["stderr"] == "a warning on the side"
