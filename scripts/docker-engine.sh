#!/usr/bin/env bash
# Make a Docker engine available. Uses an existing engine when `docker info` works;
# otherwise, on Debian as root, installs Debian's docker.io and starts dockerd by hand
# (these machines have no systemd as PID 1, so `systemctl start docker` cannot work).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mkdir -p "$STATE"

engine_ok() { docker info >/dev/null 2>&1; }

if engine_ok; then
  echo "docker-engine: using the running engine"
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
if [ ${#need[@]} -gt 0 ]; then
  echo "docker-engine: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
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
