"""What the installed CLI release supports: asked once per binary, kept in the user's cache.

``<cli> --version`` and ``<cli> --help`` run side by side in a throwaway HOME (nothing of the
user's is read or touched), with a timeout; what they say is kept in ``releases.json`` under the
user cache folder (``$XDG_CACHE_HOME/waaah-agent``, or ``WAAAH_CACHE_DIR``), keyed by the
binary's real path, inode, size, mtime and ctime, so an upgrade in place is asked again. A
damaged cache is ignored and rewritten. The decisions are core/versions.py's.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from waaah_agent import settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core.nesting import loads_json
from waaah_agent.core.versions import Release, judge, options_in_help, parse_version
from waaah_agent.errors import UsageError
from waaah_agent.runtime.store import atomic_write
from waaah_agent.safe_read import read_capped

# Seconds for --version and --help together. Each costs a node CLI ~2-3 s of CPU, and a loaded
# machine stretched the two past 30 s (the CLI was then started unjudged, and refused its command
# line): past PROBE_TIMEOUT a probe still using CPU is given PROBE_MORE seconds at a time, up to
# PROBE_MAX; one that uses none (it hangs, waits on the network) is ended.
PROBE_TIMEOUT = 30.0
PROBE_MORE = 5.0
PROBE_MAX = 90.0
WORKING = 0.05  # CPU seconds over PROBE_MORE that count as working
_CACHE_CAP = 1024 * 1024
_OUTPUT_CAP = 256 * 1024
_KEPT = 50  # binaries remembered


def cache_file(env: Mapping[str, str]) -> Path:
    if env.get(settings.CACHE_DIR):
        return Path(env[settings.CACHE_DIR]) / "releases.json"
    import platformdirs

    return Path(platformdirs.user_cache_dir("waaah-agent")) / "releases.json"


def binary_key(binary: str) -> str:
    """The binary as its real path and file identity: another install, another key."""
    real = os.path.realpath(binary)
    st = os.stat(real)
    return f"{real}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}"


def release_of(binary: str, env: Mapping[str, str]) -> Release:
    """The release of ``binary``: from the cache, else asked (and cached when it answered)."""
    try:
        key = binary_key(binary)
    except OSError:
        return probe(binary, env)
    path = cache_file(env)
    entries = load(path)
    known = Release.from_json(entries.get(key))
    if known is not None:
        return known
    found = probe(binary, env)
    if found.version:
        entries[key] = found.to_json()
        save(path, entries)
    return found


def load(path: Path) -> dict[str, Any]:
    """The cache's entries; a missing, unreadable or damaged file is an empty cache."""
    try:
        data = loads_json(read_capped(path, _CACHE_CAP, follow=False))
    except (OSError, ValueError):
        return {}
    entries = data.get("binaries") if isinstance(data, dict) else None
    return dict(entries) if isinstance(entries, dict) else {}


def save(path: Path, entries: dict[str, Any]) -> None:
    """Best effort: a cache that cannot be written only costs the next start another probe."""
    kept = dict(list(entries.items())[-_KEPT:])
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(path, json.dumps({"binaries": kept}, indent=1) + "\n")


def probe(binary: str, env: Mapping[str, str]) -> Release:
    """Ask ``binary`` for its version and its help, in a throwaway HOME, both at once."""
    with tempfile.TemporaryDirectory(prefix="waaah-probe-") as home:
        started = time.monotonic()
        deadline, last = started + PROBE_TIMEOUT, started + PROBE_MAX
        # Each in a HOME of its own: two starts of a CLI in one HOME race for its files.
        asks = {
            flag: _start(binary, flag, env, Path(home) / flag.strip("-")) for flag in ("--version", "--help")
        }
        said = {flag: _finish(proc, deadline, last) for flag, proc in asks.items()}
    return Release(parse_version(said["--version"]), options_in_help(said["--help"]))


def probe_env(env: Mapping[str, str], home: str) -> dict[str, str]:
    """Only what finds node and the CLI, a throwaway HOME and no credentials."""
    kept = {k: env[k] for k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "NODE_OPTIONS") if k in env}
    return {
        **kept,
        "HOME": home,
        "XDG_CONFIG_HOME": f"{home}/.config",
        "XDG_CACHE_HOME": f"{home}/.cache",
        "XDG_DATA_HOME": f"{home}/.local/share",
        "XDG_STATE_HOME": f"{home}/.local/state",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


def _start(binary: str, flag: str, env: Mapping[str, str], home: Path) -> subprocess.Popen[bytes] | None:
    try:
        home.mkdir()
        return subprocess.Popen(
            [binary, flag],
            cwd=home,
            env=probe_env(env, str(home)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a CLI's own warnings (0.34.0: its project registry) are noise
            start_new_session=True,
        )
    except OSError:
        return None


def _finish(proc: subprocess.Popen[bytes] | None, deadline: float, last: float) -> str:
    """What ``proc`` printed by ``deadline``, or later while it still works (uses CPU), up to
    ``last``; a process that overran is killed (its group)."""
    if proc is None:
        return ""
    used = 0.0  # since it started: a second probe's first look may come a moment after the deadline
    while True:
        try:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            break
        except subprocess.TimeoutExpired:
            now, before, used = time.monotonic(), used, group_cpu(proc.pid)
            if now < last and used > before + WORKING:  # slow, not stuck: a busy machine
                deadline = min(last, now + PROBE_MORE)
                continue
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, 9)
            out, _ = proc.communicate()
            break
    return out[:_OUTPUT_CAP].decode("utf-8", "replace")


def group_cpu(pgid: int) -> float:
    """CPU seconds used by the processes of group ``pgid`` (and their reaped children); 0 where
    /proc cannot tell."""
    ticks = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read(1024)
            except OSError:
                continue  # gone meanwhile
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 14 and fields[2] == str(pgid).encode():
                ticks += sum(int(n) for n in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def checked_release(adapter: Adapter, binary: str, env: Mapping[str, str]) -> dict[str, Any]:
    """What session.json keeps of the CLI's release; a release waaah cannot drive is refused here,
    before anything starts, with one line (``UsageError``, exit code 2)."""
    if adapter.releases is None:
        return {}
    release = release_of(binary, env)
    verdict = judge(adapter.name, release, adapter.releases)
    if verdict.refusal:
        raise UsageError(verdict.refusal)
    return {
        "version": release.version,
        "standing": str(verdict.standing),
        "own_session_ids": verdict.own_ids,
    }


def own_ids(record: Mapping[str, Any]) -> bool:
    """Whether the recorded release takes a session id of ours (unknown: it does)."""
    return record.get("own_session_ids") is not False
