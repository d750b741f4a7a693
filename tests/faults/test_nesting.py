"""Files nested 100,000 deep: one line naming the file, never a RecursionError traceback.

Python's JSON and TOML parsers recurse once per level; every reader parses through
core/nesting.py, which refuses a text nested deeper than its limit as malformed data. Each file
waaah reads is tried here through the command that reads it: a config or a table the command
needs stops it in one line; state of waaah's own is set aside and the command carries on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults.conftest import assert_no_traceback, clean_env, run_waaah
from tests.faults.test_bad_input import (
    SID,
    a_state,
    fake_claude,
    put_session,
    run_env,
    start_agent,
    started,
    stop,
)
from tests.runtime.helpers import retry_until, session_dirs

DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_TOML = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
DEEP_YAML = "[" * 30_000 + "]" * 30_000 + "\n"  # under the file's 64 KiB cap


def one_line_naming(path: Path, text: str) -> list[str]:
    lines = [line for line in text.splitlines() if str(path) in line]
    assert len(lines) == 1, text[-3000:]
    return lines


@pytest.mark.parametrize("which", ["config", "prices"])
def test_a_deep_config_or_price_table_is_one_line_naming_it(workspace, home, tmp_path, which):
    fake_claude(tmp_path / "bin")
    path = tmp_path / f"{which}.toml"
    path.write_text(DEEP_TOML)
    extra = {"WAAAH_CONFIG": str(path)} if which == "config" else {"WAAAH_PRICES": str(path)}
    env = run_env(home, tmp_path / "bin", **extra)
    done = run_waaah("run", "hi", "--agent", "claude", "--max-cost", "5", cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 2
    [line] = one_line_naming(path, done.stderr)
    assert "nested deeper than 100 levels" in line, line


def test_a_committed_deep_routes_json_is_one_line_for_waaah_run_role(workspace, home, tmp_path):
    fake_claude(tmp_path / "bin")
    table = workspace / ".agent" / "routes.json"
    table.parent.mkdir()
    table.write_text(DEEP_JSON)
    done = run_waaah("run", "hi", "--role", "review", cwd=workspace, env=run_env(home, tmp_path / "bin"))
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 2
    [line] = one_line_naming(table, done.stderr)
    assert "nested deeper than 100 levels" in line and "fix it or remove it" in line, line


def test_a_deep_providers_file_is_one_line_naming_it(workspace, home, tmp_path):
    fake_claude(tmp_path / "bin")
    path = workspace / "providers.yaml"
    path.write_text(DEEP_YAML)
    done = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=run_env(home, tmp_path / "bin"))
    assert_no_traceback(done.stdout, done.stderr)
    [line] = one_line_naming(path, done.stderr)
    assert "nested deeper than 100 levels" in line, line


@pytest.mark.parametrize("resume", [True, False])
def test_a_deep_session_file_is_moved_aside_and_a_session_starts(workspace, home, resume):
    """Resumed: the corrupt path (moved aside, a fresh session). Not resumed: it is not even in
    the way of a new session."""
    bad = put_session(workspace, DEEP_JSON)
    proc = start_agent(workspace, clean_env(home), *(["--resume"] if resume else []))
    try:
        retry_until(lambda: len(session_dirs(workspace)) == 2 and started(workspace), timeout=30)
        status = run_waaah("status", cwd=workspace, env=clean_env(home))
        listed = run_waaah("sessions", cwd=workspace, env=clean_env(home))
    finally:
        out, err = stop(proc)
    assert_no_traceback(out, err, status.stdout, status.stderr, listed.stdout, listed.stderr)
    assert proc.returncode == 0, err[-2000:]
    assert status.returncode == 0 and listed.returncode == 0, status.stderr + listed.stderr
    if resume:
        [line] = one_line_naming(bad, out + err)
        assert "nested deeper than 100 levels" in line and "starting a fresh session" in line, line
        assert list(bad.parent.glob("session.json.corrupt-*")), "the bad file is kept for inspection"


def test_deep_lines_in_events_and_run_logs_are_left_out(workspace, home, tmp_path):
    """`waaah status`, `sessions`, `report` and `waaah run` over an events.jsonl and a run log
    holding a line nested 100,000 deep: those lines are skipped, the rest is read."""
    folder = put_session(workspace, json.dumps(a_state(workspace, status="exited"))).parent
    good = json.dumps({"ts": "2024-01-01T00:00:00+00:00", "event": "start", "agent": "simulated"})
    (folder / "events.jsonl").write_text(f"{good}\n{DEEP_JSON}\n")
    day = workspace / ".waaah" / "runs" / "2024-01-01"
    day.mkdir(parents=True)
    (day / "old.jsonl").write_text(DEEP_JSON + "\n")
    fake_claude(tmp_path / "bin")
    env = run_env(home, tmp_path / "bin")
    for args in (["status"], ["sessions"], ["report", SID, "--html", str(tmp_path / "night.html")]):
        done = run_waaah(*args, cwd=workspace, env=env)
        assert_no_traceback(done.stdout, done.stderr)
        assert done.returncode == 0, (args, done.stderr[-2000:])
    assert SID in run_waaah("sessions", cwd=workspace, env=env).stdout
    done = run_waaah("run", "hi", "--agent", "claude", cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    assert json.loads(done.stdout)["response"] == "Hello from the fake model."
    assert (tmp_path / "night.html").stat().st_size > 0


@pytest.mark.parametrize("which", ["breakers", "quota"])
def test_a_deep_breaker_or_quota_file_counts_as_nothing(workspace, home, tmp_path, which):
    """Nested 5,000 deep (under their files' caps): the run goes on as if there were none."""
    fake_claude(tmp_path / "bin")
    env = run_env(home, tmp_path / "bin")
    path = Path(env["XDG_STATE_HOME"]) / "waaah-agent" / which / "claude.json"
    path.parent.mkdir(parents=True)
    path.write_text("[" * 5000 + "]" * 5000)
    how = ["--agent", "claude"]
    if which == "quota":  # read to route a role
        (workspace / ".agent").mkdir()
        (workspace / ".agent" / "routes.json").write_text('{"roles": {"architect": {"chain": ["claude"]}}}')
        how = ["--role", "architect"]
    done = run_waaah("run", "hi", *how, cwd=workspace, env=env)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["response"] == "Hello from the fake model."
