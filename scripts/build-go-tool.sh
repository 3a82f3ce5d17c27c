#!/usr/bin/env bash
# Build one Go tool of tests/gotools/NAME (a wrapper module: go.mod, go.sum, build.conf) into
# $WFA_GO_CACHE/bin/NAME-VERSION-KEY/, once per inputs, and print the binary's path.
#   scripts/build-go-tool.sh NAME             resolve, then build (or reuse the cached build)
#   scripts/build-go-tool.sh --resolve NAME   resolve only: download every module the build reads
# build.conf sets PKG (the command to build), MODULE (whose pinned version names the build) and
# LDFLAGS (may use $VERSION). WFA_GO_TOOLS names another directory of wrapper modules (tests).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/golib.sh
. scripts/golib.sh

resolve_only=
if [ "${1:-}" = --resolve ]; then resolve_only=1; shift; fi
NAME=${1:?usage: build-go-tool.sh [--resolve] NAME}
DIR=${WFA_GO_TOOLS:-$PWD/tests/gotools}/$NAME
[ -f "$DIR/build.conf" ] || go_die "no tool $NAME (no $DIR/build.conf)"
PKG='' MODULE='' LDFLAGS=''
# shellcheck disable=SC1091
. "$DIR/build.conf"
go_check
VERSION=$(awk -v m="$MODULE" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' "$DIR/go.mod")
[ -n "$VERSION" ] || go_die "$MODULE is not required by $DIR/go.mod"
# A wrapper's own Go code (a main.go, as CoreDNS's) is an input too; tools.go only names modules.
mapfile -t own_go < <(find "$DIR" -maxdepth 1 -name '*.go' ! -name tools.go | LC_ALL=C sort)
key=$(go_key "$0" scripts/golib.sh "$DIR/go.mod" "$DIR/go.sum" "$DIR/build.conf" "${own_go[@]}")
OUT=$GO_CACHE/bin/$NAME-$VERSION-$key
if [ -z "$resolve_only" ]; then
  if [ -x "$OUT/$NAME" ]; then
    echo "$OUT/$NAME"
    exit 0
  fi
  mkdir -p "$GO_CACHE/bin"
  exec 9>"$GO_CACHE/.lock-$NAME"
  flock 9 # another run may be building the same thing: wait for it, then reuse it
  if [ -x "$OUT/$NAME" ]; then
    echo "$OUT/$NAME"
    exit 0
  fi
fi
# (A resolve-only run writes nothing but the module cache, so it takes no lock: a rehearsal
# against an empty module cache does not wait for a build in progress.)
start=$(date +%s)
go_resolve "$DIR" "$PKG"
echo "go-build: $NAME $VERSION resolved in $(($(date +%s) - start)) s" >&2
[ -z "$resolve_only" ] || exit 0

ld="-s -w ${LDFLAGS//\$VERSION/$VERSION}"
tmp=$(mktemp -d "$GO_CACHE/bin/.build.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "go-build: building $NAME $VERSION into $OUT" >&2
(cd "$DIR" && nice -n "$GO_NICE" "$GO" build -p 2 -ldflags "$ld" -o "$tmp/$NAME" "$PKG")
rm -rf "$OUT"
mv "$tmp" "$OUT"
trap - EXIT
echo "go-build: $NAME built in $(($(date +%s) - start)) s: $(du -sh "$OUT/$NAME" | cut -f1)" >&2
echo "$OUT/$NAME"
