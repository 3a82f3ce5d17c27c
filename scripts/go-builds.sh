#!/usr/bin/env bash
# The project's Go builds, one after the other at the lowest priority, so that `make test` can run
# them in the background from its start and each stage waits only for the builds it needs.
#   go-builds.sh start [NAME...]  start the builds (default: $WFA_GO_BUILDS, else all) in the
#                                 background and return; each logs to $STATE/logs/build-NAME.log
#                                 and leaves its exit code in $STATE/builds/NAME.rc
#   go-builds.sh wait [NAME...]   wait for these builds of the last start (default: all it
#                                 started); exit 1 naming each that failed or never ran
#   go-builds.sh run [NAME...]    start, then wait (`make go-builds`)
#   go-builds.sh stop             end the builds started by `start` (their process group)
#   go-builds.sh list             NAME COMMAND of every build, in build order
#   go-builds.sh resolve NAME     only the build's resolution step (its --resolve): every module
#                                 it reads, downloaded; nothing compiled
# Helm first (about a minute: the galaxy stage's execution environment carries it), then Pulumi:
# the stages that deploy with it come before the Kubernetes stage. kind's tools (its CLI, the
# CoreDNS of its node image; kubeadm is in kube) and actionlint come last, after what the
# Kubernetes stage waits for.
set -uo pipefail
SELF=$(cd "$(dirname "$0")" && pwd)/go-builds.sh
cd "$(dirname "$0")/.." || exit 2
. scripts/lib.sh
BUILDS=(
  "helm scripts/build-go-tool.sh helm"
  "pulumi scripts/build-go-tool.sh pulumi"
  "pulumi-language-yaml scripts/build-go-tool.sh pulumi-language-yaml"
  "kube tests/k8s/build.sh"
  "prometheus tests/k8s/build-prometheus.sh"
  "registry scripts/build-go-tool.sh registry"
  "kind scripts/build-go-tool.sh kind"
  "coredns scripts/build-go-tool.sh coredns"
  "actionlint scripts/build-go-tool.sh actionlint"
)
DIR=$STATE/builds
LOGS=$STATE/logs

die() {
  echo "go-builds: $*" >&2
  exit 2
}
command_of() { # NAME -> its command line
  local b
  for b in "${BUILDS[@]}"; do
    [ "${b%% *}" != "$1" ] || { echo "${b#* }"; return 0; }
  done
  die "no build $1 (builds: $(names))"
}
names() { local b; for b in "${BUILDS[@]}"; do printf '%s ' "${b%% *}"; done; }

# The background runner: each build in order, its exit code written once it is done (the file
# appears whole: the waiters poll for it).
loop() {
  local name start rc
  for name in "$@"; do
    start=$(date +%s)
    # shellcheck disable=SC2046 # the command line is words
    bash $(command_of "$name") >"$LOGS/build-$name.log" 2>&1
    rc=$?
    echo "$rc" >"$DIR/.$name.rc" && mv "$DIR/.$name.rc" "$DIR/$name.rc"
    echo "go-builds: $name $([ "$rc" = 0 ] && echo ok || echo "FAIL (exit $rc)") in $(($(date +%s) - start)) s"
  done
}

start() {
  local name args=()
  [ $# -gt 0 ] || read -ra args <<<"${WFA_GO_BUILDS-$(names)}"
  [ $# -gt 0 ] || set -- "${args[@]}"
  for name in "$@"; do command_of "$name" >/dev/null; done
  stop
  rm -rf "$DIR"
  mkdir -p "$DIR" "$LOGS"
  echo "$*" >"$DIR/planned"
  # Its own session, so that `stop` ends every process of it (go build and its compilers) and
  # nothing else; nice 19: the stages come first.
  nice -n "${WFA_GO_NICE:-19}" setsid bash "$SELF" _loop "$@" >"$LOGS/go-builds.log" 2>&1 </dev/null &
  echo $! >"$DIR/runner.pid"
}

runner_alive() {
  local pid
  pid=$(cat "$DIR/runner.pid" 2>/dev/null) || return 1
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "go-builds.sh _loop"
}

stop() {
  if runner_alive; then kill -TERM -- "-$(cat "$DIR/runner.pid")" 2>/dev/null || true; fi
}

# Prints one line per failed build (NAME: exit N, log: PATH) on stdout, their log tails on stderr.
wait_for() {
  local name rc failed=0 planned args=()
  planned=$(cat "$DIR/planned" 2>/dev/null) ||
    die "no builds were started under $STATE (go-builds.sh start, or make go-builds)"
  [ $# -gt 0 ] || read -ra args <<<"$planned"
  [ $# -gt 0 ] || set -- "${args[@]}"
  for name in "$@"; do
    command_of "$name" >/dev/null
    if [[ " $planned " != *" $name "* ]]; then
      echo "$name: not built by this run (it started: ${planned:-none})"
      failed=1
      continue
    fi
    while [ ! -f "$DIR/$name.rc" ] && runner_alive; do sleep 2; done
    if ! rc=$(cat "$DIR/$name.rc" 2>/dev/null); then
      echo "$name: never finished (its runner ended first), log: $LOGS/build-$name.log"
      failed=1
    elif [ "$rc" != 0 ]; then
      echo "$name: exit $rc, log: $LOGS/build-$name.log"
      tail -n 20 "$LOGS/build-$name.log" >&2 2>/dev/null || true
      failed=1
    fi
  done
  return $failed
}

case ${1:-} in
  start) shift; start "$@" ;;
  wait) shift; wait_for "$@" ;;
  run)
    shift
    start "$@" || exit
    echo "go-builds: building $(cat "$DIR/planned") (logs: $LOGS/build-NAME.log)"
    wait_for "$@" && echo "go-builds: all built"
    ;;
  stop) stop ;;
  list) for b in "${BUILDS[@]}"; do echo "$b"; done ;;
  resolve)
    [ $# = 2 ] || die "usage: go-builds.sh resolve NAME"
    read -ra cmd <<<"$(command_of "$2")"
    # --resolve goes before the tool's name: build-go-tool.sh [--resolve] NAME
    exec bash "${cmd[0]}" --resolve "${cmd[@]:1}"
    ;;
  _loop) shift; loop "$@" ;;
  *) die "usage: go-builds.sh start|wait|run [NAME...] | stop | list | resolve NAME" ;;
esac
