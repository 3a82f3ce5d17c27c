#!/usr/bin/env bash
# Build local/workflow-job:latest, the small job image the docker/kubernetes targets run steps in
# (tests, demo). Its base is local/debian12:latest (scripts/images.sh). The image carries a label
# with the hash of its inputs (Containerfile + base image id); a matching image is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
NAME=${WORKFLOW_AGENT_JOB_IMAGE:-local/workflow-job:latest}
DIR=tests/images/job
BASE=local/debian12:latest

base_id=$($DOCKER image inspect -f '{{ .Id }}' "$BASE" 2>/dev/null) \
  || { echo "build-job-image: $BASE is missing; run scripts/images.sh first" >&2; exit 1; }
hash=$(printf '%s %s' "$base_id" "$(sha256sum <"$DIR/Containerfile")" | sha256sum | cut -c1-16)
current=$(image_hash "$NAME")
if [ "$current" = "$hash" ]; then
  echo "images: $NAME up to date"
  exit 0
fi
echo "images: building $NAME"
$DOCKER build -q --label "$HASH_LABEL=$hash" -t "$NAME" -f "$DIR/Containerfile" "$DIR" >/dev/null
echo "images: $NAME built"
