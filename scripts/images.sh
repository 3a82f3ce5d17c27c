#!/usr/bin/env bash
# Build the local base images without a registry:
#   local/debian12:latest          debootstrap --variant=minbase bookworm, docker import
#   local/debian12-systemd:latest  + systemd, python3, sudo, iproute2 (Molecule hosts)
#   local/debian12-plain:latest    + python3, python3-venv, tini (no init; check-mode/failure tests, service images)
# Each image carries a label with the hash of its inputs; an image whose label matches is reused,
# so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
DOCKER=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)}
STATE=${WORKFLOW_AGENT_STATE:-/var/tmp/workflow-agent-dev}
mkdir -p "$STATE"
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

label_of() { $DOCKER image inspect -f '{{ index .Config.Labels "workflow-agent.hash" }}' "$1" 2>/dev/null || true; }

base_hash=$(printf '%s %s %s' "$SUITE" "$MIRROR" "$(sha256sum scripts/images.sh | cut -c1-16)" | sha256sum | cut -c1-16)
if [ "$(label_of local/debian12:latest)" != "$base_hash" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  rootfs=$(mktemp -d "$STATE/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  echo "images: debootstrap $SUITE from $MIRROR (about a minute)"
  debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$STATE/debootstrap.log" 2>&1 \
    || { tail -n 20 "$STATE/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | $DOCKER import --change "LABEL workflow-agent.hash=$base_hash" \
    --change 'CMD ["/bin/bash"]' - local/debian12:latest >/dev/null
  rm -rf "$rootfs"; trap - EXIT
  echo "images: local/debian12:latest built"
else
  echo "images: local/debian12:latest up to date"
fi

build() { # name dir
  local name=$1 dir=$2 h
  h=$(cat "$dir/Containerfile" | sha256sum | cut -c1-16)
  h=$(printf '%s %s' "$base_hash" "$h" | sha256sum | cut -c1-16)
  if [ "$(label_of "$name")" = "$h" ]; then echo "images: $name up to date"; return; fi
  echo "images: building $name"
  $DOCKER build -q --label "workflow-agent.hash=$h" -t "$name" -f "$dir/Containerfile" "$dir" >/dev/null
  echo "images: $name built"
}
build local/debian12-systemd:latest tests/images/systemd
build local/debian12-plain:latest tests/images/plain
