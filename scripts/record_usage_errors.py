"""Record what each pinned CLI prints when `waaah run` passes it an option it does not know.

    .venv/bin/python scripts/record_usage_errors.py [gemini|claude|codex|opencode ...]   (default: all)

Each CLI is started exactly as `waaah run` starts it (its adapter's headless argv for the prompt
"hi") with ``--bogus`` appended, as ``waaah run hi --agent CLI -- --bogus`` does, in a throwaway
HOME and git workspace with no API key and no network use (the CLIs reject the option while
parsing their arguments, before any request). Saved, byte for byte but for the throwaway paths:

    tests/fixtures/streams/<cli>-<version>/unknown_option.stdout
    tests/fixtures/streams/<cli>-<version>/unknown_option.stderr
    tests/fixtures/streams/<cli>-<version>/unknown_option.exit     the exit code, or "timeout"
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a plain script from the repository root
sys.path.insert(0, str(REPO / "scripts"))

from record_transcripts import neutralise  # noqa: E402

from tests.doubles.cli_homes import CLI_BIN_DIR, base_env, cli_bin  # noqa: E402
from waaah_agent import adapters  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "streams"
PACKAGES = {
    "gemini": "@google/gemini-cli",
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "opencode": "opencode-ai",
}
SCENARIO = "unknown_option"
BOGUS = "--bogus"
SESSION_ID = "11111111-1111-4111-8111-111111111111"
TIMEOUT = 60.0


def version_of(cli: str) -> str:
    manifest = CLI_BIN_DIR.parent / PACKAGES[cli] / "package.json"
    return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])


def argv_of(cli: str) -> tuple[list[str], bytes]:
    """What `waaah run hi --agent CLI -- --bogus` starts, and what it writes to the CLI's stdin."""
    headless = adapters.registry()[cli].headless
    assert headless is not None
    prompt = None if headless.stdin_prompt else "hi"
    session = SESSION_ID if headless.own_session_ids else ""
    argv = [str(cli_bin(cli)), *headless.argv(prompt, session, False, None), BOGUS]
    return argv, b"hi" if prompt is None else b""


def record(cli: str) -> Path:
    version = version_of(cli)
    out = FIXTURES / f"{cli}-{version}"
    root = Path(tempfile.mkdtemp(prefix="waaah-rec-")).resolve()
    try:
        ws = root / "ws"
        ws.mkdir()
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        env = base_env(root / "home")
        for name in list(env):
            if name.startswith(("OPENAI_", "CODEX_", "OPENCODE_")) or name.endswith("_API_KEY"):
                del env[name]
        env["CODEX_HOME"] = str(root / "home" / ".codex")
        (root / "home" / ".codex").mkdir(parents=True)
        argv, stdin = argv_of(cli)
        proc = subprocess.Popen(
            argv,
            cwd=ws,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(stdin, timeout=TIMEOUT)
            code = str(proc.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the CLI's own group only
            stdout, stderr = proc.communicate()
            code = "timeout"
        out.mkdir(parents=True, exist_ok=True)
        for suffix, data in (("stdout", stdout), ("stderr", stderr)):
            text = neutralise(data.decode("utf-8", "replace"), root)
            (out / f"{SCENARIO}.{suffix}").write_text(text, encoding="utf-8")
        (out / f"{SCENARIO}.exit").write_text(code + "\n", encoding="utf-8")
        shown = [Path(argv[0]).name, *argv[1:]]
        print(f"{cli} {version}: {' '.join(shown)} -> exit {code}, {len(stderr)} bytes of stderr")
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record each CLI's answer to an unknown option.")
    parser.add_argument("cli", nargs="*", help=f"any of {', '.join(PACKAGES)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [c for c in args.cli if c not in PACKAGES]
    if unknown:
        parser.error(f"unknown CLI {', '.join(unknown)}; choose from {', '.join(PACKAGES)}")
    for cli in args.cli or list(PACKAGES):
        record(cli)
    return 0


if __name__ == "__main__":
    sys.exit(main())
