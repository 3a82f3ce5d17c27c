#!/usr/bin/env bash
# A real Prometheus (Debian's `prometheus` package) for the demo and the suite, on loopback, with
# its state under a directory of the caller's choice. It scrapes the agents listed in a file_sd
# file (the one the rollout writes: workflow_agent_prometheus_file_sd) every 2s, as the job
# `workflow_agent`, or the jobs of a scrape config file; and loads the collection's rules
# (extensions/prometheus/rules.yml).
#
#   prometheus.sh install                  install promtool and prometheus (apt) if missing
#   prometheus.sh start DIR FILE_SD [PORT] start (PORT: default a free one); prints the URL,
#                                          also kept in DIR/url; a running one is reused
#   prometheus.sh start-scrape DIR FILE [PORT]
#                                          the same with the `scrape_configs:` of FILE (a YAML
#                                          file of only that key, like a `scrape_config_files`
#                                          entry) instead of the file_sd job
#   prometheus.sh stop DIR                 stop the one started with DIR
#
# PROMETHEUS=/path/to/prometheus starts another build (tests/k8s/build-prometheus.sh makes one
# with Kubernetes discovery, which Debian's lacks).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROMETHEUS=${PROMETHEUS:-prometheus}
usage() { echo "usage: prometheus.sh install | start DIR FILE_SD [PORT] | start-scrape DIR FILE [PORT] | stop DIR" >&2; exit 2; }

install() {
  command -v promtool >/dev/null && command -v prometheus >/dev/null && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "prometheus.sh: promtool/prometheus are missing; install Debian's 'prometheus' package (needs root and apt)" >&2
    exit 1
  fi
  echo "prometheus.sh: installing Debian's prometheus package (for promtool and prometheus)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The package's own service (port 9090, where its postinst may start it) is not used: start
  # below runs one per caller, on a port of its own.
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
}

running() { [ -s "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null; }

start() { # DIR, file_sd|scrape, FILE, [PORT]
  local dir=$1 kind=$2 file=$3 port=${4:-}
  [ -n "$dir" ] && [ -n "$file" ] || usage
  command -v "$PROMETHEUS" >/dev/null || { echo "prometheus.sh: $PROMETHEUS is not installed (prometheus.sh install)" >&2; exit 1; }
  case $file in /*) ;; *) file=$PWD/$file ;; esac
  [ "$kind" = file_sd ] || [ -f "$file" ] || { echo "prometheus.sh: no scrape config file $file" >&2; exit 2; }
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if running "$dir"; then cat "$dir/url"; return 0; fi
  [ -n "$port" ] || port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  {
    cat <<YML
# Written by scripts/prometheus.sh.
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - $ROOT/extensions/prometheus/rules.yml
YML
    if [ "$kind" = file_sd ]; then
      cat <<YML
scrape_configs:
  - job_name: workflow_agent
    file_sd_configs:
      - files: ['$file']
        refresh_interval: 2s
YML
    else
      # A YAML mapping of only `scrape_configs:` continues this one (Prometheus 2.42, Debian 12's,
      # has no scrape_config_files).
      grep -v '^---' "$file"
    fi
  } >"$dir/prometheus.yml"
  # Debian's promtool knows only Debian's discovery; another build checks its config as it starts.
  [ "$PROMETHEUS" != prometheus ] || promtool check config "$dir/prometheus.yml" >/dev/null
  # setsid: it must outlive the make step or test that started it; `stop` ends it.
  setsid nohup "$PROMETHEUS" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" --web.enable-lifecycle \
    >"$dir/prometheus.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  echo "http://127.0.0.1:$port" >"$dir/url"
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && { cat "$dir/url"; return 0; }
    running "$dir" || break
    sleep 0.2
  done
  echo "prometheus.sh: prometheus did not become ready; last log lines ($dir/prometheus.log):" >&2
  tail -n 20 "$dir/prometheus.log" >&2
  exit 1
}

stop() {
  local dir=${1:-}
  [ -n "$dir" ] || usage
  running "$dir" || { rm -f "$dir/pid"; return 0; }
  local pid; pid=$(cat "$dir/pid")
  kill "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$dir/pid"
}

case ${1:-} in
  install) install ;;
  start) shift; start "${1:-}" file_sd "${2:-}" "${3:-}" ;;
  start-scrape) shift; start "${1:-}" scrape "${2:-}" "${3:-}" ;;
  stop) shift; stop "${1:-}" ;;
  *) usage ;;
esac
