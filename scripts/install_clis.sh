#!/usr/bin/env bash
# Install the pinned real CLIs into <repo>/.cache/clis (never globally).
# Usage: scripts/install_clis.sh [gemini|claude|codex|opencode|all|extra|old]   (default: all)
# `extra` installs codex and opencode (supervised by `waaah agent` too); not part of `all`
# (codex alone is ~400 MB). `old` installs the older releases the e2e suite also drives, each
# into its own prefix .cache/clis-old/<cli>-<version> (OLD_RELEASES below).
# Idempotent: a CLI whose installed package.json already carries the pin is left alone.
set -euo pipefail

GEMINI_PKG="@google/gemini-cli"
GEMINI_VERSION="0.61.0"
CLAUDE_PKG="@anthropic-ai/claude-code"
CLAUDE_VERSION="2.1.332"
CODEX_PKG="@openai/codex"
CODEX_VERSION="0.171.0"
OPENCODE_PKG="opencode-ai"
OPENCODE_VERSION="1.18.33"

# Older releases run by the e2e core scenarios (docs/supervisor.md "CLI releases"): the previous pins among
# them (claude 2.1.330, codex 0.169.0); 0.13.0 is the too-old gemini the supervisor must refuse
# (it has no --resume).
OLD_RELEASES=(
    "gemini $GEMINI_PKG 0.51.0"
    "gemini $GEMINI_PKG 0.34.0"
    "gemini $GEMINI_PKG 0.13.0"
    "claude $CLAUDE_PKG 2.1.330"
    "claude $CLAUDE_PKG 2.1.300"
    "claude $CLAUDE_PKG 2.1.200"
    "codex $CODEX_PKG 0.169.0"
)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$REPO/.cache/clis"
BIN="$PREFIX/node_modules/.bin"
OLD_ROOT="$REPO/.cache/clis-old"

die() {
    echo "install_clis: $*" >&2
    exit 1
}

# Version recorded in an installed package's package.json, or nothing when absent.
installed_version() {
    local manifest="$PREFIX/node_modules/$1/package.json"
    [[ -f "$manifest" ]] || return 0
    node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$manifest"
}

# Install "<pkg>@<version>" unless that exact version is already there, then print one line.
ensure() {
    local name="$1" pkg="$2" version="$3"
    if [[ "$(installed_version "$pkg")" == "$version" && -x "$BIN/$name" ]]; then
        # Fast path: trust the manifest (running `gemini --version` alone costs ~2 s).
        echo "$name $version (already installed: $BIN/$name)"
        return
    fi
    mkdir -p "$PREFIX"
    echo "install_clis: installing $name $version into $PREFIX (npm; about a minute)" >&2
    local started=$SECONDS
    # --save-exact keeps the prefix's package.json on the pin, so a later plain
    # `npm install` there cannot drift. Engines warnings are expected (claude asks for
    # Node 22 but runs a bundled native executable).
    npm install --prefix "$PREFIX" --no-audit --no-fund --save-exact --loglevel=error \
        "$pkg@$version" >&2 || die "npm install $pkg@$version failed"
    [[ -x "$BIN/$name" ]] || die "$name binary missing at $BIN/$name after install"
    # Prove the fresh install actually runs on this machine's Node.
    local reported
    reported="$("$BIN/$name" --version 2>/dev/null | head -n 1)" ||
        die "$name --version failed after install (run $BIN/$name --version to see why)"
    # codex says "codex-cli 0.171.0".
    [[ "${reported#codex-cli }" == "$version"* ]] || die "$name reports '$reported', expected $version"
    echo "$name $version (installed in $((SECONDS - started)) s: $BIN/$name)"
}

main() {
    local which="${1:-all}"
    command -v npm >/dev/null 2>&1 || die "npm not found: install Node.js >= 20 with npm first"
    command -v node >/dev/null 2>&1 || die "node not found: install Node.js >= 20 first"
    case "$which" in
    gemini) ensure gemini "$GEMINI_PKG" "$GEMINI_VERSION" ;;
    claude) ensure claude "$CLAUDE_PKG" "$CLAUDE_VERSION" ;;
    codex) ensure codex "$CODEX_PKG" "$CODEX_VERSION" ;;
    opencode) ensure opencode "$OPENCODE_PKG" "$OPENCODE_VERSION" ;;
    all)
        ensure gemini "$GEMINI_PKG" "$GEMINI_VERSION"
        ensure claude "$CLAUDE_PKG" "$CLAUDE_VERSION"
        ;;
    extra)
        ensure codex "$CODEX_PKG" "$CODEX_VERSION"
        ensure opencode "$OPENCODE_PKG" "$OPENCODE_VERSION"
        ;;
    old)
        local release name pkg version
        for release in "${OLD_RELEASES[@]}"; do
            read -r name pkg version <<<"$release"
            PREFIX="$OLD_ROOT/$name-$version"
            BIN="$PREFIX/node_modules/.bin"
            ensure "$name" "$pkg" "$version"
        done
        ;;
    *) die "unknown CLI '$which' (expected gemini, claude, codex, opencode, all, extra or old)" ;;
    esac
}

main "$@"
