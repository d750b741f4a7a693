"""A name the user gives is a name, never a path: `--as`, `--resume ID`, `waaah run --session`,
`--continue-from`, `--continue-from-tree`, `--skill` and `--persona` each become a file name under `.waaah/`
or the user's folders, or an argument of a CLI. A path separator, `..`, a control character, a
leading `-` or `.`, or an over-long name is refused before anything is made: one line naming
the flag and what is wrong, exit 2, no file written anywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import assert_no_traceback, clean_env, run_waaah

BAD = ["../../x", "a/b", "-x", "x\x01y", "x\u202ey", "..x", ".hidden", "x" * 300, "x\\y"]


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "x.md").write_text("a workflow where `--as=../../x` would find one\n")
    return ws


def files_outside_waaah(ws: Path) -> list[Path]:
    root = ws.parent
    return sorted(
        p for p in root.rglob("*") if ".waaah" not in p.parts and ".git" not in p.parts and p.is_file()
    )


def assert_refused(done, flag: str) -> None:
    assert_no_traceback(done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(lines) == 1 and flag in lines[0] and "not a path" in lines[0], done.stderr


@pytest.mark.parametrize("name", BAD)
def test_a_workflow_name_that_is_a_path_writes_no_lock_anywhere(workspace, home, name):
    before = files_outside_waaah(workspace)
    done = run_waaah("agent", "--start=simulated", f"--as={name}", cwd=workspace, env=clean_env(home))
    assert_refused(done, "--as")
    assert files_outside_waaah(workspace) == before
    assert not list(workspace.rglob("*.lock"))


@pytest.mark.parametrize("name", [n for n in BAD if not n.startswith("-")])  # "-x" is an option there
def test_a_session_id_to_resume_that_is_a_path_is_refused(workspace, home, name):
    done = run_waaah("agent", "--start=simulated", "--resume", name, cwd=workspace, env=clean_env(home))
    assert_refused(done, "--resume")


@pytest.mark.parametrize("flag", ["--session", "--continue-from", "--continue-from-tree"])
@pytest.mark.parametrize("name", ["../x", "-x", "..x", "x\x1b]52;c;aGk=\x07", "x" * 300])
def test_a_run_id_that_is_a_path_or_an_option_is_refused(workspace, home, flag, name):
    done = run_waaah(
        "run", "--agent", "gemini", f"{flag}={name}", "hello", cwd=workspace, env=clean_env(home)
    )
    assert_refused(done, flag)
    assert not (workspace / ".waaah" / "runs").exists()


@pytest.mark.parametrize(("flag", "name"), [("--skill", "-x"), ("--skill", "a..b"), ("--persona", "../x")])
def test_a_skill_or_persona_that_is_a_path_is_refused(workspace, home, flag, name):
    agent_file = workspace / "agent.md"
    agent_file.write_text("---\nname: a\n---\nBe brief.\n\n## persona: p\nHi.\n")
    done = run_waaah(
        "run", "--agent", "gemini", "--agent-file", str(agent_file), f"{flag}={name}", "hello",
        cwd=workspace, env=clean_env(home),
    )  # fmt: skip
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "skill" in done.stderr or "persona" in done.stderr, (done.stdout, done.stderr)
