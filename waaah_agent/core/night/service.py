"""A crew of supervisors that come back after a reboot: systemd's template unit, or a launchd agent.

Pure: names and file texts out. runtime/service.py writes them and asks systemctl (or launchctl).

systemd: one template unit, ``waaah@.service``, the same for every agent, holding nothing of any
one of them; each agent is an instance, ``waaah@<name>.service``, whose settings (the CLI, the
workflow, the workspace, the metrics port, alert URLs) are in an environment file of its own,
mode 0600, that the template names with ``%i``. So nothing a folder's name holds can reach a unit
file, and no secret is written into one. Instance names are escaped by systemd's own rule (a byte
outside ``[A-Za-z0-9:_.-]`` as ``\\xNN``, as ``systemd-escape`` does), values in the environment
file are double-quoted with ``"`` ``\\`` ``$`` and a backtick escaped (systemd.exec(5): the same
rule as a POSIX shell's double quotes, so a newline stays inside its value).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

MARK = "# Written by `waaah service install`"
TEMPLATE = "waaah@.service"
UNIT_NAME_MAX = 255  # systemd's limit on a unit's name, ".service" included
METRICS_PORT_BASE = 9470  # the first instance's metrics port; each next one the next free port
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:_.-")


class NameProblem(ValueError):
    """A name systemd cannot take; the message says what to do."""


@dataclass(frozen=True)
class Instance:
    """One agent of the crew: ``waaah@<name>.service`` and what its environment file holds."""

    name: str  # escaped: safe in a unit name
    agent: str
    workflow: str
    workspace: Path
    metrics_port: int
    notify: tuple[str, ...] = ()  # alert URLs (their tokens are secrets: the 0600 file only)

    @property
    def unit(self) -> str:
        return f"waaah@{self.name}.service"

    def environment(self) -> dict[str, str]:
        values = {
            "WAAAH_START": self.agent,
            "WAAAH_WORKFLOW": self.workflow,
            "WAAAH_WORKSPACE": str(self.workspace),
            "WAAAH_METRICS_PORT": str(self.metrics_port),
        }
        if self.notify:
            values["WAAAH_NOTIFY"] = " ".join(self.notify)
        return values


def escape_name(text: str) -> str:
    """``text`` as systemd-escape writes it, but for "-" (kept: it is legal in a unit name and
    reads better than ``\\x2d``): UTF-8 bytes outside ``[A-Za-z0-9:_.-]`` as ``\\xNN``, a leading
    "." too (a unit name never starts with one), "/" as "-"."""
    out = []
    for i, byte in enumerate(text.encode("utf-8", "surrogateescape")):
        if byte == ord("/"):
            out.append("-")
        elif byte in _SAFE and not (i == 0 and byte == ord(".")):
            out.append(chr(byte))
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def instance_name(agent: str, workflow: str, workspace: Path) -> str:
    """The default name: ``<agent>-<workflow>-<workspace folder>``, escaped."""
    return checked_name(escape_name(f"{agent}-{workflow}-{workspace.name or 'root'}"))


def checked_name(name: str) -> str:
    """A name given with --name, as it stands, or a NameProblem saying why systemd cannot take it."""
    if not re.fullmatch(r"(?:[A-Za-z0-9:_.-]|\\x[0-9a-f]{2})+", name) or name.startswith("."):
        raise NameProblem(
            f"{name!r} is not a name systemd takes: letters, digits and : _ . - only "
            "(or \\xNN escapes, as systemd-escape writes them)"
        )
    if len(f"waaah@{name}.service") > UNIT_NAME_MAX:
        raise NameProblem(
            f"the unit name waaah@{name}.service would be {len(name) + 14} characters, over systemd's "
            f"{UNIT_NAME_MAX}: give a shorter --name"
        )
    return name


def env_quote(value: str) -> str:
    """A value of an environment file, double-quoted by systemd.exec(5)'s rule."""
    return '"' + re.sub(r'(["\\$`])', r"\\\1", value) + '"'


def env_file(instance: Instance) -> str:
    lines = [f"{MARK}: the settings of {instance.unit} (mode 0600: it may hold secrets)"]
    lines += [f"{key}={env_quote(value)}" for key, value in instance.environment().items()]
    return "\n".join(lines) + "\n"


