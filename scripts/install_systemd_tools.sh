#!/usr/bin/env bash
# Debian's systemd tools for the service tests: `systemd-analyze verify` reads the crew's template
# unit as systemd does and `systemd-escape` says how systemd escapes a name (nothing is started).
set -euo pipefail
if command -v systemd-analyze >/dev/null 2>&1 && command -v systemd-escape >/dev/null 2>&1; then
  exit 0
fi
start=$(date +%s)
echo "install_systemd_tools: installing Debian's systemd package for systemd-analyze (apt)"
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "install_systemd_tools: systemd-analyze is missing and apt needs root: run 'apt-get install systemd' as root" >&2
  exit 1
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd >/dev/null; }
echo "install_systemd_tools: $(systemd-analyze --version | head -1) ($(( $(date +%s) - start )) s)"
