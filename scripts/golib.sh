# shellcheck shell=bash
# Sourced by every Go build (tests/k8s/build*.sh, scripts/build-go-tool.sh), never run on its own.
# Each build uses the project's own module and build caches, so that a fresh machine is a
# matter of emptying these directories, and resolves every module it needs before it compiles:
# a missing download then fails in seconds and names the module, instead of after a long compile.
# shellcheck disable=SC2034 # read by the scripts that source this file
GO=${GO:-/usr/local/go/bin/go}
GO_CACHE=${WFA_GO_CACHE:-/var/cache/workflow-agent-go}
export GOMODCACHE=${WFA_GO_MODCACHE:-$GO_CACHE/mod}
export GOCACHE=${WFA_GO_BUILDCACHE:-$GO_CACHE/build}
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -mod=readonly -buildvcs=false"
# Builds run beside the test stages: at the lowest priority, they take only the CPU left over.
GO_NICE=${WFA_GO_NICE:-19}

go_die() {
  echo "go-build: ERROR: $*" >&2
  exit 1
}

go_check() {
  [ -x "$GO" ] || go_die "no Go toolchain at $GO (set GO=/path/to/go)"
}

# go_key FILE...: the cache key of a build's inputs. Whole-line shell comments are left out, so
# that documenting a build script does not rebuild its binaries.
go_key() {
  sed '/^[[:space:]]*#/d' "$@" | sha256sum | cut -c1-12
}

# go_resolve DIR PKG...: download every module that building PKG... from the module at DIR
# reads, and nothing else; fail naming the module when one cannot be had. Build tags go in
# GOFLAGS (-tags=...), so that this resolves the same packages as the build.
go_resolve() {
  local dir=$1 out
  shift
  if ! out=$(cd "$dir" && "$GO" list -deps -f '{{if .Module}}{{.Module.Path}}{{end}}' "$@" 2>&1 >/dev/null); then
    # The error names module@version; the "downloading" lines before it are the ones that worked.
    go_die "cannot resolve the modules of $* (module $dir): $(grep -v '^go: downloading ' <<<"$out" | head -n 3 | tr '\n' ' ')"
  fi
}

# go_module_dir DIR MODULE: the directory of MODULE (at the version DIR's go.mod pins), downloaded
# first when the cache lacks it. `go list -m -f {{.Dir}}` alone prints an empty Dir for a module
# that is not in the cache yet, with exit code 0, and downloads nothing.
go_module_dir() {
  local dir=$1 mod=$2 ver out d
  ver=$(cd "$dir" && "$GO" list -m -f '{{.Version}}' "$mod") || go_die "$mod is not in $dir/go.mod"
  out=$(cd "$dir" && "$GO" mod download -json "$mod@$ver" 2>&1) ||
    go_die "cannot download $mod@$ver (module $dir): $(sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' <<<"$out" | head -n 1)"
  d=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$out")
  if [ -z "$d" ] || [ ! -d "$d" ]; then go_die "cannot download $mod@$ver (module $dir): no directory in: $out"; fi
  echo "$d"
}
