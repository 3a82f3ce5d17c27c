#!/usr/bin/env bash
# Build the local base images without a registry. Usage: images.sh [SUITE...] (default: all).
#   bookworm (Debian 12):
#     local/debian12:latest          debootstrap --variant=minbase bookworm, docker import
#     local/debian12-systemd:latest  + systemd, python3, sudo, iproute2 (Molecule hosts)
#     local/debian12-plain:latest    + python3, python3-venv, tini (no init; check-mode/failure tests, service images)
#     local/debian12-ee-base:latest  + a venv with pip, apt lists, this machine's pip settings (the base
#                                    of tests/galaxy/execution-environment.yml, which tests/galaxy/ee.sh builds)
#   trixie (Debian 13): the same base and systemd host, the second platform of the Molecule matrix
#     local/debian13:latest, local/debian13-systemd:latest
# Each image carries a label with the hash of its inputs; an image whose label matches is reused,
# so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
mkdir -p "$STATE"
# The Debian mirror is the machine's own (its apt sources, deb822 or one-line form), never a host
# name written here: DEBIAN_MIRROR overrides it.
apt_mirror() { # (a missing sources file is no error: set -e and pipefail must not end the script)
  { awk '/^URIs:/{print $2}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true
    awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true
  } | { grep -v -e '-security' -e '-updates' || true; } | head -n 1
}
MIRROR=${DEBIAN_MIRROR:-$(apt_mirror)}
[ -n "$MIRROR" ] || { echo "images: no Debian mirror in /etc/apt/sources.list{,.d}; set DEBIAN_MIRROR=<url>" >&2; exit 2; }
# The base image's inputs, hashed into its label (not the whole script: editing the script must
# not rebuild every image).
VARIANT=minbase

base() { # suite name; sets base_hash
  local suite=$1 name=$2 rootfs
  base_hash=$(printf '%s %s %s' "$suite" "$MIRROR" "$VARIANT" | sha256sum | cut -c1-16)
  if [ "$(image_hash "$name")" = "$base_hash" ]; then echo "images: $name up to date"; return; fi
  command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  rootfs=$(mktemp -d "$STATE/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  echo "images: debootstrap $suite from $MIRROR (about a minute)"
  debootstrap --variant="$VARIANT" "$suite" "$rootfs" "$MIRROR" >"$STATE/debootstrap-$suite.log" 2>&1 \
    || { tail -n 20 "$STATE/debootstrap-$suite.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | $DOCKER import --change "LABEL $HASH_LABEL=$base_hash" \
    --change 'CMD ["/bin/bash"]' - "$name" >/dev/null
  rm -rf "$rootfs"; trap - EXIT
  echo "images: $name built"
}

build() { # name dir base-image [parent-hash]: dir is the build context, every file of it hashed
  local name=$1 dir=$2 from=$3 parent=${4:-$base_hash} h
  h=$({ cat "$dir/Containerfile"
        find "$dir" -type f ! -name Containerfile -print0 | LC_ALL=C sort -z | xargs -0 -r cat; } \
      | sha256sum | cut -c1-16)
  h=$(printf '%s %s' "$parent" "$h" | sha256sum | cut -c1-16)
  built_hash=$h
  if [ "$(image_hash "$name")" = "$h" ]; then echo "images: $name up to date"; return; fi
  echo "images: building $name"
  $DOCKER build -q --build-arg "BASE_IMAGE=$from" --label "$HASH_LABEL=$h" -t "$name" \
    -f "$dir/Containerfile" "$dir" >/dev/null
  echo "images: $name built"
}

# This machine's pip settings for a build that installs from a package index (the EE base): its
# index and the CA bundle pip trusts (HTTPS from containers here goes through a proxy whose CA
# only the host has), read from its pip config and PIP_* variables like the apt mirror above,
# never written into the repository. Writes DIR/pip/pip.conf (and DIR/pip/ca.pem).
pip_settings() { # dir
  local dir=$1 key var value py
  py=${PYTHON:-$(command -v python3)}
  mkdir -p "$dir/pip"; echo '[global]' > "$dir/pip/pip.conf"
  for key in index-url extra-index-url trusted-host cert; do
    var=PIP_$(echo "$key" | tr 'a-z-' 'A-Z_')
    # `pip config list` prints SECTION.key='value' per file (global, user, site: the last wins).
    value=${!var:-$({ "$py" -m pip config list 2>/dev/null || true; } | sed -n "s/^[a-z]*\.$key='\(.*\)'\$/\1/p" | tail -n 1)}
    [ -n "$value" ] || continue
    if [ "$key" = cert ]; then cp "$value" "$dir/pip/ca.pem"; value=/etc/pip/ca.pem; fi
    echo "$key = $value" >> "$dir/pip/pip.conf"
  done
}

ee_base() { # the execution-environment base, FROM local/debian12-plain:latest (needs its built_hash)
  local ctx
  ctx=$(mktemp -d "$STATE/ee-base.XXXXXX")
  trap 'rm -rf "$ctx"' EXIT
  cp tests/images/ee-base/Containerfile "$ctx/"
  pip_settings "$ctx"
  build local/debian12-ee-base:latest "$ctx" local/debian12-plain:latest "$built_hash"
  rm -rf "$ctx"; trap - EXIT
}

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(bookworm trixie)
for suite in "${suites[@]}"; do
  case $suite in
    bookworm)
      base bookworm local/debian12:latest
      build local/debian12-systemd:latest tests/images/systemd local/debian12:latest
      build local/debian12-plain:latest tests/images/plain local/debian12:latest
      ee_base
      ;;
    trixie)
      base trixie local/debian13:latest
      build local/debian13-systemd:latest tests/images/systemd local/debian13:latest
      ;;
    *) echo "images.sh: unknown suite '$suite' (bookworm, trixie)" >&2; exit 2 ;;
  esac
done
