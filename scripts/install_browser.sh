#!/usr/bin/env bash
# Debian's Chromium for the report test (`waaah report --html` opened headless). Reused when present.
# Needs apt-get (Debian, Ubuntu) and root or sudo; anything else fails with the reason (exit 1).
set -euo pipefail

have_chromium() {
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
}

die() {
  echo "install_browser: $*" >&2
  exit 1
}

if have_chromium; then
  exit 0
fi
command -v apt-get >/dev/null 2>&1 \
  || die "chromium is missing and this system has no apt-get (not Debian or Ubuntu): install Chromium with your own package manager, so that 'chromium' is on PATH"
if [ "$(id -u)" = 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  die "chromium is missing and apt needs root: run 'apt-get install chromium' as root"
fi
start=$(date +%s)
echo "install_browser: installing Debian's chromium (apt; about a minute and a half)"
apt_install() {
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
}
if ! apt_install; then
  "${SUDO[@]}" apt-get update -q >/dev/null || die "apt-get update failed (see its output above)"
  apt_install || die "apt-get install chromium failed (see its output above)"
fi
have_chromium || die "apt-get installed chromium, yet no 'chromium' is on PATH"
echo "install_browser: $(chromium --version 2>/dev/null | head -1) ($(($(date +%s) - start)) s)"
