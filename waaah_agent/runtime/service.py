"""`waaah service install|status|remove`: the unit file written, and systemctl (or launchctl) asked.

systemd: ``$XDG_CONFIG_HOME/systemd/user/<name>.service`` (default ``~/.config/systemd/user``),
then ``systemctl --user daemon-reload`` and ``enable --now``. Where no user systemd answers
(a container, a machine without it), the file is written all the same and the commands to run
are printed. macOS: ``~/Library/LaunchAgents/dev.waaah.<name>.plist`` and ``launchctl load -w``.
A unit of the same name is replaced only when it is ours (its first line says so).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from waaah_agent import settings
from waaah_agent.core.service import Service, launchd_plist, systemd_unit
from waaah_agent.errors import UsageError
from waaah_agent.runtime.store import atomic_write

MARK = "# Written by `waaah service install`"


def unit_path(env: Mapping[str, str], name: str, darwin: bool = sys.platform == "darwin") -> Path:
    if darwin:
        return (
            Path(env.get("HOME") or "~").expanduser() / "Library" / "LaunchAgents" / f"dev.waaah.{name}.plist"
        )
    return settings.user_folder(env, "config") / "systemd" / "user" / f"{name}.service"


def systemctl(*args: str, env: Mapping[str, str]) -> tuple[bool, str]:
    """Run ``systemctl --user ARGS``; (it worked, what it said)."""
    if shutil.which("systemctl", path=env.get("PATH")) is None:
        return False, "systemctl is not installed"
    try:
        done = subprocess.run(
            ["systemctl", "--user", *args], capture_output=True, text=True, timeout=30, env=dict(env)
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, str(err)
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def install(service: Service, env: Mapping[str, str], darwin: bool = sys.platform == "darwin") -> list[str]:
    path = unit_path(env, service.name, darwin)
    if path.exists() and not path.read_text(errors="replace").startswith(MARK) and not darwin:
        raise UsageError(f"{path} exists and is not a unit of waaah's; remove it or pick another --name")
    text = (
        launchd_plist(service, Path(service.workspace) / ".waaah" / "logs")
        if darwin
        else systemd_unit(service)
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text, 0o644)
    except OSError as err:
        raise UsageError(f"cannot write {path} ({err.strerror})") from None
    lines = [f"wrote {path}"]
    if darwin:
        ok, said = _launchctl(["load", "-w", str(path)])
        lines.append("loaded with launchctl" if ok else f"load it with: launchctl load -w {path} ({said})")
        return lines
    for args in (("daemon-reload",), ("enable", "--now", f"{service.name}.service")):
        ok, said = systemctl(*args, env=env)
        if not ok:
            lines.append(
                f"the user systemd did not answer ({said.splitlines()[0] if said else 'no reason given'}); "
                f"once it runs: systemctl --user daemon-reload && systemctl --user enable --now {service.name}.service"
            )
            return lines
    lines.append(f"started and enabled: it comes back after a reboot (waaah service status {service.name})")
    return lines


def status(name: str, env: Mapping[str, str]) -> tuple[bool, str]:
    path = unit_path(env, name)
    if not path.exists():
        raise UsageError(f"no service {name} ({path} does not exist); `waaah service install` writes one")
    ok, said = systemctl("status", "--no-pager", f"{name}.service", env=env)
    return ok, said or f"{path} is written; the user systemd did not answer"


def remove(name: str, env: Mapping[str, str]) -> list[str]:
    path = unit_path(env, name)
    if not path.exists():
        raise UsageError(f"no service {name} ({path} does not exist)")
    if not path.read_text(errors="replace").startswith(MARK) and not path.name.endswith(".plist"):
        raise UsageError(f"{path} is not a unit of waaah's; not removed")
    lines = []
    ok, said = systemctl("disable", "--now", f"{name}.service", env=env)
    lines.append(
        "stopped and disabled"
        if ok
        else f"systemctl did not stop it ({said.splitlines()[0] if said else '?'})"
    )
    path.unlink()
    systemctl("daemon-reload", env=env)
    lines.append(f"removed {path}")
    return lines


def _launchctl(args: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(["launchctl", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, str(err)
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def waaah_path() -> str:
    """This waaah's own executable (the one the service will run)."""
    found = shutil.which("waaah", path=os.path.dirname(sys.executable))
    return found or str(Path(sys.argv[0]).resolve())
