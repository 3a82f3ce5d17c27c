#!/usr/bin/env bash
# Build Prometheus with Kubernetes service discovery, once per version and inputs, into
# $CACHE_DIR/prometheus-<version>-<hash>/prometheus, and print that path. Debian's `prometheus`
# (scripts/prometheus.sh's default) has no kubernetes_sd_configs: Debian removed Kubernetes
# support from its package. The module is pinned in prometheus/go.mod (go.sum committed); the
# build keeps Prometheus's file, HTTP and Kubernetes discovery only (its remove_all_sd and
# enable_kubernetes_sd build tags) and serves no web UI (no builtinassets): the HTTP API is what
# the tests use. `build-prometheus.sh --resolve` only downloads what the build reads (see
# build.sh). Go's module and build caches are the project's (scripts/golib.sh).
# Cold: about 4 min of 2 busy cores; cached: instant.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../../scripts/golib.sh
. "$K8S_SRC/../../scripts/golib.sh"

resolve_only=
if [ "${1:-}" = --resolve ]; then resolve_only=1; fi
MOD=$K8S_SRC/prometheus
PKG=github.com/prometheus/prometheus
VERSION=$(awk -v p="$PKG" '$1 == p {print $2}' "$MOD/go.mod")
key=$(go_key "$0" "$K8S_SRC/../../scripts/golib.sh" "$MOD/go.mod" "$MOD/go.sum")
OUT=$CACHE_DIR/prometheus-$VERSION-$key
if [ -z "$resolve_only" ]; then
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
fi
go_check

# The build's tags in GOFLAGS, so that go_resolve reads the same packages as the build.
export GOFLAGS="$GOFLAGS -tags=remove_all_sd,enable_kubernetes_sd"
start=$(date +%s)
# The release number (3.x.y) that `prometheus --version` and its build_info metric report, from
# the module's VERSION file: go_module_dir downloads the module before reading it.
dir=$(go_module_dir "$MOD" "$PKG") # (its own assignment: inside `cat "$(...)"`, a failure would go unseen)
release=$(cat "$dir/VERSION")
go_resolve "$MOD" "$PKG/cmd/prometheus"
log "Prometheus $release resolved in $(($(date +%s) - start)) s"
[ -z "$resolve_only" ] || exit 0

tmp=$(mktemp -d "$CACHE_DIR/.build.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
log "building Prometheus $release ($PKG $VERSION) with Kubernetes discovery into $OUT (cold: about 4 min on 2 cores)"
(
  cd "$MOD"
  nice -n "$GO_NICE" "$GO" build -p 2 \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
    -o "$tmp/prometheus" "$PKG/cmd/prometheus"
)
rm -rf "$OUT"
mv "$tmp" "$OUT"
trap - EXIT
log "built in $(($(date +%s) - start)) s: $(du -sh "$OUT/prometheus" | cut -f1)"
echo "$OUT/prometheus"
