"""Throwaway HOMEs and environments that run the pinned real CLIs offline against a fake model.

Nothing here reads or writes the real ``~/.gemini`` or ``~/.claude``: every file goes under the
``home`` directory the caller passes (a temp dir). Example::

    with FakeModel([Rule(marker="PING", reply=Text("PONG"))]) as fake:
        env = claude_env(tmp_path / "home", fake.url, workspace=tmp_path / "ws",
                         mcp_servers={"waaah": slow_mcp_server()})
        with CliPty([str(cli_bin("claude"))], env, tmp_path / "ws") as pty:
            pty.wait(claude_idle, "idle")
            pty.paste("PING")
            pty.enter()
            pty.wait(lambda screen: "PONG" in screen.text, "reply")
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect
import pyte

REPO = Path(__file__).resolve().parents[2]
CLI_BIN_DIR = REPO / ".cache" / "clis" / "node_modules" / ".bin"

#: Older releases the e2e core scenarios also drive (`make clis-old`), each in its own prefix;
#: gemini 0.13.0 is there to be refused as too old.
OLD_RELEASES = {
    "gemini": ("0.51.0", "0.34.0"),
    "claude": ("2.1.330", "2.1.300", "2.1.200"),
    "codex": ("0.169.0",),
}
TOO_OLD = {"gemini": "0.13.0"}
CLI_OLD_DIR = REPO / ".cache" / "clis-old"

#: The model name pinned in gemini's settings (pinning skips its model-routing request).
GEMINI_MODEL = "gemini-2.5-pro"
#: Default API key. claude approves custom keys by their last 20 characters, so keep it longer.
TEST_KEY = "sk-ant-test-0123456789abcdefghijklmnop"
#: How long an MCP tool call may block (ms); matches WAAAH's 290 s long poll plus slack.
MCP_TIMEOUT_MS = 600_000
#: Pause between typed text and its Enter: gemini takes an Enter within ~0.1 s as part of the paste.
ENTER_GAP = 0.5

# Variables from the caller's environment that would send a CLI elsewhere or change its
# auth path; the throwaway env must not inherit them.
_SCRUB_PREFIXES = (
    "GEMINI_",
    "GOOGLE_",
    "ANTHROPIC_",
    "CLAUDE_",
    "CLAUDECODE",
    "VERTEX",
    "CLOUD_ML",
    "OTEL_",
    "CI_",
)
# gemini treats any of these as "running in CI" and refuses to be interactive (CI runs set CI=true).
_CI_MARKERS = ("CI", "CONTINUOUS_INTEGRATION", "BUILD_NUMBER", "RUN_ID")


#: npm package of each pinned CLI (its package.json holds the installed version).
CLI_PACKAGES = {
    "gemini": "@google/gemini-cli",
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
}


class CliNotInstalled(RuntimeError):
    """A pinned CLI is missing from .cache/clis."""


def cli_bin(name: str) -> Path:
    """Path of an installed pinned CLI; raises CliNotInstalled if absent."""
    path = CLI_BIN_DIR / name
    if not (path.exists() and os.access(path, os.X_OK)):
        which = "extra" if name in ("codex", "opencode") else name
        raise CliNotInstalled(f"{name} is not installed at {path}: run scripts/install_clis.sh {which}")
    return path


def old_cli_bin_dir(name: str, version: str) -> Path:
    """The bin folder of an older release; raises CliNotInstalled if absent."""
    folder = CLI_OLD_DIR / f"{name}-{version}" / "node_modules" / ".bin"
    if not os.access(folder / name, os.X_OK):
        raise CliNotInstalled(f"{name} {version} is not installed in {folder}: run make clis-old")
    return folder


def cli_version(name: str) -> str:
    """Installed version of a pinned CLI, read from its package.json (no process start)."""
    cli_bin(name)
    manifest = CLI_BIN_DIR.parent / CLI_PACKAGES[name] / "package.json"
    return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])


def end_process_group(pid: int, grace: float = 3.0) -> None:
    """Stop the process group led by ``pid`` (a CLI spawned in its own PTY session) and whatever
    it started there, such as MCP servers: SIGTERM, then SIGKILL after ``grace`` seconds.

    Only that group is touched, so other processes on the machine are never affected."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _group_alive(pid):
                return
            time.sleep(0.05)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Members that are only zombies (waiting for their parent to reap them) count as gone.
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def base_env(home: Path) -> dict[str, str]:
    """The current environment minus model/CLI settings, with HOME moved to ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB_PREFIXES) and k not in _CI_MARKERS}
    env.update(
        HOME=str(home),
        TERM="xterm-256color",
        # What a modern terminal says; without it gemini adds a "True color not detected" warning.
        COLORTERM="truecolor",
        LANG=os.environ.get("LANG") or "C.UTF-8",
        # Keep XDG lookups inside the throwaway home too.
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
    )
    env.pop("NO_COLOR", None)
    return env


def slow_mcp_server(seconds: float = 3.0, log: Path | None = None) -> dict[str, Any]:
    """A neutral MCP server entry (command/args/env) running tests/doubles/slow_mcp.py."""
    env = {"SLOW_MCP_SECONDS": str(seconds)}
    if log is not None:
        env["SLOW_MCP_LOG"] = str(log)
    return {"command": sys.executable, "args": [str(REPO / "tests" / "doubles" / "slow_mcp.py")], "env": env}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def gemini_settings(mcp_servers: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``~/.gemini/settings.json`` content for an offline run."""
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "ui": {"hideTips": True},
        "model": {"name": GEMINI_MODEL},
    }
    if mcp_servers:
        settings["mcpServers"] = {
            # trust skips the per-call confirmation; a long timeout lets a long poll block.
            name: {"trust": True, "timeout": MCP_TIMEOUT_MS, **entry}
            for name, entry in mcp_servers.items()
        }
    return settings


