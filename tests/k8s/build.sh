#!/usr/bin/env bash
# Build the cluster's binaries once per version and inputs: the multi-call `kube` (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl,
# kubeadm, cri-reset) plus `pause`, into $CACHE_DIR/<version>-<hash>/. Prints that directory.
# `build.sh --resolve` only resolves: it downloads every module the build reads, and builds
# nothing (a rehearsal runs it against an empty module cache: a fresh machine, in seconds).
# Go's module and build caches are the project's (scripts/golib.sh). Cold: see README; cached: instant.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../../scripts/golib.sh
. "$K8S_SRC/../../scripts/golib.sh"

resolve_only=
if [ "${1:-}" = --resolve ]; then resolve_only=1; fi
OUT=$(bin_dir)
built() { [ -x "$OUT/kube" ] && [ -x "$OUT/pause" ]; }
if [ -z "$resolve_only" ]; then
  if built; then
    echo "$OUT"
    exit 0
  fi
  mkdir -p "$CACHE_DIR"
  exec 9>"$CACHE_DIR/.lock"
  flock 9 # another engineer may be building the same thing: wait for it, then reuse it
  if built; then
    echo "$OUT"
    exit 0
  fi
fi
go_check

start=$(date +%s)
go_resolve "$K8S_SRC/kube" . ./pause
log "Kubernetes $KUBE_VERSION resolved in $(($(date +%s) - start)) s"
[ -z "$resolve_only" ] || exit 0

minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

tmp=$(mktemp -d "$CACHE_DIR/.build.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
log "building Kubernetes $KUBE_VERSION from Go modules into $OUT (cold: 7-13 min on 2 cores, by load)"
(
  cd "$K8S_SRC/kube"
  nice -n "$GO_NICE" "$GO" build -p 2 -ldflags "$ld" -o "$tmp/kube" .
  nice -n "$GO_NICE" "$GO" build -ldflags "-s -w" -o "$tmp/pause" ./pause
)
for c in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl kubeadm; do
  ln -s kube "$tmp/$c"
done
rm -rf "$OUT"
mv "$tmp" "$OUT"
trap - EXIT
log "built in $(($(date +%s) - start)) s: $(du -sh "$OUT" | cut -f1) of binaries"
echo "$OUT"
