#!/usr/bin/env bash
# The suite's OCI registry: the CNCF distribution registry (built by scripts/build-go-tool.sh
# registry), plain HTTP on $REGISTRY_ADDR (lib.sh), storage in $STATE/registry, log in
# $STATE/logs/registry.log. The host's Docker pushes there and the test cluster's containerd
# pulls from there (config.sh), so the cluster's pods take images the way a user's would.
#   tests/k8s/registry.sh start    start it, or reuse a healthy one; prints its address
#   tests/k8s/registry.sh stop     stop it (the stored images and charts stay)
#   tests/k8s/registry.sh status   exit 0 when it answers /v2/
#   tests/k8s/registry.sh addr     print its address (host:port)
#   tests/k8s/registry.sh gc       free the blobs nothing refers to any more (tests delete what
#                                  they push, which only unlinks it); stops and restarts a running
#                                  registry, since garbage collection needs it idle
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

DIR=$STATE/registry
CONFIG=$DIR/config.yml
PIDFILE=$DIR/registry.pid
LOG=$STATE/logs/registry.log
WAIT=${WFA_REGISTRY_WAIT:-60}

say() { echo "registry: $*" >&2; }
fail() {
  echo "registry: ERROR: $*" >&2
  exit 1
}

# /v2/ answers 200 with the distribution API header: plain bash, curl may not be installed.
healthy() {
  local reply
  reply=$({
    exec 3<>"/dev/tcp/${REGISTRY_ADDR%:*}/${REGISTRY_ADDR##*:}" || exit 1
    printf 'GET /v2/ HTTP/1.0\r\nHost: %s\r\n\r\n' "$REGISTRY_ADDR" >&3
    timeout 5 cat <&3
  } 2>/dev/null) || return 1
  grep -q '^HTTP/1\.[01] 200' <<<"$reply" &&
    grep -qi '^Docker-Distribution-Api-Version: registry/2.0' <<<"$reply"
}

# The registry process serving this STATE's config, if any.
serving() {
  pgrep -f -- "registry serve $CONFIG\$" | head -n1
}

# The pid file names a live registry started with this STATE's config.
ours() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$CONFIG"
}

start() {
  if ours && healthy; then
    say "already up at $REGISTRY_ADDR"
    echo "$REGISTRY_ADDR"
    return 0
  fi
  ours && stop
  if ss -Htln "( sport = :${REGISTRY_ADDR##*:} )" | grep -q .; then
    fail "TCP port ${REGISTRY_ADDR##*:} is taken by another process (not this STATE's registry):" \
      "$(ss -Htlnp "( sport = :${REGISTRY_ADDR##*:} )" | head -n1)"
  fi
  local bin
  bin=$(bash "$K8S_SRC/../../scripts/build-go-tool.sh" registry)
  mkdir -p "$DIR/data" "$(dirname "$LOG")"
  cat >"$CONFIG" <<EOF
# Written by tests/k8s/registry.sh. Keys: configuration.md in github.com/distribution/distribution/v3.
version: 0.1
log:
  level: info
  formatter: text
  # Each request is logged once already ("response completed").
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/data
  # Tests delete what they pushed (DELETE on manifests).
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  # Loopback only: no TLS and no auth, so nothing off this machine may reach it.
  addr: $REGISTRY_ADDR
  headers:
    X-Content-Type-Options: [nosniff]
health:
  storagedriver:
    enabled: true
    interval: 10s
    threshold: 3
EOF
  # setsid, and none of the caller's other descriptors: the daemon outlives this script and must
  # not hold a flock or a CI log pipe. No OpenTelemetry exporter to try to reach.
  (
    for fd in "/proc/$BASHPID/fd"/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    OTEL_TRACES_EXPORTER=none exec setsid "$bin" serve "$CONFIG" >>"$LOG" 2>&1 </dev/null
  ) &
  # setsid forks when it starts as a process group leader (a caller with job control), and then
  # $! is gone at once: the pid file names whichever process serves this STATE's config.
  local deadline=$(($(date +%s) + WAIT)) pid
  until healthy; do
    pid=$(serving)
    if [ -z "$pid" ] && ! kill -0 $! 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
      echo "----- $LOG (last 25 lines) -----" >&2
      tail -n 25 "$LOG" >&2 || true
      [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
      fail "the registry did not answer http://$REGISTRY_ADDR/v2/ (log above: $LOG)"
    fi
    sleep 0.2
  done
  serving >"$PIDFILE"
  say "up at $REGISTRY_ADDR (storage $DIR/data, log $LOG)"
  echo "$REGISTRY_ADDR"
}

stop() {
  local pid
  if ! ours; then
    rm -f "$PIDFILE"
    say "not running"
    return 0
  fi
  pid=$(cat "$PIDFILE")
  kill "$pid"
  for _ in $(seq 1 50); do
    [ -d "/proc/$pid" ] || break
    sleep 0.2
  done
  [ ! -d "/proc/$pid" ] || kill -KILL "$pid"
  rm -f "$PIDFILE"
  say "stopped"
}

gc() {
  local was_up=0 bin
  [ -f "$CONFIG" ] || {
    say "nothing stored yet"
    return 0
  }
  if ours; then
    was_up=1
    stop
  fi
  bin=$(bash "$K8S_SRC/../../scripts/build-go-tool.sh" registry)
  local before after
  before=$(du -sm "$DIR/data" | cut -f1)
  OTEL_TRACES_EXPORTER=none "$bin" garbage-collect --delete-untagged "$CONFIG" >>"$LOG" 2>&1 ||
    fail "garbage-collect failed; log: $LOG"
  after=$(du -sm "$DIR/data" | cut -f1)
  say "garbage collected: ${before} MB -> ${after} MB"
  [ "$was_up" = 0 ] || start >/dev/null
}

case ${1:-} in
  gc) gc ;;
  start) start ;;
  stop) stop ;;
  status)
    if ours && healthy; then
      say "up at $REGISTRY_ADDR"
    else
      say "not answering at $REGISTRY_ADDR"
      exit 1
    fi
    ;;
  addr) echo "$REGISTRY_ADDR" ;;
  *)
    echo "usage: $0 start|stop|status|addr|gc" >&2
    exit 2
    ;;
esac
