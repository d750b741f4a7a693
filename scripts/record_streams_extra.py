"""Record the headless JSON streams of the real ``codex`` and ``opencode`` CLIs, offline.

    .venv/bin/python scripts/record_streams_extra.py [--install-dir .cache/extra-clis] [codex|opencode|all]

Install the pinned CLIs first::

    npm install --prefix .cache/extra-clis --no-audit --no-fund @openai/codex@0.171.0 opencode-ai@1.18.33

For each CLI it starts the fake OpenAI API (tests/doubles/fake_openai.py) on 127.0.0.1, creates a
throwaway HOME / CODEX_HOME / XDG directories and a throwaway git workspace, and runs one headless
prompt per scenario (``codex exec --json``, ``opencode run --format json``). The raw stdout, raw
stderr and the exit code of each run are saved as
``tests/fixtures/streams/<cli>-<version>/<scenario>.{stdout,stderr,exit}``; ``recording.json`` next
to them holds the argv, environment, config files, durations and the model requests each scenario
made. Only the throwaway root directory is replaced (by ``NEUTRAL_ROOT``); every other byte is kept.

Scenarios:

* ``answer``: a plain answer (usage input 123, output 45, cached 7 per model call);
* ``tool``: the model calls the built-in shell tool (``echo hi``), then echoes its output;
* ``resume``: a second prompt continuing the ``answer`` session with the CLI's own resume flag;
* ``server_error``: every model request gets HTTP 500;
* ``rate_limit``: every model request gets HTTP 429 with ``Retry-After: 1``;
* ``auth``: a wrong API key, answered with HTTP 401;
* ``no_key``: no API key in the environment at all;
* ``bad_model``: a model the API does not know, answered with HTTP 404 ``model_not_found``;
* ``unknown_model`` (opencode only): a model that is not in opencode's own config;
* ``thinking``: the model reasons first (a Responses API reasoning item with its summary for
  codex, reasoning_content deltas for opencode), then answers.

After each run, processes still carrying the throwaway root in their environment (a daemon the
CLI left behind) are reported in ``recording.json`` and terminated.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a plain script from the repository root

from tests.doubles.fake_openai import FAKE_KEY, FakeOpenAI  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "streams"
#: Stand-in for the throwaway root directory in the saved recordings.
NEUTRAL_ROOT = "/tmp/waaah-rec"
#: The env variable the CLIs read the API key from.
KEY_ENV = "FAKE_OPENAI_API_KEY"
WRONG_KEY = "sk-test-wrong-key-999999999999"
MODEL = {"codex": "gpt-5.5", "opencode": "gpt-fake"}
MISSING_MODEL = "gpt-missing"
PACKAGES = {"codex": "@openai/codex", "opencode": "opencode-ai"}

PROMPTS = {
    "answer": "FAKE-ANSWER Say hello.",
    "tool": "FAKE-TOOL Run `echo hi` in the shell and tell me what it printed.",
    "resume": "FAKE-ANSWER What did I ask you before?",
    "server_error": "FAKE-500 Say hello.",
    "rate_limit": "FAKE-429 Say hello.",
    "auth": "FAKE-ANSWER Say hello.",
    "no_key": "FAKE-ANSWER Say hello.",
    "bad_model": "FAKE-ANSWER Say hello.",
    "unknown_model": "FAKE-ANSWER Say hello.",
    "thinking": "FAKE-THINK Say hello.",
}
#: Seconds a run may take before it is stopped (the CLIs retry 5xx/429 on their own for a while).
TIMEOUTS = {"server_error": 120.0, "rate_limit": 120.0}
DEFAULT_TIMEOUT = 60.0


@dataclass
class Dirs:
    """The throwaway directories of one CLI's recording."""

    root: Path
    home: Path = field(init=False)
    ws: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.ws = self.root / "ws"
        for sub in ("home", "codex-home", "config", "data", "cache", "state"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.ws.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(self.ws)], check=True)
        (self.ws / "README.md").write_text("A throwaway workspace.\n", encoding="utf-8")


