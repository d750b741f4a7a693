"""`waaah doctor`: one line per check, ok / warn / fail, each with the fix."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from waaah_agent import adapters, settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core.versions import Standing, judge
from waaah_agent.errors import UsageError, WorkflowNotFound
from waaah_agent.runtime import clis, key_file, releases
from waaah_agent.runtime.mcp import setup as mcp_setup
from waaah_agent.runtime.mcp.givers import giver
from waaah_agent.runtime.mcp.waaah import check_server
from waaah_agent.runtime.oneshot import breakers
from waaah_agent.runtime.private import private_dir
from waaah_agent.runtime.workspace import find_workflow, git_root


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "warn", "fail"; "skip": a CLI not used here (never a failure)
    detail: str
    fix: str = ""
    # A CLI's check: its installed version and where it stands (core/versions.py Standing).
    version: str = ""
    standing: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name}: {self.detail}"
        return f"{text}  -> {self.fix}" if self.fix else text

    def to_json(self) -> dict[str, str]:
        found = asdict(self)
        return {k: v for k, v in found.items() if v or k not in ("version", "standing")}


def run_checks(
    env: Mapping[str, str],
    workspace: Path,
    workflow: str,
    agents: list[str] | None,
    server: str | None,
    api_key: str | None,
) -> list[Check]:
    chosen = used_clis(env, agents)
    checks: list[Check] = []
    for name in chosen:
        adapter = adapters.registry()[name]
        checks.append(check_cli(adapter, env, required=True))
        if not adapter.interactive or clis.find(adapter, env) is None:
            continue  # headless only, or not installed: no login or MCP entry of it to speak of
        checks.append(check_login(adapter, env))
        checks.append(check_mcp_entry(adapter, env))
        if adapter.headless is not None:
            checks.append(check_breaker(name))
    others = [n for n in adapters.names() if n not in chosen and not adapters.registry()[n].simulated]
    checks += [check_unused(adapters.registry()[name], env) for name in others]
    checks.append(check_server_reachable(env, server, api_key, chosen))
    root = git_root(workspace)
    checks.append(check_git(workspace, root))
    checks.append(check_workflow(workflow, root or workspace))
    checks.append(check_writable(root or workspace))
    checks.append(check_leftovers(root or workspace))
    checks.append(check_homes(env))
    return checks


def check_homes(env: Mapping[str, str]) -> Check:
    """Per-run homes no running session holds: what the CLI wrote there is not back yet."""
    from waaah_agent.runtime.mcp import homes

    found = homes.leftovers(env)
    if not found:
        return Check("per-run homes", "ok", "none left behind")
    return Check(
        "per-run homes",
        "warn",
        "left behind, holding what the CLI wrote there: " + "; ".join(homes.describe(f) for f in found),
        f"carry it back and remove them with: {homes.SETTLE_COMMAND}",
    )


def used_clis(env: Mapping[str, str], agents: list[str] | None) -> list[str]:
    """The CLIs this user uses: those named with --agent, else the configured default
    (``WAAAH_DEFAULT_AGENT``, from the environment or the config file; else gemini)."""
    return list(agents) if agents else [settings.run_agent_name(None, None, env)]


def check_unused(adapter: Adapter, env: Mapping[str, str]) -> Check:
    """A CLI this user does not use: listed, never failed; its credentials only when installed."""
    name = f"{adapter.name} CLI"
    use = f"to use it: waaah doctor --agent {adapter.name}"
    found = clis.find(adapter, env)
    if found is None:
        return Check(name, "skip", f"not set up (not installed; not used here, {use})")
    if not adapter.interactive:
        return Check(name, "skip", f"installed ({found}), not used here; {use}")
    login = "no credentials found" if adapter.needs_login(env) else "credentials found"
    return Check(name, "skip", f"installed ({found}), {login}; not used here, {use}")


def check_leftovers(workspace: Path) -> Check:
    """Processes a killed supervisor or `waaah run` left running (each verified by start time)."""
    from waaah_agent.runtime import reaper
    from waaah_agent.runtime.night import report
    from waaah_agent.runtime.oneshot import runlog

    found = [(f"session {r.id}", r.leftovers) for r in report.reports(workspace) if r.leftovers]
    found += [(f"run {run.id}", run.leftovers) for run in runlog.all_runs(workspace) if run.leftovers]
    if not found:
        return Check("leftover processes", "ok", "none")
    records = [rec for _, recs in found for rec in recs]
    where = "; ".join(f"{name}: {reaper.describe(recs)}" for name, recs in found)
    return Check(
        "leftover processes",
        "warn",
        f"still running after their supervisor was killed: {where}",
        f"stop them with: {reaper.kill_command(records)}",
    )


def check_breaker(name: str) -> Check:
    """The `waaah run` circuit breaker of this CLI (shared by all runs of this user)."""

    from waaah_agent.core.oneshot.resilience import BreakerState

    store = breakers.BreakerStore(config=settings.breaker_config(default_env()))
    breaker = store.get(name)
    now = time.time()
    line = breakers.breaker_line(name, breaker, now)
    if breaker.state(now) is BreakerState.CLOSED:
        return Check(f"{name} run breaker", "ok", line)
    return Check(
        f"{name} run breaker",
        "warn",
        line,
        f"fix the cause (see the last error), or delete {store.file(name)} to close it now",
    )


#: binary -> (its --version line, milliseconds the call took): asked once per `waaah doctor`.
_VERSIONS: dict[str, tuple[str, int]] = {}


def cli_version(binary: str) -> str:
    return timed_version(binary)[0]


def timed_version(binary: str) -> tuple[str, int]:
    """The CLI's ``--version`` line and how long the call took (no model is called)."""
    if binary not in _VERSIONS:
        started = time.monotonic()
        # A group of its own: gemini relaunches itself in a child node process, which a timeout
        # of the parent alone would leave running (reading a FIFO in place of its settings).
        try:
            proc = subprocess.Popen(
                [binary, "--version"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
        except OSError as err:
            version = f"unknown ({err})"
        else:
            try:
                out, _ = proc.communicate(timeout=10)
                version = (out.strip().splitlines() or ["unknown"])[0]
            except subprocess.TimeoutExpired as err:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                version = f"unknown ({err})"
        _VERSIONS[binary] = (version, int((time.monotonic() - started) * 1000))
    return _VERSIONS[binary]


def check_cli(adapter: Adapter, env: Mapping[str, str], required: bool) -> Check:
    found = clis.find(adapter, env)
    name = f"{adapter.name} CLI"
    if found is None:
        status = "fail" if required else "warn"
        return Check(name, status, "not installed", f"install with: {adapter.install_hint}")
    if adapter.releases is not None:
        return check_release(adapter, found, env)
    version = cli_version(found)
    if adapter.tested_version and adapter.tested_version not in version and not adapter.interactive:
        return Check(
            name,
            "warn",
            f"{version} ({found}); its JSON stream was recorded from {adapter.tested_version}",
            "waaah run may still read it; to be sure, re-record the streams "
            "(scripts/record_streams_extra.py) and run make test",
        )
    if adapter.tested_version and adapter.tested_version not in version:
        return Check(
            name,
            "warn",
            f"{version} ({found}); the screen rules were recorded from {adapter.tested_version}",
            "it may work; to be sure, re-record the screens (scripts/record_screens.py) and run make test",
        )
    return Check(name, "ok", f"{version} ({found})")


def check_release(adapter: Adapter, found: str, env: Mapping[str, str]) -> Check:
    """The installed release and where it stands: tested, older but supported, too old, newer."""
    support = adapter.releases
    assert support is not None
    release = releases.release_of(found, env)
    verdict = judge(adapter.name, release, support)
    name, where = f"{adapter.name} CLI", verdict.standing
    tested = ", ".join((support.tested, *support.older_tested))
    detail = (
        f"{release.version or 'unknown version'} ({found}): {where} "
        f"(waaah is tested with {tested}; the oldest supported is {support.oldest})"
    )
    extra = {"version": release.version, "standing": str(where)}
    if where is Standing.TOO_OLD:
        return Check(name, "fail", detail, f"update it: {support.update_hint}", **extra)
    if where is Standing.NEWER:
        fix = "it may work; to be sure, re-record the screens (scripts/record_screens.py) and run make test"
        return Check(name, "warn", detail, fix, **extra)
    if where is Standing.UNKNOWN:
        return Check(name, "warn", detail, f"run {found} --version to see why", **extra)
    return Check(name, "ok", detail, **extra)


def check_login(adapter: Adapter, env: Mapping[str, str]) -> Check:
    name = f"{adapter.name} login"
    if adapter.needs_login(env):
        return Check(name, "fail", "no credentials found", f"run: {clis.login_hint(adapter, env)}")
    return Check(name, "ok", "credentials found")


def check_mcp_entry(adapter: Adapter, env: Mapping[str, str]) -> Check:
    name = f"{adapter.name} MCP entry"
    if adapter.mcp is None:
        return Check(name, "ok", "not used (waaah gives this CLI no MCP server)")
    finding = giver(adapter.mcp).doctor(env)
    return Check(name, finding.status, finding.detail, finding.fix)


def check_server_reachable(
    env: Mapping[str, str], server: str | None, api_key: str | None, agents: list[str]
) -> Check:
    """The server and key `waaah agent` would use now (mcp_setup.choose_server, nobody asked)."""
    existing = None
    for name in agents:
        adapter = adapters.registry()[name]
        try:
            existing = giver(adapter.mcp).existing(env) if adapter.mcp else None
        except UsageError:
            continue  # an unreadable settings file: the MCP entry check reports it
        if existing is not None and existing.url:
            break
    try:
        kept_key, kept_url = key_file.read(env), key_file.read_server(env)
    except UsageError as err:
        return Check("WAAAH server", "fail", str(err))
    try:
        choice = mcp_setup.choose_server(
            server, api_key, env, existing, False, None, kept_key=kept_key, kept_url=kept_url
        )
    except UsageError:
        return Check(
            "WAAAH server",
            "warn",
            "not configured (without one the agent runs with no MCP server: no tasks reach it)",
            f'start one (README "The WAAAH server"), then pass --server URL or set {settings.SERVER_URL}',
        )
    url = choice.url
    health = check_server(url, choice.api_key)
    if health.ok:
        return Check("WAAAH server", "ok", f"{url} reachable, key accepted (from {choice.source})")
    if health.detail == "bad key":
        return Check(
            "WAAAH server",
            "fail",
            f"{url} rejected the API key (401)",
            f"set {settings.API_KEY} or --api-key",
        )
    return Check("WAAAH server", "fail", f"{url} {health.detail}", "start the server or fix the URL")


def check_git(workspace: Path, root: Path | None) -> Check:
    if root is None:
        return Check("git workspace", "warn", f"{workspace} is not in a git repository", "run: git init")
    return Check("git workspace", "ok", str(root))


def check_workflow(workflow: str, workspace: Path) -> Check:
    try:
        found = find_workflow(workflow, workspace)
    except WorkflowNotFound as err:
        return Check("workflow", "fail", str(err), f"create .agent/workflows/{workflow}.md")
    except UsageError as err:  # a name that is a path
        return Check("workflow", "fail", str(err), "give the workflow's name with --as")
    return Check("workflow", "ok", f"{found.name} ({found.path})")


def check_writable(workspace: Path) -> Check:
    folder = workspace / ".waaah"
    from waaah_agent.runtime.private import STATE_FOLDERS, linked, untrusted

    for path in (folder, *(folder / name for name in STATE_FOLDERS)):
        if why := linked(path) or untrusted(
            path
        ):  # never tightened here: what is in it may be someone else's
            fix = why.split("; ", 1)[-1]
            return Check(".waaah writable", "fail", why.split("; ", 1)[0], fix)
    try:
        private_dir(folder)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as err:
        return Check(
            ".waaah writable",
            "fail",
            f"{folder}: {err.strerror}",
            "fix the folder's permissions or free disk space",
        )
    return Check(".waaah writable", "ok", str(folder))


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.status == "fail" for c in checks) else 0


def default_env() -> dict[str, str]:
    return dict(os.environ)
