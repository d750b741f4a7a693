"""Every way `waaah run` can fail prints its envelope on stdout, as a script calling it reads it:
a usage error (an unknown option, a bad value) as ``invalid_input`` with exit 2, a refused
prompt, an unknown session or parent, a log folder or providers file that cannot be used, a
missing CLI. Each envelope has the shape the older wrappers' callers read
(tests/envelope_schema.py), the one-line error stays on stderr, and no traceback anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.envelope_schema import refused
from tests.faults.conftest import assert_no_traceback, clean_env, run_waaah

#: (what goes wrong, arguments, stdin, extra variables, error_type, error_kind, exit code, said)
PATHS: list[tuple[str, tuple[str, ...], str, dict[str, str], str, str, int, str]] = [
    ("unknown option", ("hi", "--bogus"), "", {}, "invalid_input", "invalid_input", 2, "No such option"),
    ("bad value", ("hi", "--timeout", "0"), "", {}, "invalid_input", "invalid_input", 2, "is not more than 0"),
    ("timeout nan", ("hi", "--timeout", "nan"), "", {}, "invalid_input", "invalid_input", 2, "nan is not a number"),
    ("timeout inf", ("hi", "--timeout", "inf"), "", {}, "invalid_input", "invalid_input", 2, "inf is not a number"),
    ("cooldown nan", ("hi", "--breaker-cooldown", "nan"), "", {}, "invalid_input", "invalid_input", 2, "nan is not"),
    ("max cost nan", ("hi", "--max-cost", "nan"), "", {}, "invalid_input", "invalid_input", 2, "--max-cost"),
    ("temperature nan", ("hi", "--temperature", "nan"), "", {}, "invalid_input", "invalid_input", 2, "--temperature"),
    ("stray argument", ("hi", "there"), "", {}, "invalid_input", "invalid_input", 2, "unexpected extra"),
    ("empty prompt", (), "  \n", {}, "invalid_input", "invalid_input", 2, "the prompt is empty"),
    ("NUL in the prompt", (), "a\x00b", {}, "invalid_input", "invalid_input", 2, "NUL byte"),
    ("task with no prompt", (), '{"files": []}', {}, "invalid_input", "invalid_input", 2, "no 'prompt'"),
    ("unknown session", ("hi", "--session", "nope"), "", {}, "invalid_session", "invalid_session", 7, "nope"),
    ("unknown parent", ("hi", "--parent", "nope"), "", {}, "invalid_session", "invalid_session", 7, "nope"),
    ("log dir is a file", ("hi",), "", {"WAAAH_LOG_DIR": "a-file"}, "invalid_input", "invalid_input", 2, "a-file"),
    ("bad providers file", ("hi",), "", {"WAAAH_PROVIDERS": "missing.yaml"}, "invalid_input", "invalid_input", 2, "missing.yaml"),
    ("stream without json", ("hi", "--stream", "--format", "llm"), "", {}, "invalid_input", "invalid_input", 2, "--stream"),
    ("no such --list option", ("--list", "--json"), "", {}, "invalid_input", "invalid_input", 2, "--format json"),
    ("reasoning of nothing", ("--reasoning-fallback",), "", {}, "invalid_input", "invalid_input", 2, "--session"),
    ("CLI not installed", ("hi", "--agent", "claude"), "", {}, "provider_error", "crash", 15, "claude CLI not found"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "stdin", "extra", "error_type", "kind", "code", "said"),
    [p[1:] for p in PATHS],
    ids=[p[0] for p in PATHS],
)
def test_each_failure_prints_the_envelope(
    workspace: Path,
    home: Path,
    args: tuple[str, ...],
    stdin: str,
    extra: dict[str, str],
    error_type: str,
    kind: str,
    code: int,
    said: str,
) -> None:
    (workspace / "a-file").write_text("not a folder\n")
    env = clean_env(home, PATH="/usr/bin:/bin", WAAAH_CLI_DIR=str(home / "no-clis"), **extra)
    env["XDG_STATE_HOME"] = str(home / "state")
    done = run_waaah("run", *args, cwd=workspace, env=env, stdin=stdin)
    assert_no_traceback(done.stdout, done.stderr)
    assert done.returncode == code, done.stderr
    if "--stream" in args:  # --format llm: the envelope as another model reads it
        assert done.stdout.startswith(f"[error: {error_type}: ") and said in done.stdout
        assert done.stdout.rstrip().endswith("s]") and f"[exit:{code} | " in done.stdout
        return
    envelope = refused(done.stdout, error_type, code, kind)
    assert said in envelope["error"] and said in done.stderr
    assert envelope["recoverable"] is (error_type != "invalid_input")