@dataclass
class Run:
    """One recorded scenario."""

    argv: list[str]
    env: dict[str, str]
    exit: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    timed_out: bool
    leftovers: list[str]


def base_env(dirs: Dirs, key: str | None) -> dict[str, str]:
    """A minimal environment: nothing from the caller's shell but PATH."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(dirs.home),
        "LANG": "C.UTF-8",
        "XDG_CONFIG_HOME": str(dirs.root / "config"),
        "XDG_DATA_HOME": str(dirs.root / "data"),
        "XDG_CACHE_HOME": str(dirs.root / "cache"),
        "XDG_STATE_HOME": str(dirs.root / "state"),
    }
    if key is not None:
        env[KEY_ENV] = key
    return env


# --------------------------------------------------------------------------------------------
# codex
# --------------------------------------------------------------------------------------------


def codex_config(dirs: Dirs, base_url: str) -> dict[str, str]:
    """``$CODEX_HOME/config.toml`` for the fake provider; returns {path: text} of the files written."""
    text = f"""model = "{MODEL["codex"]}"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake OpenAI"
base_url = "{base_url}/v1"
env_key = "{KEY_ENV}"
wire_api = "responses"

[projects."{dirs.ws}"]
trust_level = "trusted"

[features]
daemon_auto_start = false

[analytics]
enabled = false
"""
    path = dirs.root / "codex-home" / "config.toml"
    path.write_text(text, encoding="utf-8")
    return {str(path): text}


def codex_env(dirs: Dirs, key: str | None) -> dict[str, str]:
    """Environment of a codex run."""
    return dict(base_env(dirs, key), CODEX_HOME=str(dirs.root / "codex-home"))


def codex_argv(binary: Path, scenario: str, session: str | None) -> list[str]:
    """Headless codex argv of a scenario."""
    prompt = PROMPTS[scenario]
    if scenario == "resume":
        if session is None:
            raise RuntimeError("resume needs the session id of the answer run")
        return [str(binary), "exec", "resume", "--json", session, prompt]
    argv = [str(binary), "exec", "--json"]
    if scenario == "tool":
        argv.append("--dangerously-bypass-approvals-and-sandbox")
    if scenario == "bad_model":
        argv += ["-m", MISSING_MODEL]
    return [*argv, prompt]


def codex_session(stdout: bytes) -> str | None:
    """The thread id of a ``codex exec --json`` stream (its ``thread.started`` event)."""
    for event in _events(stdout):
        if event.get("type") == "thread.started":
            return str(event["thread_id"])
    return None


# --------------------------------------------------------------------------------------------
# opencode
# --------------------------------------------------------------------------------------------


def opencode_config(dirs: Dirs, base_url: str) -> dict[str, str]:
    """``$XDG_CONFIG_HOME/opencode/opencode.json`` for the fake provider."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"fake/{MODEL['opencode']}",
        "small_model": f"fake/{MODEL['opencode']}",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake OpenAI",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": f"{{env:{KEY_ENV}}}"},
                "models": {
                    MODEL["opencode"]: {"name": "GPT Fake"},
                    MISSING_MODEL: {"name": "GPT Missing"},
                },
            }
        },
        "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
    }
    text = json.dumps(config, indent=2) + "\n"
    path = dirs.root / "config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return {str(path): text}


