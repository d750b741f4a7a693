"""`waaah run` refusing bad input with one clear line, before any CLI starts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.envelope_schema import refused
from tests.runtime.helpers import WAAAH
from waaah_agent.runtime.clis import CHECKOUT

INSTALL_CLAUDE = (
    f"{CHECKOUT}/scripts/install_clis.sh claude (the pinned 2.1.332, into {CHECKOUT}/.cache/clis; "
    "make run AGENT=claude does it too)"
)


def run(
    ws: Path, *args: str, path: str = "/usr/bin:/bin", stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": path,
        "HOME": str(ws.parent),
        "XDG_STATE_HOME": str(ws.parent / "state"),
        "LANG": "C.UTF-8",
        "WAAAH_CLI_DIR": str(ws.parent / "no-clis"),  # not the checkout's install: "not installed" means it
    }
    return subprocess.run(
        [WAAAH, "run", *args], cwd=ws, env=env, input=stdin, capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("hi", "--agent", "nope"),
            "Invalid value for '--agent': 'nope' is not one of 'claude', 'codex', 'gemini', 'opencode'",
        ),
        (
            ("hi", "--agent", "simulated"),
            "Invalid value for '--agent': simulated has no headless mode; choose one of: claude, codex,",
        ),
        (
            ("hi", "--agent", "gemini", "--fallback", "claude,nope"),
            "Invalid value for '--fallback' (env var: 'WAAAH_FALLBACK'): 'nope' is not one of 'claude', 'codex', 'gemini', 'opencode'",
        ),
        (
            ("hi", "--format", "yaml"),
            "Invalid value for '--format': 'yaml' is not one of 'json', 'text', 'llm'",
        ),
        (("hi", "--timeout", "0"), "Invalid value for '--timeout': 0 is not more than 0"),
        (("hi", "--timeout", "-3"), "Invalid value for '--timeout': -3 is not more than 0"),
        (
            ("hi", "--agnet", "claude"),
            "No such option: --agnet (Possible options: --agent, --agent-file, --parent)",
        ),
        (("hi", "there"), "Got unexpected extra argument(s) (there)"),
        (
            ("reviewer.md", "Review x.py"),  # the positional agent file of older wrappers
            "Got unexpected extra argument(s) (Review x.py): the prompt is one argument (quote it), "
            "and an agent file goes with --agent-file FILE",
        ),
        (("--list", "--json"), "No such option: --json (for JSON: --format json)"),
    ],
)
def test_bad_arguments_are_usage_errors_before_anything_starts(
    ws: Path, args: tuple[str, ...], message: str
) -> None:
    done = run(ws, *args)
    assert done.returncode == 2, done.stderr
    # The envelope on stdout (a caller reads it on every path), click's lines on stderr.
    assert refused(done.stdout, "invalid_input", 2)["error"] == message or message in done.stdout
    lines = done.stderr.strip().splitlines()
    assert lines[:2] == [
        "Usage: waaah run [OPTIONS] [prompt] [-- CLI_ARGS...]",
        "Try 'waaah run -h' for help.",
    ]
    assert lines[-1].startswith(f"Error: {message}"), lines[-1]
    assert not (ws / ".waaah").exists()  # nothing was started or logged


def test_a_bad_default_agent_variable_is_named(ws: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent), "WAAAH_DEFAULT_AGENT": "nope"}
    done = subprocess.run([WAAAH, "run", "hi"], cwd=ws, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and refused(done.stdout, "invalid_input", 2)
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: Invalid value for '--agent' (env var: 'WAAAH_DEFAULT_AGENT'): "
        "'nope' is not one of 'claude', 'codex', 'gemini', 'opencode'"
    )


@pytest.mark.parametrize(
    ("args", "stdin", "code", "message"),
    [
        ((), "   \n", 2, "the prompt is empty"),
        (  # the prompt put after `--`, where the CLI's own arguments go
            ("--agent", "gemini", "--", "--yolo", "Fix the test"),
            "",
            2,
            'the prompt is empty; what follows -- goes to the CLI as its arguments: give the prompt before it (waaah run "..." -- ARGS)',
        ),
        (("hi", "--context", "missing.md"), "", 2, "cannot read the context file missing.md"),
        (("hi", "--session", "abc"), "", 7, "unknown session id 'abc'"),
        (("hi", "--parent", "abc"), "", 7, "unknown parent id 'abc'"),
    ],
)
def test_bad_input_is_one_clear_line(
    ws: Path, args: tuple[str, ...], stdin: str, code: int, message: str
) -> None:
    done = run(ws, *args, stdin=stdin)
    assert done.returncode == code, done.stderr
    kind = "invalid_input" if code == 2 else "invalid_session"
    assert message in refused(done.stdout, kind, code)["error"]
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (ws / ".waaah" / "runs").exists()  # nothing was started or logged


def test_a_missing_cli_is_a_crash_with_the_install_command(ws: Path) -> None:
    done = run(ws, "hi", "--agent", "claude")
    assert done.returncode == 15
    envelope = refused(done.stdout, "provider_error", 15, "crash")
    assert envelope["recoverable"] is True  # another CLI, installed, may answer
    assert envelope["error"] == f"claude CLI not found. Install with: {INSTALL_CLAUDE}"
    assert envelope["attempts"][0]["outcome"] == "crash" and envelope["fallback_chain"] == []
    assert "waaah: crash: claude CLI not found" in done.stderr


def test_default_agent_comes_from_the_environment(ws: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ws.parent), "WAAAH_DEFAULT_AGENT": "claude"}
    env["XDG_STATE_HOME"] = str(ws.parent / "state")
    done = subprocess.run([WAAAH, "run", "hi"], cwd=ws, env=env, capture_output=True, text=True, timeout=30)
    assert json.loads(done.stdout)["attempts"][0]["agent"] == "claude"


def test_a_workspace_that_is_not_a_folder_is_refused_and_never_created(ws: Path) -> None:
    (ws / "a-file").write_text("x")
    for args in (("hi", "--agent", "claude"), ("--reasoning-fallback", "--session", "x")):
        for given in ("typo-dir", "a-file"):
            done = run(ws, *args, "--workspace", given)
            assert done.returncode == 2 and refused(done.stdout, "invalid_input", 2), done.stderr
            assert done.stderr == f"waaah: --workspace {given} is not a folder\n"
    assert not (ws / "typo-dir").exists()  # a typo never becomes a workspace with logs in it
