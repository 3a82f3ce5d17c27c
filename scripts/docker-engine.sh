#!/usr/bin/env bash
# Make a Docker engine available. Uses an existing engine when `docker info` works;
# otherwise, on Debian as root, installs Debian's docker.io and starts dockerd by hand
# (these machines have no systemd as PID 1, so `systemctl start docker` cannot work).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mkdir -p "$STATE"

engine_ok() { docker info >/dev/null 2>&1; }

# A kernel whose capability bounding set lacks CAP_SYS_RESOURCE (bit 24) makes Docker 20.10 fail
# every --privileged container (kind's nodes): dockerd then runs containers through
# scripts/runc-capfilter, installed outside the checkout (the daemon outlives it). dockerd reads
# `runtimes` and `default-runtime` from daemon.json at start and again on SIGHUP.
CAPFILTER=/usr/local/libexec/workflow-agent/runc-capfilter
needs_capfilter() {
  local bnd
  bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  [ -n "$bnd" ] && [ $(((16#$bnd >> 24) & 1)) = 0 ]
}
install_capfilter() { # -> 0 when daemon.json changed
  local conf=/etc/docker/daemon.json want
  install -D -m 0755 "$(dirname "$0")/runc-capfilter" "$CAPFILTER"
  want=$(jq --arg p "$CAPFILTER" '.runtimes.capfilter = {path: $p} | ."default-runtime" = "capfilter"'     "$conf" 2>/dev/null || jq -n --arg p "$CAPFILTER" '{runtimes: {capfilter: {path: $p}}, "default-runtime": "capfilter"}')
  [ "$want" != "$(cat "$conf" 2>/dev/null)" ] || return 1
  mkdir -p /etc/docker
  echo "$want" >"$conf"
}
capfilter_active() { docker info -f '{{.DefaultRuntime}}' 2>/dev/null | grep -qx capfilter; }

if engine_ok; then
  echo "docker-engine: using the running engine"
  if needs_capfilter && [ "$(id -u)" = 0 ] && ! capfilter_active; then
    command -v jq >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null; }
    install_capfilter || true
    pid=$(cat "$STATE/dockerd.pid" 2>/dev/null || pgrep -xo dockerd || true)
    if [ -n "$pid" ]; then kill -HUP "$pid" 2>/dev/null || true; fi
    for _ in $(seq 1 20); do capfilter_active && break; sleep 0.5; done
    capfilter_active && echo "docker-engine: --privileged containers through $CAPFILTER (no CAP_SYS_RESOURCE here)" ||
      echo "docker-engine: WARNING: the running engine did not take $CAPFILTER; --privileged containers (kind) will fail here" >&2
  fi
  exit 0
fi

if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
  echo "docker-engine: no running Docker engine, and this is not Debian with root; start one and retry" >&2
  exit 1
fi

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v jq >/dev/null 2>&1 || need+=(jq)
if [ ${#need[@]} -gt 0 ]; then
  echo "docker-engine: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if needs_capfilter; then
  install_capfilter || true
  echo "docker-engine: --privileged containers through $CAPFILTER (no CAP_SYS_RESOURCE here)"
fi
echo "docker-engine: starting dockerd (log: $STATE/dockerd.log)"
# setsid: the daemon must outlive the make or CI step that started it. It keeps none of the
# caller's other descriptors either: a daemon holding a `flock` lock or a CI log pipe holds it
# for as long as it runs.
(
  for fd in "/proc/$BASHPID/fd"/*; do
    fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"
  done
  exec setsid nohup /usr/sbin/dockerd >"$STATE/dockerd.log" 2>&1 </dev/null
) &
echo $! >"$STATE/dockerd.pid"
for _ in $(seq 1 120); do
  engine_ok && { echo "docker-engine: ready"; exit 0; }
  sleep 0.5
done
echo "docker-engine: dockerd did not become ready; last log lines:" >&2
tail -n 20 "$STATE/dockerd.log" >&2
exit 1