def opencode_env(dirs: Dirs, key: str | None) -> dict[str, str]:
    """Environment of an opencode run."""
    return dict(base_env(dirs, key), OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1")


def opencode_argv(binary: Path, scenario: str, session: str | None) -> list[str]:
    """Headless opencode argv of a scenario."""
    # ERROR-level logs on stderr: the only place opencode names the cause of a local failure
    # (its JSON error event then just says "Unexpected server error").
    argv = [str(binary), "run", "--format", "json", "--print-logs", "--log-level", "ERROR"]
    if scenario == "thinking":  # waaah run passes it: opencode prints reasoning parts only then
        argv.insert(4, "--thinking")
    if scenario == "resume":
        if session is None:
            raise RuntimeError("resume needs the session id of the answer run")
        argv += ["--session", session]
    if scenario == "bad_model":
        argv += ["--model", f"fake/{MISSING_MODEL}"]
    if scenario == "unknown_model":
        argv += ["--model", "fake/not-in-config"]
    return [*argv, PROMPTS[scenario]]


def opencode_session(stdout: bytes) -> str | None:
    """The session id of an ``opencode run --format json`` stream (on every event)."""
    for event in _events(stdout):
        if event.get("sessionID"):
            return str(event["sessionID"])
    return None


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cli:
    """How to record one CLI."""

    name: str
    binary: str
    scenarios: tuple[str, ...]
    config: Callable[[Dirs, str], dict[str, str]]
    env: Callable[[Dirs, str | None], dict[str, str]]
    argv: Callable[[Path, str, str | None], list[str]]
    session: Callable[[bytes], str | None]


COMMON = ("answer", "tool", "resume", "server_error", "rate_limit", "auth", "no_key", "bad_model", "thinking")
CLIS = {
    "codex": Cli("codex", "codex", COMMON, codex_config, codex_env, codex_argv, codex_session),
    "opencode": Cli(
        "opencode",
        "opencode",
        (*COMMON, "unknown_model"),
        opencode_config,
        opencode_env,
        opencode_argv,
        opencode_session,
    ),
}


def _events(stdout: bytes) -> list[dict[str, Any]]:
    events = []
    for line in stdout.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def version_of(install_dir: Path, cli: str) -> str:
    """Installed version of a CLI, from its package.json."""
    manifest = install_dir / "node_modules" / PACKAGES[cli] / "package.json"
    return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])


def processes_under(root: Path) -> list[tuple[int, str]]:
    """(pid, command line) of processes whose environment names ``root`` (started by our runs)."""
    marker = str(root).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker not in (entry / "environ").read_bytes():
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        found.append((int(entry.name), cmd))
    return found


def end_group(pid: int) -> None:
    """Stop the process group ``pid`` leads (TERM, then KILL after 3 s)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def run_once(argv: list[str], env: dict[str, str], cwd: Path, timeout: float, root: Path) -> Run:
    """Run one headless CLI process with stdin closed; stop its group after ``timeout`` seconds."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        end_group(proc.pid)
        stdout, stderr = proc.communicate()
    seconds = round(time.monotonic() - start, 2)
    end_group(proc.pid)  # anything left in the CLI's own process group
    time.sleep(0.5)
    leftovers = processes_under(root)
    for pid, _ in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return Run(argv, env, proc.returncode, stdout, stderr, seconds, timed_out, [cmd for _, cmd in leftovers])


def neutralise(data: bytes, root: Path) -> bytes:
    """Replace the throwaway root (also JSON-escaped) by ``NEUTRAL_ROOT``."""
    real = str(root)
    for old, new in ((real, NEUTRAL_ROOT), (json.dumps(real)[1:-1], json.dumps(NEUTRAL_ROOT)[1:-1])):
        data = data.replace(old.encode(), new.encode())
    return data


def _neutral_text(text: str, root: Path) -> str:
    return neutralise(text.encode(), root).decode()


