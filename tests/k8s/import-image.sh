#!/usr/bin/env bash
# Copy a local Docker image into the test cluster's containerd (namespace k8s.io), where the
# kubelet finds it without a registry: tests/k8s/import-image.sh local/workflow-job:latest
# Pods must then use imagePullPolicy IfNotPresent or Never (Always would contact a registry).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || {
  echo "usage: $0 <docker image>..." >&2
  exit 2
}
[ -S "$CONTAINERD_SOCK" ] || die "the cluster's containerd is not running ($CONTAINERD_SOCK); run: make k8s-up"
# The name containerd gives an image that `docker save` wrote as $1 (Docker's normalization).
containerd_ref() {
  local ref=$1 first=${1%%/*}
  case $ref in */*) ;; *) ref=library/$ref ;; esac
  case $first in *.* | *:* | localhost) ;; *) ref=docker.io/$ref ;; esac
  case ${ref##*/} in *:* | *@*) ;; *) ref=$ref:latest ;; esac
  echo "$ref"
}

for image in "$@"; do
  id=$("$DOCKER" image inspect -f '{{.Id}}' "$image" 2>/dev/null) || die "no Docker image $image"
  # Already there when the name and the CRI's by-ID reference point at the same manifest.
  images=$(ctr_k8s images ls)
  by_name=$(awk -v r="$(containerd_ref "$image")" '$1 == r {print $3}' <<<"$images")
  by_id=$(awk -v r="$id" '$1 == r {print $3}' <<<"$images")
  if [ -n "$by_name" ] && [ "$by_name" = "$by_id" ]; then
    log "$image already imported"
    continue
  fi
  "$DOCKER" save "$image" | ctr_k8s images import - >/dev/null
  log "imported $image"
done
