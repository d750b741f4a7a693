"""`waaah service install|status|remove`: the crew's files written, and systemctl (or launchctl) asked.

systemd: the template ``$XDG_CONFIG_HOME/systemd/user/waaah@.service`` (default
``~/.config/systemd/user``) and one environment file per agent,
``~/.config/waaah-agent/services/<name>.env`` (mode 0600, in a 0700 folder); then
``systemctl --user daemon-reload`` and ``enable --now waaah@<name>.service``. Where no user
systemd answers (a container, a machine without it), the files are written all the same and the
commands to run are printed. macOS: ``~/Library/LaunchAgents/dev.waaah.<name>.plist`` (0600) and
``launchctl load -w``. A template that is not ours is never replaced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from waaah_agent import settings
from waaah_agent.core.nesting import loads_json
from waaah_agent.core.night.service import (
    MARK,
    TEMPLATE,
    Instance,
    Service,
    env_file,
    free_port,
    launchd_plist,
    read_env_file,
    template_unit,
    unsafe_in_unit,
)
from waaah_agent.errors import UsageError
from waaah_agent.runtime import key_file
from waaah_agent.runtime.private import private_folder
from waaah_agent.runtime.store import atomic_write
from waaah_agent.safe_read import read_text, why

ENV_CAP = 64 * 1024  # an environment file of ours is a few lines


def unit_dir(env: Mapping[str, str]) -> Path:
    return settings.user_folder(env, "config") / "systemd" / "user"


def env_dir(env: Mapping[str, str]) -> Path:
    return key_file.folder(env) / "services"


def plist_path(env: Mapping[str, str], name: str) -> Path:
    return Path(env.get("HOME") or "~").expanduser() / "Library" / "LaunchAgents" / f"dev.waaah.{name}.plist"


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


def _ours(path: Path) -> bool:
    try:
        return read_text(path, ENV_CAP, follow=False).startswith(MARK)
    except (OSError, UnicodeDecodeError):
        return False


def installed(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Every instance's settings, by name (environment files of ours only; others skipped)."""
    found: dict[str, dict[str, str]] = {}
    try:
        paths = sorted(env_dir(env).glob("*.env"))
    except OSError:
        return found
    for path in paths:
        try:
            text = read_text(path, ENV_CAP, follow=False)
        except (OSError, UnicodeDecodeError):
            continue
        if text.startswith(MARK):
            found[path.name[: -len(".env")]] = read_env_file(text)
    return found


def new_port(env: Mapping[str, str], name: str) -> int:
    """The instance's metrics port: the one it has, else the first one no other instance has."""
    taken: set[int] = set()
    for other, values in installed(env).items():
        port = values.get(settings.METRICS_PORT, "")
        if port.isdigit():
            if other == name:
                return int(port)
            taken.add(int(port))
    return free_port(taken)


def install(instance: Instance, waaah: str, path: str, env: Mapping[str, str]) -> list[str]:
    folder = env_dir(env)
    for what, text in (("waaah's own path", waaah), ("the settings folder", str(folder)), ("PATH", path)):
        if problem := unsafe_in_unit(text):
            raise UsageError(f"{what} cannot go into a unit file: {problem}")
    _refuse_another(instance, env)
    template = unit_dir(env) / TEMPLATE
    if template.exists() and not _ours(template):
        raise UsageError(f"{template} exists and is not waaah's; remove it to install the crew's template")
    env_path = folder / f"{instance.name}.env"
    try:
        private_folder(folder)
        atomic_write(env_path, env_file(instance), 0o600)  # before the unit that names it
        template.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(template, template_unit(waaah, folder, path), 0o644)
    except OSError as err:
        raise UsageError(f"cannot write the service's files ({why(err)}: {err.filename})") from None
    lines = [
        f"wrote {env_path} (mode 0600: {instance.agent} with the {instance.workflow} workflow in "
        f"{instance.workspace}, metrics on 127.0.0.1:{instance.metrics_port})",
        f"wrote {template}",
    ]
    for args in (("daemon-reload",), ("enable", "--now", instance.unit)):
        ok, said = systemctl(*args, env=env)
        if not ok:
            lines.append(
                f"the user systemd did not answer ({said.splitlines()[0] if said else 'no reason given'}); "
                f"once it runs: systemctl --user daemon-reload && systemctl --user enable --now {instance.unit}"
            )
            return lines
    lines.append(
        f"started and enabled {instance.unit}: it comes back after a reboot "
        "(before any login too, once: loginctl enable-linger)"
    )
    return lines


def _refuse_another(instance: Instance, env: Mapping[str, str]) -> None:
    """A name is one agent: installing it again for another workspace or CLI is refused."""
    values = installed(env).get(instance.name)
    if values is None:
        return
    mine = instance.environment()
    if any(values.get(k) != mine[k] for k in (settings.START, settings.WORKFLOW, settings.WORKSPACE)):
        raise UsageError(
            f"{instance.unit} is already {values.get(settings.START)} with the "
            f"{values.get(settings.WORKFLOW)} workflow in {values.get(settings.WORKSPACE)}: give "
            "another --name, or remove it first"
        )