def summarise_requests(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the scenario asked the fake API (without the bulky bodies)."""
    first = requests[0]["timestamp"] if requests else 0.0
    return [
        {
            "at": round(r["timestamp"] - first, 2),
            "method": r["method"],
            "path": r["path"],
            "kind": r["kind"],
            "auth": r["auth"],
            "model": r["body"].get("model"),
            "user_texts": r["user_texts"],
            "tool_result": r["tool_result"],
            "reply": r["reply"],
        }
        for r in requests
    ]


def record(cli: Cli, install_dir: Path, only: list[str] | None = None) -> Path:
    """Record every scenario of ``cli``; returns the fixture directory."""
    binary = install_dir / "node_modules" / ".bin" / cli.binary
    version = version_of(install_dir, cli.name)
    out = FIXTURES / f"{cli.name}-{version}"
    out.mkdir(parents=True, exist_ok=True)
    # Not under /tmp: codex refuses to put its helper binaries under a temporary directory and
    # warns about it on stderr, which a real home never shows.
    cache = REPO / ".cache"
    cache.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="rec-streams-", dir=cache)).resolve()
    meta: dict[str, Any] = {"cli": cli.name, "version": version, "scenarios": {}}
    previous = out / "recording.json"
    if only and previous.exists():  # re-recording some scenarios keeps the others' notes
        meta["scenarios"] = json.loads(previous.read_text(encoding="utf-8")).get("scenarios", {})
    try:
        dirs = Dirs(root)
        with FakeOpenAI(api_key=FAKE_KEY, missing_models=(MISSING_MODEL,)) as fake:
            files = cli.config(dirs, fake.url)
            meta["fake_url"] = fake.url
            meta["config_files"] = {_neutral_text(k, root): _neutral_text(v, root) for k, v in files.items()}
            session: str | None = None
            for scenario in cli.scenarios:
                if only and scenario not in only and not (scenario == "answer" and "resume" in only):
                    continue
                key = {"auth": WRONG_KEY, "no_key": None}.get(scenario, FAKE_KEY)
                env = cli.env(dirs, key)
                argv = cli.argv(binary, scenario, session)
                before = len(fake.requests)
                timeout = TIMEOUTS.get(scenario, DEFAULT_TIMEOUT)
                run = run_once(argv, env, dirs.ws, timeout, root)
                if scenario == "answer":
                    session = cli.session(run.stdout)
                for ext, data in (("stdout", run.stdout), ("stderr", run.stderr)):
                    (out / f"{scenario}.{ext}").write_bytes(neutralise(data, root))
                (out / f"{scenario}.exit").write_text(f"{run.exit}\n", encoding="utf-8")
                shown_argv = [cli.binary, *run.argv[1:]]
                meta["scenarios"][scenario] = {
                    "argv": shown_argv,
                    "env": {k: _neutral_text(v, root) for k, v in sorted(env.items())},
                    "cwd": _neutral_text(str(dirs.ws), root),
                    "exit": run.exit,
                    "seconds": run.seconds,
                    "timeout": timeout,
                    "timed_out": run.timed_out,
                    "leftover_processes": [_neutral_text(c, root) for c in run.leftovers],
                    "requests": summarise_requests(fake.requests[before:]),
                }
                print(
                    f"{cli.name} {scenario}: exit {run.exit} in {run.seconds}s"
                    f"{' (timed out)' if run.timed_out else ''}, {len(fake.requests) - before} requests"
                    f"{', LEFTOVER ' + str(run.leftovers) if run.leftovers else ''}",
                    flush=True,
                )
        text = json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
        # The fake's port changes per run; keep recording.json stable across re-recordings.
        text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
        (out / "recording.json").write_text(text, encoding="utf-8")
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description="Record codex/opencode headless JSON streams offline.")
    parser.add_argument("cli", nargs="?", choices=[*CLIS, "all"], default="all")
    parser.add_argument("--install-dir", type=Path, default=REPO / ".cache" / "extra-clis")
    parser.add_argument("--only", nargs="*", default=None, help="scenarios to record (default: all)")
    args = parser.parse_args(argv)
    install_dir = args.install_dir.resolve()
    for name in list(CLIS) if args.cli == "all" else [args.cli]:
        out = record(CLIS[name], install_dir, args.only)
        print(f"{name} -> {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
