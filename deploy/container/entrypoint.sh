#!/bin/sh
# The volume mounted at /data may be empty: make the home and the workspace, then run the command
# (waaah agent --resume-or-start: the session on the volume goes on, else a new one starts).
set -eu
mkdir -p "$HOME" "${WAAAH_WORKSPACE:-/data/workspace}"
if [ ! -e "${WAAAH_WORKSPACE:-/data/workspace}/.git" ] && command -v git >/dev/null 2>&1; then
  git init -q "${WAAAH_WORKSPACE:-/data/workspace}" || true
fi
exec "$@"