def gemini_env(
    home: Path,
    base_url: str,
    mcp_servers: dict[str, dict[str, Any]] | None = None,
    api_key: str | None = TEST_KEY,
) -> dict[str, str]:
    """Write ``home/.gemini/settings.json`` and return the env to run gemini offline.

    ``mcp_servers`` maps a server name to ``{command, args, env}`` (``trust``/``timeout`` are
    added unless given). ``api_key=None`` leaves the key out (the "login required" case).
    """
    home.mkdir(parents=True, exist_ok=True)
    _write_json(home / ".gemini" / "settings.json", gemini_settings(mcp_servers))
    env = base_env(home)
    env["GOOGLE_GEMINI_BASE_URL"] = base_url
    if api_key is not None:
        env["GEMINI_API_KEY"] = api_key
    return env


def claude_state(
    workspace: Path, api_key: str | None, mcp_servers: dict[str, dict[str, Any]] | None
) -> dict[str, Any]:
    """The ``~/.claude.json`` content: onboarding done, key approved, workspace trusted."""
    state: dict[str, Any] = {
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": "2.1.330",
        "theme": "dark",
        "numStartups": 1,
        "autoUpdates": False,
        # claude remembers approved custom keys by their last 20 characters.
        "customApiKeyResponses": {"approved": [api_key[-20:]] if api_key else [], "rejected": []},
        "projects": {
            str(workspace.resolve()): {
                "hasTrustDialogAccepted": True,
                "hasCompletedProjectOnboarding": True,
                "allowedTools": [],
            }
        },
    }
    if mcp_servers:
        state["mcpServers"] = {name: {"type": "stdio", **entry} for name, entry in mcp_servers.items()}
    return state