@dataclass(frozen=True)
class Row:
    name: str
    agent: str
    workflow: str
    workspace: str
    port: str
    systemd: str  # ActiveState/SubState, or why systemd did not say
    ready: str  # what /readyz answered, in a few words


def status_all(env: Mapping[str, str]) -> list[Row]:
    rows = []
    for name, values in installed(env).items():
        ok, said = systemctl(
            "show", "-p", "ActiveState,SubState", "--value", f"waaah@{name}.service", env=env
        )
        active = "/".join(said.split()) if ok else f"unknown ({said.splitlines()[0] if said else '?'})"
        port = values.get(settings.METRICS_PORT, "")
        rows.append(
            Row(
                name,
                values.get(settings.START, "?"),
                values.get(settings.WORKFLOW, "?"),
                values.get(settings.WORKSPACE, "?"),
                port,
                active,
                readiness(port),
            )
        )
    for name in legacy(env):
        note = "a unit of an earlier waaah (its alert URLs in a unit file): waaah service remove it, then install again"
        rows.append(Row(name, "?", "?", "?", "", "legacy", note))
    return rows


def readiness(port: str) -> str:
    """What the agent's /readyz says, in a few words."""
    if not port.isdigit():
        return "no metrics port"
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            body = answer.read(4096)
    except urllib.error.HTTPError as err:
        body = err.read(4096)
    except (OSError, ValueError) as err:
        return f"no answer on :{port} ({getattr(err, 'reason', None) or err})"
    try:
        said = loads_json(body)
    except ValueError:
        return f"a stranger answers on :{port}"
    if not isinstance(said, dict):
        return f"a stranger answers on :{port}"
    if said.get("ready") is True:
        return f"ready ({said.get('state', '?')})"
    extra = said.get("until") or said.get("detail") or said.get("state") or ""
    return f"not ready: {said.get('reason', '?')}" + (f" ({extra})" if extra else "")


def status(name: str, env: Mapping[str, str]) -> tuple[bool, str]:
    if name not in installed(env):
        raise UsageError(f"no service {name} (waaah service status lists them)")
    ok, said = systemctl("status", "--no-pager", f"waaah@{name}.service", env=env)
    return ok, said or "the files are written; the user systemd did not answer"


def legacy(env: Mapping[str, str]) -> list[str]:
    """Units an earlier waaah wrote, one per agent (``waaah-<agent>-<workflow>-<folder>.service``,
    its alert URLs in it): their names, for status to list and remove to take away."""
    try:
        paths = sorted(unit_dir(env).glob("waaah-*.service"))
    except OSError:
        return []
    return [p.name[: -len(".service")] for p in paths if _ours(p)]


def remove(name: str, env: Mapping[str, str]) -> list[str]:
    """Stop, disable and forget one instance; the template goes with the last one. The others
    are not touched (nor is any session). Where systemctl cannot stop it, nothing is removed."""
    env_path = env_dir(env) / f"{name}.env"
    if name not in installed(env) and name in legacy(env):
        return _remove_legacy(name, env)
    if name not in installed(env):
        raise UsageError(f"no service {name} ({env_path} is not one of waaah's)")
    lines = [_stop(f"waaah@{name}.service", name, env_path, env)]
    env_path.unlink()
    lines.append(f"removed {env_path}")
    if not installed(env):
        template = unit_dir(env) / TEMPLATE
        if _ours(template):
            template.unlink()
            lines.append(f"removed {template} (no agent is left)")
    systemctl("daemon-reload", env=env)
    return lines


def _remove_legacy(name: str, env: Mapping[str, str]) -> list[str]:
    path = unit_dir(env) / f"{name}.service"
    lines = [_stop(f"{name}.service", name, path, env)]
    path.unlink()
    systemctl("daemon-reload", env=env)
    return [
        *lines,
        f"removed {path} (a unit of an earlier waaah; install the agent again to add it to the crew)",
    ]


def _stop(unit: str, name: str, path: Path, env: Mapping[str, str]) -> str:
    """``systemctl --user disable --now UNIT``, what to say of it. Where systemctl is there but
    fails (no user bus in this shell, say), a UsageError: removing the files of a unit still
    enabled would leave systemd starting it at every boot with its settings gone."""
    if shutil.which("systemctl", path=env.get("PATH")) is None:
        return f"systemctl is not installed here: {unit} cannot be running"
    ok, said = systemctl("disable", "--now", unit, env=env)
    if not ok:
        raise UsageError(
            f"systemctl did not stop {unit} ({said.splitlines()[0] if said else 'no reason given'}), so "
            f"nothing was removed: run waaah service remove {name} again where systemctl --user "
            f"answers (your login session), or, where no user systemd runs at all, remove {path} by hand"
        )
    return f"stopped and disabled {unit}"


def install_launchd(service: Service, variables: Mapping[str, str], env: Mapping[str, str]) -> list[str]:
    path = plist_path(env, service.name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, launchd_plist(service, service.workspace / ".waaah" / "logs", variables), 0o600)
    except OSError as err:
        raise UsageError(f"cannot write {path} ({why(err)})") from None
    ok, said = _launchctl(["load", "-w", str(path)])
    return [
        f"wrote {path}",
        "loaded with launchctl" if ok else f"load it with: launchctl load -w {path} ({said})",
    ]


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
