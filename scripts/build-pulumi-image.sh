#!/usr/bin/env bash
# Build local/pulumi:latest, also tagged local/pulumi:<version>: the stand-in for the pulumi/pulumi
# job image (tests/images/pulumi/Containerfile), FROM local/debian12:latest (scripts/images.sh),
# with the Pulumi CLI and YAML language host of scripts/build-go-tool.sh (built first when the Go
# cache lacks them: minutes when cold). The image carries the hash of its inputs (base image id,
# Containerfile, the binaries' paths, which hold their build's cache key); a match is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
NAME=${WORKFLOW_AGENT_PULUMI_IMAGE:-local/pulumi}
DIR=tests/images/pulumi
BASE=local/debian12:latest

base_id=$(image_id "$BASE")
[ -n "$base_id" ] || { echo "build-pulumi-image: $BASE is missing; run scripts/images.sh first" >&2; exit 1; }
pulumi=$(bash scripts/build-go-tool.sh pulumi)
yaml=$(bash scripts/build-go-tool.sh pulumi-language-yaml)
version=$("$pulumi" version)
version=${version#v}
# One build at a time per STATE (make test's deploy stage and bench-smoke may ask together): the
# second waits, then finds the image up to date.
mkdir -p "$STATE"
exec 9>"$STATE/.lock-pulumi-image"
flock 9
hash=$(printf '%s\n' "$base_id" "$(sha256sum <"$DIR/Containerfile")" "$pulumi" "$yaml" | sha256sum | cut -c1-16)
if [ "$(image_hash "$NAME:latest")" = "$hash" ]; then
  echo "images: $NAME:latest up to date"
else
  echo "images: building $NAME:latest (Pulumi $version)"
  ctx=$(mktemp -d "$STATE/pulumi-image.XXXXXX")
  trap 'rm -rf "$ctx"' EXIT
  cp "$DIR/Containerfile" "$ctx/"
  # Hard links where the cache and $STATE share a file system: the binaries are 150 MB.
  for b in "$pulumi" "$yaml"; do ln "$b" "$ctx/" 2>/dev/null || cp "$b" "$ctx/"; done
  old=$(image_id "$NAME:latest")
  $DOCKER build -q --build-arg "BASE_IMAGE=$BASE" --label "$HASH_LABEL=$hash" -t "$NAME:latest" \
    -f "$ctx/Containerfile" "$ctx" >/dev/null
  $DOCKER tag "$NAME:latest" "$NAME:$version" # before the old image goes: it may hold this tag
  drop_replaced "$old"
  echo "images: $NAME:latest built"
fi
$DOCKER tag "$NAME:latest" "$NAME:$version"