def claude_settings(mcp_servers: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``~/.claude/settings.json`` content: MCP tools allowed, no bypass-mode warning.

    ``permissions.defaultMode`` stays unset on purpose: setting it pops a modal that eats keys."""
    names = list(mcp_servers or {"waaah": {}})
    return {
        "permissions": {"allow": [f"mcp__{name}" for name in names]},
        "skipDangerousModePermissionPrompt": True,
    }


def claude_env(
    home: Path,
    base_url: str,
    workspace: Path,
    mcp_servers: dict[str, dict[str, Any]] | None = None,
    api_key: str | None = TEST_KEY,
) -> dict[str, str]:
    """Write ``home/.claude.json`` and ``home/.claude/settings.json``; return the env to run claude
    offline in ``workspace``. ``mcp_servers`` maps a name to ``{command, args, env}``;
    ``api_key=None`` means no key at all (claude then says ``Not logged in``)."""
    home.mkdir(parents=True, exist_ok=True)
    _write_json(home / ".claude.json", claude_state(workspace, api_key, mcp_servers))
    _write_json(home / ".claude" / "settings.json", claude_settings(mcp_servers))
    env = base_env(home)
    env.update(
        ANTHROPIC_BASE_URL=base_url,
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        # As root, --dangerously-skip-permissions is refused unless this is exactly "1".
        IS_SANDBOX="1",
        # List MCP tools to the model directly instead of behind a tool search.
        ENABLE_TOOL_SEARCH="false",
        MCP_TOOL_TIMEOUT=str(MCP_TIMEOUT_MS),
    )
    if api_key is not None:
        env["ANTHROPIC_API_KEY"] = api_key
    return env


#: The model codex is pointed at: a name outside codex's own catalogue, so it shows no "Meet
#: <newer model>" migration dialog and lists MCP tools to the model directly (catalogued models
#: hide them behind its tool search).
CODEX_MODEL = "gpt-fake"
#: The variable codex's fake provider reads its key from (``env_key``).
CODEX_KEY_ENV = "FAKE_OPENAI_API_KEY"


def codex_config(base_url: str, workspace: Path, model: str = CODEX_MODEL, trusted: bool = True) -> str:
    """``$CODEX_HOME/config.toml`` for an offline run: a custom Responses API provider at
    ``base_url`` (ending in /v1), the workspace trusted, no detached daemon, no analytics."""
    text = (
        f'model = "{model}"\n'
        'model_provider = "fake"\n'
        "check_for_update_on_startup = false\n\n"
        "[model_providers.fake]\n"
        'name = "Fake OpenAI"\n'
        f'base_url = "{base_url}"\n'
        f'env_key = "{CODEX_KEY_ENV}"\n'
        'wire_api = "responses"\n\n'
        "[features]\ndaemon_auto_start = false\n\n"
        "[analytics]\nenabled = false\n"
    )
    if trusted:
        text += f'\n[projects."{workspace}"]\ntrust_level = "trusted"\n'
    return text


def codex_mcp_tables(mcp_servers: dict[str, dict[str, Any]]) -> str:
    """``[mcp_servers.<name>]`` tables for ``{command, args, env}`` entries: tool calls approved
    without a prompt, a long tool timeout (JSON strings and arrays are valid TOML)."""
    text = ""
    for name, entry in mcp_servers.items():
        env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in entry.get("env", {}).items())
        text += (
            f"\n[mcp_servers.{name}]\ncommand = {json.dumps(entry['command'])}\n"
            f"args = {json.dumps(entry.get('args', []))}\nenv = {{ {env} }}\n"
            f'default_tools_approval_mode = "approve"\ntool_timeout_sec = {MCP_TIMEOUT_MS // 1000}\n'
        )
    return text


def codex_env(
    home: Path,
    base_url: str,
    workspace: Path,
    mcp_servers: dict[str, dict[str, Any]] | None = None,
    api_key: str | None = TEST_KEY,
    model: str = CODEX_MODEL,
    trusted: bool = True,
) -> dict[str, str]:
    """Write ``home/.codex/config.toml`` (``CODEX_HOME``) and return the env to run codex offline in
    ``workspace`` against the fake OpenAI API at ``base_url`` (ending in /v1). ``mcp_servers`` maps
    a name to ``{command, args, env}``; ``api_key=None`` leaves the provider's key out."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = codex_config(base_url, workspace.resolve(), model, trusted) + codex_mcp_tables(mcp_servers or {})
    (codex_home / "config.toml").write_text(config, encoding="utf-8")
    env = {k: v for k, v in base_env(home).items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env["CODEX_HOME"] = str(codex_home)
    if api_key is not None:
        env[CODEX_KEY_ENV] = api_key
    return env


# pyte 0.8.2 chokes on private-parameter CSI that the Ink TUIs send (`CSI ? u`, `CSI > 4 ; ? m`,
# `CSI > q`; mode switches `CSI ? n h/l` are fine) and prints APC/DCS/PM/SOS payloads as text.
_PYTE_UNSAFE = re.compile(
    rb"\x1b\[[<>=?][0-9;:?]*[ -/]*[@-gi-km-~]|\x1b\[[<>=][0-9;:?]*[hl]|\x1b[P^_X].*?(?:\x1b\\|\x07)",
    re.DOTALL,
)
# An escape sequence cut off at the end of a read; held back until the rest arrives.
_INCOMPLETE_TAIL = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[P^_X].*|[ -/]*)?\Z", re.DOTALL)


@dataclass(frozen=True)
class Rendered:
    """What a person would see after the terminal consumed some output."""

    text: str
    title: str
    lines: tuple[str, ...]


class ScreenFeed:
    """A terminal model fed incrementally with raw PTY output (for harness checks only)."""

    def __init__(self, cols: int = 120, rows: int = 40) -> None:
        self._screen = pyte.Screen(cols, rows)
        self._stream = pyte.ByteStream(self._screen)
        self._pending = b""

    def feed(self, data: bytes) -> ScreenFeed:
        """Consume more output; returns self."""
        data = self._pending + data
        start = data.rfind(b"\x1b", max(0, len(data) - 4096))
        cut = start if start >= 0 and _INCOMPLETE_TAIL.match(data, start) else len(data)
        self._pending = data[cut:]
        self._stream.feed(_PYTE_UNSAFE.sub(b"", data[:cut]))
        return self

    def view(self) -> Rendered:
        """The current screen text and window title."""
        lines = tuple(line.rstrip() for line in self._screen.display)
        return Rendered(text="\n".join(lines), title=str(self._screen.title or "").strip(), lines=lines)


def render_screen(raw: bytes, cols: int = 120, rows: int = 40) -> Rendered:
    """Render raw PTY output on a fresh ``cols`` x ``rows`` terminal."""
    return ScreenFeed(cols, rows).feed(raw).view()


def gemini_idle(screen: Rendered) -> bool:
    """gemini waits for input. Its placeholder stays visible while busy, so the title decides."""
    return (
        "Type your message" in screen.text and "Ready" in screen.title and "esc to cancel" not in screen.text
    )


def claude_idle(screen: Rendered) -> bool:
    """claude waits for input. `❯` is drawn even while busy; the title and footer tell them apart."""
    return (
        any(line.startswith("❯") for line in screen.lines)
        and screen.title.startswith("✳")
        and "esc to interrupt" not in screen.text
    )


def codex_idle(screen: Rendered) -> bool:
    """codex waits for input: its composer's `› Ask Codex to do anything` placeholder (or a draft
    after `›`) with no `esc to interrupt` busy line."""
    return "Ask Codex to do anything" in screen.text and "esc to interrupt" not in screen.text


IDLE_CHECKS: dict[str, Callable[[Rendered], bool]] = {
    "gemini": gemini_idle,
    "claude": claude_idle,
    "codex": codex_idle,
}


class CliPty:
    """A CLI in its own PTY session. All output is kept, so any moment can be saved as raw bytes,
    and the screen is rendered for checks. ``close`` ends the CLI's whole process group."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: Path, rows: int = 40, cols: int = 120
    ) -> None:
        self.child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(cwd), dimensions=(rows, cols))
        self.child.delaybeforesend = None  # keys are paced explicitly
        self.raw = bytearray()
        self.started = time.monotonic()
        self.exited = False
        self._feed = ScreenFeed(cols, rows)

    def pump(self, seconds: float) -> None:
        """Read whatever arrives during ``seconds``."""
        deadline = time.monotonic() + seconds
        while not self.exited and time.monotonic() < deadline:
            try:
                chunk = self.child.read_nonblocking(
                    65536, timeout=min(0.05, max(0.0, deadline - time.monotonic()))
                )
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                self.exited = True
                break
            self.raw += chunk
            self._feed.feed(chunk)
        if self.exited:
            time.sleep(max(0.0, deadline - time.monotonic()))

    def screen(self) -> Rendered:
        """The screen as drawn by everything read so far."""
        return self._feed.view()

    def wait(self, check: Callable[[Rendered], bool], what: str, timeout: float = 40.0) -> float:
        """Read until ``check`` holds for the screen; returns seconds since spawn."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.1)
            if check(self.screen()):
                return time.monotonic() - self.started
            if self.exited:
                break
        tail = "\n".join(line for line in self.screen().lines if line.strip())
        state = "exited" if self.exited else "running"
        raise AssertionError(f"timed out after {timeout}s waiting for {what} ({state}); screen:\n{tail}")

    def settle(self, quiet: float = 0.7, limit: float = 4.0) -> None:
        """Read until no output came for ``quiet`` seconds (or ``limit`` passed)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            size = len(self.raw)
            self.pump(quiet)
            if len(self.raw) == size:
                return

    def wait_exit(self, timeout: float = 20.0) -> None:
        """Read until the CLI closes the PTY."""
        deadline = time.monotonic() + timeout
        while not self.exited and time.monotonic() < deadline:
            self.pump(0.2)
        if not self.exited:
            raise AssertionError(f"CLI did not exit within {timeout}s")

    def paste(self, text: str) -> None:
        """Type ``text`` as one bracketed paste (no Enter)."""
        self.child.send(f"\x1b[200~{text}\x1b[201~")

    def keys(self, text: str) -> None:
        """Type ``text`` as plain keys in one write (slash commands are typed, not pasted)."""
        self.child.send(text)

    def enter(self, gap: float = ENTER_GAP) -> None:
        """Enter as its own write, ``gap`` seconds after the text (gemini needs >= ~0.2 s)."""
        self.pump(gap)
        self.child.send("\r")

    def close(self) -> None:
        """Stop the CLI and everything it started in its process group (and nothing else)."""
        end_process_group(self.child.pid)
        self.child.close(force=True)

    def __enter__(self) -> CliPty:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
