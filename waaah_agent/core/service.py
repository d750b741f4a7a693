"""A supervisor that comes back after a reboot: the systemd user unit (or launchd agent) text.

Pure: what to run and where in, the unit file's text out. runtime/service.py writes it and
asks systemctl (or launchctl). The service runs ``waaah agent ... --resume-or-start``: after a
reboot it carries on the newest session of that agent in its workspace, through the CLI's own
resume; the first time it starts one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape


@dataclass(frozen=True)
class Service:
    name: str  # waaah-<agent>-<workflow>-<workspace folder>, safe for a unit name
    waaah: str  # the absolute path of the waaah executable
    agent: str
    workflow: str
    workspace: Path
    path: str  # PATH for the service (the CLIs are found where the user's shell finds them)
    extra: tuple[str, ...] = ()  # more `waaah agent` options, e.g. --notify URL

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
            *self.extra,
        ]


def service_name(agent: str, workflow: str, workspace: Path) -> str:
    raw = f"waaah-{agent}-{workflow}-{workspace.name or 'root'}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)[:120]


def _systemd_quote(arg: str, expands_variables: bool = True) -> str:
    """One argument of ExecStart= (or the value of Environment=, where "$" is not special):
    double-quoted, with systemd's specifiers and escapes doubled."""
    quoted = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return '"' + (quoted.replace("$", "$$") if expands_variables else quoted) + '"'


def _systemd_path(path: Path) -> str:
    """A path setting such as WorkingDirectory=: taken as it stands (systemd unquotes none, so a
    quoted path is "not absolute" and the unit would not start), with its specifiers doubled."""
    return str(path).replace("%", "%%")


def systemd_unit(s: Service) -> str:
    command = " ".join(_systemd_quote(a) for a in s.argv)
    return f"""# Written by `waaah service install`; remove with: waaah service remove {s.name}
[Unit]
Description=waaah: {s.agent} with the {s.workflow} workflow in {s.workspace}
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
WorkingDirectory={_systemd_path(s.workspace)}
Environment={_systemd_quote("PATH=" + s.path, expands_variables=False)}
ExecStart={command}
Restart=on-failure
RestartSec=30
# waaah stops its agent on SIGTERM and saves the session; give it the time to.
TimeoutStopSec=60
KillMode=mixed

[Install]
WantedBy=default.target
"""


def launchd_plist(s: Service, log_dir: Path) -> str:
    args = "\n".join(f"    <string>{escape(a)}</string>" for a in s.argv)
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
  <dict><key>PATH</key><string>{escape(s.path)}</string></dict>
  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
  <key>StandardOutPath</key><string>{escape(str(log_dir / (s.name + ".log")))}</string>
  <key>StandardErrorPath</key><string>{escape(str(log_dir / (s.name + ".log")))}</string>
</dict>
</plist>
"""


def shell_line(s: Service) -> str:
    return shlex.join(s.argv)
