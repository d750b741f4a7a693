#!/usr/bin/env bash
# Debian's Chromium for the report test (`waaah report --html` opened headless). Reused when present.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
start=$(date +%s)
echo "install_browser: installing Debian's chromium (apt; about a minute and a half)"
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "install_browser: chromium is missing and apt needs root: run 'apt-get install chromium' as root" >&2
  exit 1
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
echo "install_browser: $(chromium --version 2>/dev/null | head -1) ($(( $(date +%s) - start )) s)"
