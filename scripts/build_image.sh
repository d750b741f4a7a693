#!/usr/bin/env bash
# Build deploy/container/Containerfile with buildah (chroot isolation: no daemon, no OCI runtime
# needed), from a base made of Debian's own packages when no image registry is reachable:
# `debootstrap --variant=minbase stable`, imported once as localhost/waaah-base:stable.
# Usage: scripts/build_image.sh   (WAAAH_IMAGE names the result; WAAAH_BASE_IMAGE a base you have)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${WAAAH_IMAGE:-localhost/waaah-agent:dev}"
BASE="${WAAAH_BASE_IMAGE:-localhost/waaah-base:stable}"
start=$(date +%s)

need=()
for tool in buildah podman debootstrap; do command -v "$tool" >/dev/null 2>&1 || need+=("$tool"); done
if [ "${#need[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "build_image: install ${need[*]} (apt, as root) first" >&2; exit 1; }
  echo "build_image: installing ${need[*]} (apt)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null; }
fi

if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "build_image: making the base $BASE from Debian's packages (debootstrap; about two minutes)"
  debootstrap --variant=minbase stable "$tmp/rootfs" >"$tmp/debootstrap.log" 2>&1 \
    || { tail -20 "$tmp/debootstrap.log" >&2; exit 1; }
  tar -C "$tmp/rootfs" -c . | podman import - "$BASE" >/dev/null
fi

echo "build_image: building $IMAGE (buildah, chroot isolation; a few minutes the first time)"
# The machine's CA bundle, for a network behind a TLS-inspecting proxy (a build secret: not kept).
bundle="${WAAAH_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
secret=()
[ -s "$bundle" ] && secret=(--secret "id=ca-bundle,src=$bundle")
buildah bud --isolation=chroot --layers --build-arg "BASE=$BASE" "${secret[@]}" \
  -f "$REPO/deploy/container/Containerfile" -t "$IMAGE" "$REPO"
echo "build_image: $IMAGE built in $(( $(date +%s) - start )) s"