def read_env_file(text: str) -> dict[str, str]:
    """What :func:`env_file` wrote (``KEY="value"`` lines, escapes undone); other lines skipped."""
    found = {}
    for match in re.finditer(r'^([A-Z_][A-Z0-9_]*)="((?:[^"\\]|\\.)*)"$', text, re.MULTILINE | re.DOTALL):
        found[match.group(1)] = re.sub(r"\\(.)", r"\1", match.group(2), flags=re.DOTALL)
    return found


def free_port(taken: set[int], base: int = METRICS_PORT_BASE) -> int:
    port = base
    while port in taken:
        port += 1
    return port


def _unit_path(path: Path | str) -> str:
    """A path in a unit setting: taken as it stands, its specifiers ("%") doubled."""
    return str(path).replace("%", "%%")


def _exec_quote(arg: str) -> str:
    """One argument of ExecStart=: double-quoted, systemd's escapes, specifiers and "$" doubled."""
    quoted = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{quoted}"'


def _setting_quote(value: str) -> str:
    """The value of Environment=: double-quoted, its escapes and specifiers doubled ("$" is plain)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


def unsafe_in_unit(text: str) -> str | None:
    """Why ``text`` (a path the template itself holds: waaah's own, the settings folder, PATH)
    cannot go into a unit file, or None."""
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return "it holds a control character (a newline would start a setting of its own)"
    return None


def template_unit(waaah: str, env_dir: Path, path: str, stop_timeout: float = 60) -> str:
    """``waaah@.service``: the same for every agent; its instance's settings come from
    ``<env_dir>/<instance>.env``. ``waaah agent`` reads them from its environment (WAAAH_START,
    WAAAH_WORKFLOW, WAAAH_WORKSPACE, WAAAH_METRICS_PORT, WAAAH_NOTIFY)."""
    return f"""{MARK}; each agent is an instance: waaah service status lists them
[Unit]
Description=waaah agent %i
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
EnvironmentFile={_unit_path(env_dir)}/%i.env
Environment={_setting_quote("PATH=" + path)}
WorkingDirectory=~
ExecStart={_exec_quote(waaah)} agent --resume-or-start
Restart=on-failure
RestartSec=30
# waaah stops its agent on SIGTERM and saves the session; give it the time to.
TimeoutStopSec={stop_timeout:g}
KillMode=mixed

[Install]
WantedBy=default.target
"""


@dataclass(frozen=True)
class Service:
    """macOS: one launchd agent per supervisor (launchd has no templates)."""

    name: str
    waaah: str  # the absolute path of the waaah executable
    agent: str
    workflow: str
    workspace: Path
    path: str  # PATH for the service (the CLIs are found where the user's shell finds them)

    @property
    def argv(self) -> list[str]:
        return [
            self.waaah,
            "agent",
            f"--start={self.agent}",
            f"--as={self.workflow}",
            "--workspace",
            str(self.workspace),
            "--resume-or-start",
        ]


def launchd_plist(s: Service, log_dir: Path, env: Mapping[str, str]) -> str:
    """The agent's plist; ``env`` (alert URLs among it) is in the file, written 0600."""
    args = "\n".join(f"    <string>{escape(a)}</string>" for a in s.argv)
    variables = "".join(
        f"<key>{escape(k)}</key><string>{escape(v)}</string>" for k, v in {"PATH": s.path, **env}.items()
    )
    label = f"dev.waaah.{s.name}"
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key><string>{escape(label)}</string>
  <key>ProgramArguments</key>
  <array>
{args}
  </array>
  <key>WorkingDirectory</key><string>{escape(str(s.workspace))}</string>
  <key>EnvironmentVariables</key>
  <dict>{variables}</dict>
  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
  <key>StandardOutPath</key><string>{escape(str(log_dir / (s.name + ".log")))}</string>
  <key>StandardErrorPath</key><string>{escape(str(log_dir / (s.name + ".log")))}</string>
</dict>
</plist>
"""


def shell_line(s: Service) -> str:
    return shlex.join(s.argv)
