#!/usr/bin/env bash
# Build Prometheus with Kubernetes service discovery, once per version and inputs, into
# $CACHE_DIR/prometheus-<version>-<hash>/prometheus, and print that path. Debian's `prometheus`
# (scripts/prometheus.sh's default) has no kubernetes_sd_configs: Debian removed Kubernetes
# support from its package. The module is pinned in prometheus/go.mod (go.sum committed); the
# build keeps Prometheus's file, HTTP and Kubernetes discovery only (its remove_all_sd and
# enable_kubernetes_sd build tags) and serves no web UI (no builtinassets): the HTTP API is what
# the tests use. Cold: about 4 min of 2 busy cores; cached: instant.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

MOD=$K8S_SRC/prometheus
PKG=github.com/prometheus/prometheus
VERSION=$(awk -v p="$PKG" '$1 == p {print $2}' "$MOD/go.mod")
key=$(cat "$0" "$MOD/go.mod" "$MOD/go.sum" | sha256sum | cut -c1-12)
OUT=$CACHE_DIR/prometheus-$VERSION-$key
if [ -x "$OUT/prometheus" ]; then
  echo "$OUT/prometheus"
  exit 0
fi
mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.lock"
flock 9 # another engineer may be building the same thing: wait for it, then reuse it
if [ -x "$OUT/prometheus" ]; then
  echo "$OUT/prometheus"
  exit 0
fi
[ -x "$GO" ] || die "no Go toolchain at $GO (set GO=/path/to/go)"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -mod=readonly -buildvcs=false"
export GOCACHE=${WFA_K8S_GOCACHE:-$CACHE_DIR/go-build}
cd "$MOD"
# The release number (3.x.y) that `prometheus --version` and its build_info metric report.
release=$(cat "$("$GO" list -m -f '{{.Dir}}' "$PKG")/VERSION")
tmp=$(mktemp -d "$CACHE_DIR/.build.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
log "building Prometheus $release ($PKG $VERSION) with Kubernetes discovery into $OUT (cold: about 4 min on 2 cores)"
start=$(date +%s)
nice -n 10 "$GO" build -p 2 -tags remove_all_sd,enable_kubernetes_sd \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
  -o "$tmp/prometheus" "$PKG/cmd/prometheus"
rm -rf "$OUT"
mv "$tmp" "$OUT"
trap - EXIT
log "built in $(($(date +%s) - start)) s: $(du -sh "$OUT/prometheus" | cut -f1)"
echo "$OUT/prometheus"
