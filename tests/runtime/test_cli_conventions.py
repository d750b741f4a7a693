"""The conventions of the `waaah` command line, through the real command: unknown options are
errors with a suggestion, arguments for the agent CLI only after `--`, declared choices and ranges,
--version, -h, shell completion, and the variables each option reads shown in its help."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.envelope_schema import refused
from tests.runtime.helpers import WAAAH, events, retry_until, session_dirs, sim_env

COMMANDS = (
    "agent",
    "run",
    "doctor",
    "sessions",
    "status",
    "replay",
    "route",
    "quota",
    "mcp-proxy",
    "mcp",
    "mcp install",
    "mcp uninstall",
)


def waaah(ws: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = sim_env(ws.parent / "home", **env)
    full["XDG_STATE_HOME"] = str(ws.parent / "state")
    return subprocess.run(
        [WAAAH, *args], cwd=ws, env=full, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    if list(done.args)[1:2] == ["run"]:  # `waaah run` prints its envelope on every path
        refused(done.stdout, "invalid_input", 2)
    else:
        assert done.stdout == ""
    return done.stderr.strip().splitlines()[-1]


def test_version_is_the_packages() -> None:
    done = subprocess.run([WAAAH, "--version"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert done.stdout == f"waaah {metadata.version('waaah-agent')}\n"


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_dash_h_is_help_on_every_command(command: str) -> None:
    args = command.split()
    short = subprocess.run([WAAAH, *args, "-h"], capture_output=True, text=True, timeout=30)
    long = subprocess.run([WAAAH, *args, "--help"], capture_output=True, text=True, timeout=30)
    assert short.returncode == long.returncode == 0
    assert short.stdout == long.stdout and short.stdout.startswith("Usage: waaah")
    assert "-h, --help" in short.stdout


def test_shell_completion_is_offered() -> None:
    top = subprocess.run([WAAAH, "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "--install-completion" in top and "--show-completion" in top
    shown = subprocess.run([WAAAH, "--show-completion", "bash"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0 and "complete" in shown.stdout and "waaah" in shown.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("agent", "--start=simulated", "--heartbeet", "5"),
            "No such option: --heartbeet (Possible options: --heartbeat",
        ),
        (("run", "hi", "--agnet", "claude"), "No such option: --agnet (Possible options: --agent"),
        (("agent", "--start=simulated", "stray"), "Got unexpected extra argument(s) (stray)"),
        (("doctor", "--bogus"), "No such option: --bogus"),
        (("status", "--jsn"), "No such option: --jsn (Possible options: --json"),
    ],
)
def test_unknown_options_and_stray_arguments_are_usage_errors(
    ws: Path, args: tuple[str, ...], message: str
) -> None:
    assert error_line(waaah(ws, *args)).startswith(f"Error: {message}")
    assert not (ws / ".waaah").exists()  # nothing started


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("agent", "--start=nope"),
            "Invalid value for '--start' (env var: 'WAAAH_START'): 'nope' is not one of 'claude', 'codex', 'gemini', 'opencode', 'simulated'",
        ),
        (
            ("agent", "--start=simulated", "--heartbeat", "-5"),
            "Invalid value for '--heartbeat' (env var: 'WAAAH_HEARTBEAT'): -5 is not more than 0",
        ),
        (
            ("agent", "--start=simulated", "--heartbeat", "0"),
            "Invalid value for '--heartbeat' (env var: 'WAAAH_HEARTBEAT'): 0 is not more than 0",
        ),
        (
            ("agent", "--start=simulated", "--stall-timeout", "0"),
            "Invalid value for '--stall-timeout' (env var: 'WAAAH_STALL_TIMEOUT'): 0 is not more than 0",
        ),
        (
            ("agent", "--start=simulated", "--restart-budget", "-1"),
            "Invalid value for '--restart-budget': -1 is not 0 or more",
        ),
        (
            ("agent", "--start=simulated", "--stop-grace", "-0.5"),
            "Invalid value for '--stop-grace': -0.5 is not 0 or more",
        ),
        (("agent", "--start=simulated", "--heartbeat", "soon"), "Invalid value for '--heartbeat'"),
        (
            ("doctor", "--agent", "nope"),
            "Invalid value for '--agent': 'nope' is not one of 'claude', 'codex'",
        ),
    ],
)
def test_choices_and_ranges_are_checked_by_the_parser(ws: Path, args: tuple[str, ...], message: str) -> None:
    assert error_line(waaah(ws, *args)).startswith(f"Error: {message}")
    assert not (ws / ".waaah").exists()


def test_help_lists_the_choices_ranges_and_variables() -> None:
    agent = subprocess.run([WAAAH, "agent", "-h"], capture_output=True, text=True, timeout=30).stdout
    flat = " ".join(agent.split())
    for shown in (
        "--start, --agent [claude|codex|gemini|opencode|simulated]",
        "--heartbeat SECONDS>0",
        "--stall-timeout SECONDS>0",
        "--restart-budget N>=0",
        "--stop-grace SECONDS>=0",
        "[env var: WAAAH_SERVER_URL]",
        "[env var: WAAAH_API_KEY]",
        "[-- CLI_ARGS...]",
    ):
        assert shown in flat, shown
    run = " ".join(
        subprocess.run([WAAAH, "run", "-h"], capture_output=True, text=True, timeout=30).stdout.split()
    )
    for shown in (
        "--agent, --start [claude|codex|gemini|opencode]",
        "--format [json|text|llm]",
        "--timeout SECONDS>0",
        "--fallback CLI[,CLI...]",
        "[env var: WAAAH_DEFAULT_AGENT]",
        "[env var: WAAAH_PARENT_ID]",
        "[env var: WAAAH_PASS_ENV]",
    ):
        assert shown in run, shown
    proxy = " ".join(
        subprocess.run([WAAAH, "mcp-proxy", "-h"], capture_output=True, text=True, timeout=30).stdout.split()
    )
    for name in ("WAAAH_SERVER_URL", "WAAAH_API_KEY", "WAAAH_AGENT_ID", "WAAAH_INBOX"):
        assert f"[env var: {name}]" in proxy, name


def test_a_bad_variable_is_still_the_settings_usage_error(ws: Path) -> None:
    done = waaah(ws, "agent", "--start=simulated", WAAAH_SERVER_CHECK_SECONDS="often")
    assert done.returncode == 2
    assert (
        "waaah: WAAAH_SERVER_CHECK_SECONDS must be a number of seconds (0 or more), not 'often'"
        in done.stderr
    )


def test_the_module_entry_point_has_the_same_conventions() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "waaah_agent.cli", "run", "-h"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    usage = " ".join(done.stdout.split())
    assert done.returncode == 0 and "Usage:" in usage and "[-- CLI_ARGS...]" in usage, done.stdout


# ----- arguments for the agent CLI: after `--` only ------------------------------------------------

STREAMS = Path(__file__).resolve().parents[1] / "fixtures" / "streams"


def test_waaah_agent_passes_what_follows_the_double_dash(ws: Path) -> None:
    env = sim_env(ws.parent / "home")
    proc = subprocess.Popen(
        [
            WAAAH,
            "agent",
            "--start=simulated",
            "--no-nudge",
            "--no-mcp",
            "--",
            "--model",
            "x",
            "--heartbeet",
            "5",
        ],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        retry_until(lambda: session_dirs(ws) and any(e["event"] == "start" for e in events(ws)), timeout=30)
        argv = next(e for e in events(ws) if e["event"] == "start")["argv"]
        assert argv[-4:] == ["--model", "x", "--heartbeet", "5"]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def fake_cli(folder: Path, name: str, recording: str) -> Path:
    """A `name` on PATH that writes its argv to argv.txt and replays a recorded stderr and exit."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    recorded = STREAMS / recording
    code = (recorded.parent / (recorded.name + ".exit")).read_text().strip()
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > "{folder / "argv.txt"}"\n'
        f"cat '{recorded.parent / (recorded.name + '.stderr')}' >&2\n"
        f"exit {code}\n"
    )
    script.chmod(0o755)
    return folder


def test_waaah_run_passes_what_follows_the_double_dash_and_reports_the_clis_usage_error(ws: Path) -> None:
    """`waaah run hi --agent gemini -- --bogus` against gemini 0.61.0's recorded answer to an
    unknown option (4 kB of stderr, exit 1): invalid input, exit 2, its first line whole."""
    bin_dir = fake_cli(ws.parent / "bin", "gemini", "gemini-0.61.0/unknown_option")
    done = waaah(ws, "run", "hi", "--agent", "gemini", "--", "--bogus", PATH=f"{bin_dir}:/usr/bin:/bin")
    assert done.returncode == 2, done.stderr
    envelope = json.loads(done.stdout)
    assert (envelope["error_type"], envelope["recoverable"]) == ("invalid_input", False)
    assert envelope["error"] == "Unknown argument: bogus"
    assert len(envelope["attempts"]) == 1  # not retried
    assert "waaah: invalid_input: Unknown argument: bogus" in done.stderr
    assert (bin_dir / "argv.txt").read_text().splitlines()[-1] == "--bogus"
