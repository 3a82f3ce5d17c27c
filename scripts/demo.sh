#!/usr/bin/env bash
# `make demo`: the main job. An emulator and 3 systemd container "hosts" on one docker network,
# the collection (built, and installed from its tarball) rolls out a pool of 6 agents over them
# with its rollout playbook (2 per host), then 12 jobs and one real Pulumi deployment run, and
# tables show who ran what and the deployed stack's outputs. A real Prometheus
# (scripts/prometheus.sh, on loopback) scrapes the agents through the file_sd the rollout wrote,
# and the end compares the planned slots with what it saw. Everything stays up; `make demo-down`
# removes it. A second `make demo` changes nothing (changed=0). Only the images it runs are built;
# Galaxy's importer and the execution environment are `make galaxy`'s, not the demo's.
#
# The deployment: the Pulumi CLI and its YAML language host, built from their Go modules
# (scripts/build-go-tool.sh: about 6 minutes cold on 2 cores, cached after) in the background
# from the start (`make demo` starts them even before its bootstrap: `demo.sh build`), are
# copied onto the hosts (the agents run jobs as host processes); the hosts' image adds git to
# the Molecule host image; a git server on this machine, on the demo network's gateway, serves
# the programs (scripts/demo_jobs.py).
set -euo pipefail
SELF=$(cd "$(dirname "$0")" && pwd)/demo.sh
cd "$(dirname "$0")/.."
. scripts/lib.sh
DEMO=$STATE/demo
# Container names: wfa-demo-* for the default STATE, <state name>-demo-* otherwise, so two
# people's demos on one machine do not collide.
if [ "$STATE" = /var/tmp/workflow-agent-dev ]; then P=wfa-demo; else P=$(basename "$STATE")-demo; fi
NET=$P
EMU=$P-emulator
HOSTS=("$P-1" "$P-2" "$P-3")
HOST_IMAGE=local/workflow-demo-host:latest
HOST_BASE=local/debian12-systemd:latest
HOST_DIR=tests/images/demo-host
# Pipelining: fewer round trips per task; profile_tasks: a clock on every task as it runs.
export ANSIBLE_PIPELINING=1 ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks
# Each step with the demo's clock, so that a slow step shows where it is.
step() { printf '\n\033[1m==> [%ss] %s\033[0m\n' "$(( $(date +%s) - ${t0:-$(date +%s)} ))" "$*"; }

down() {
  step "Removing the demo containers and network"
  bash scripts/prometheus.sh stop "$DEMO/prometheus" 2>/dev/null || true
  docker rm -f "${HOSTS[@]}" "$EMU" >/dev/null 2>&1 || true
  docker network rm "$NET" >/dev/null 2>&1 || true
  rm -rf "$DEMO"
  echo "demo removed"
}

# The Pulumi CLI and its YAML language host, in the background; each binary's path on stdout.
# Not niced: when cold, the demo waits for them. A build already running (`demo.sh build`'s, make
# test's) holds build-go-tool.sh's lock: this one waits for it, then reuses what it built.
pulumi_build() { # log file
  (export WFA_GO_NICE=0
   bash scripts/build-go-tool.sh pulumi && bash scripts/build-go-tool.sh pulumi-language-yaml) 2>"$1"
}

# The images the demo runs, and nothing else (no job, agent or execution-environment image: the
# agents run jobs as host processes): the hosts' (below) on the bookworm Molecule host image, the
# emulator's on the plain one. Each is reused while its inputs are unchanged.
images() {
  bash scripts/images.sh bookworm
  bash tests/emulator/build-image.sh
  host_image
  bash scripts/prometheus.sh install
}

# The collection as a user installs a release: built into a tarball and installed from it, with
# its dependencies (community.docker, kubernetes.core) from the venv's ansible bundle (--offline:
# no Galaxy). Galaxy's importer, a Galaxy server and the execution environment are `make galaxy`'s.
collection() { # log file
  rm -rf "$DEMO/dist"; mkdir -p "$DEMO/dist"
  ansible-galaxy collection build --force --output-path "$DEMO/dist" . >"$1" 2>&1 &&
    ansible-galaxy collection install --offline --force -p "$ANSIBLE_COLLECTIONS_PATH" \
      "$DEMO"/dist/selfhosted-workflow_agent-*.tar.gz >>"$1" 2>&1
}

# The hosts' image: the Molecule host plus git, rebuilt only when its inputs change (the hash
# label of scripts/lib.sh).
host_image() {
  local base_id hash old
  base_id=$(image_id "$HOST_BASE")
  [ -n "$base_id" ] || { echo "$HOST_BASE is missing: run scripts/images.sh (make bootstrap)"; exit 1; }
  hash=$(printf '%s\n' "$base_id" "$(sha256sum <"$HOST_DIR/Containerfile")" | sha256sum | cut -c1-16)
  if [ "$(image_hash "$HOST_IMAGE")" = "$hash" ]; then return 0; fi
  echo "building $HOST_IMAGE ($HOST_BASE with git; once)"
  old=$(image_id "$HOST_IMAGE")
  $DOCKER build -q --build-arg "BASE_IMAGE=$HOST_BASE" --label "$HASH_LABEL=$hash" -t "$HOST_IMAGE" \
    -f "$HOST_DIR/Containerfile" "$HOST_DIR" >/dev/null
  drop_replaced "$old"
}

# The Pulumi binaries onto every host, where the jobs' PATH finds them (/usr/local/bin); skipped
# on a host that already has these builds (their cache paths name version and inputs).
install_pulumi() { # binary paths
  local h want pid pids=()
  want=$(printf '%s\n' "$@")
  for h in "${HOSTS[@]}"; do
    [ "$($DOCKER exec "$h" cat /usr/local/lib/workflow-demo/pulumi-builds 2>/dev/null)" != "$want" ] || continue
    ( # the hosts at once: 150 MB each
      set -e
      for b in "$@"; do $DOCKER cp "$b" "$h:/usr/local/bin/$(basename "$b")"; done
      $DOCKER exec -i "$h" sh -c 'mkdir -p /usr/local/lib/workflow-demo && cat >/usr/local/lib/workflow-demo/pulumi-builds' <<<"$want"
    ) &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "copying the Pulumi binaries onto a host failed"; exit 1; }; done
  for h in "${HOSTS[@]}"; do
    # shellcheck disable=SC2016 # expanded on the host
    $DOCKER exec "$h" sh -c 'echo "$(hostname): pulumi $(pulumi version) and pulumi-language-yaml in /usr/local/bin, $(git --version)"'
  done
}

up() {
  t0=$(date +%s)
  mkdir -p "$DEMO"; chmod 700 "$DEMO"
  # First, so that a cold build (minutes) overlaps everything before the deployment needs it.
  step "Building the Pulumi CLI and its YAML language host in the background (cached after the first time)"
  pulumi_build "$DEMO/pulumi-build.log" >"$DEMO/pulumi-bins" &
  build_pid=$!
  echo "log: $DEMO/pulumi-build.log"

  step "Building the collection and installing it from its tarball, beside the next steps"
  export ANSIBLE_COLLECTIONS_PATH=$DEMO/collections
  collection "$DEMO/collection.log" &
  collection_pid=$!
  echo "into $ANSIBLE_COLLECTIONS_PATH (log: $DEMO/collection.log)"

  step "Building the images the demo runs (each reused while its inputs are unchanged)"
  images

  step "Starting the service emulator"
  [ -s "$DEMO/pool-token" ] || (umask 077; printf 'pul-%s' "$(openssl rand -hex 20)" >"$DEMO/pool-token")
  [ -s "$DEMO/admin-token" ] || (umask 077; openssl rand -hex 20 >"$DEMO/admin-token")
  docker network inspect "$NET" >/dev/null 2>&1 || docker network create "$NET" >/dev/null
  if ! docker container inspect "$EMU" >/dev/null 2>&1; then
    # Tokens reach the container through an env file, never argv.
    (umask 077; printf 'EMULATOR_SEED_TOKEN=%s\nEMULATOR_ADMIN_TOKEN=%s\n' \
      "$(cat "$DEMO/pool-token")" "$(cat "$DEMO/admin-token")" >"$DEMO/emulator.env")
    docker run -d --name "$EMU" --network "$NET" --env-file "$DEMO/emulator.env" local/workflow-emulator:latest >/dev/null
  fi
  EMU_URL="http://$(docker inspect -f "{{(index .NetworkSettings.Networks \"$NET\").IPAddress}}" "$EMU"):8080"
  for _ in $(seq 1 100); do curl -fsS "$EMU_URL/metrics" >/dev/null 2>&1 && break; sleep 0.3; done
  curl -fsS "$EMU_URL/metrics" >/dev/null || { echo "the emulator does not answer; docker logs $EMU:"; docker logs "$EMU" | tail; exit 1; }
  echo "emulator at $EMU_URL (inside the network: http://$EMU:8080)"

  step "Starting 3 systemd container hosts"
  for h in "${HOSTS[@]}"; do
    # A host of an older image (an earlier demo's) lacks what the deployment needs: replaced.
    if [ -n "$($DOCKER container inspect -f '{{.Image}}' "$h" 2>/dev/null)" ] &&
       [ "$($DOCKER container inspect -f '{{.Image}}' "$h")" != "$(image_id "$HOST_IMAGE")" ]; then
      echo "$h: replacing it (not of today's $HOST_IMAGE)"
      $DOCKER rm -f "$h" >/dev/null
    fi
    docker container inspect "$h" >/dev/null 2>&1 || docker run -d --name "$h" --hostname "$h" --network "$NET" \
      --cap-add SYS_ADMIN --security-opt seccomp=unconfined --cgroupns=host \
      -v /sys/fs/cgroup:/sys/fs/cgroup:rw --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
      "$HOST_IMAGE" /sbin/init >/dev/null
  done
  for h in "${HOSTS[@]}"; do
    docker exec "$h" systemctl is-system-running --wait >/dev/null 2>&1 || true
    echo "$h: $(docker exec "$h" systemctl is-system-running)"
  done

  step "Rolling out a pool of 6 over 3 hosts in two batches, 1 then 2 (selfhosted.workflow_agent.rollout)"
  if ! wait "$collection_pid"; then
    tail -n 20 "$DEMO/collection.log"
    echo "building or installing the collection failed (log: $DEMO/collection.log)"; exit 1
  fi
  echo "installed $(basename "$DEMO"/dist/selfhosted-workflow_agent-*.tar.gz) at $ANSIBLE_COLLECTIONS_PATH"
  # Prometheus runs on this machine: it reaches the agents at their container addresses.
  cat >"$DEMO/inventory.yml" <<INV
workflow_agents:
  hosts:
$(for h in "${HOSTS[@]}"; do
    echo "    $h:"
    echo "      workflow_agent_prometheus_address: $(docker inspect -f "{{(index .NetworkSettings.Networks \"$NET\").IPAddress}}" "$h")"
  done)
  vars:
    ansible_connection: community.docker.docker
    ansible_python_interpreter: /usr/bin/python3
    workflow_agent_pool_target: 6
    workflow_agent_service_url: http://$EMU:8080
    workflow_agent_token: "{{ lookup('ansible.builtin.file', '$DEMO/pool-token') }}"
    workflow_agent_deploy_target: process
    workflow_agent_polling_interval: 2s
    workflow_agent_job_status_loop_interval: 5s
    workflow_agent_pool_name: default
    workflow_agent_prometheus_file_sd: $DEMO/file_sd.json
INV
  # Two batches: one host first (a canary: the rollout goes on only once its agents are healthy),
  # then the other two at once. The default (25%: one host a batch) waits for each host in turn.
  ansible-playbook -i "$DEMO/inventory.yml" -e '{"workflow_agent_serial": [1, 2]}' \
    selfhosted.workflow_agent.rollout 2>&1 | tee "$DEMO/rollout.log"
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "the rollout failed (log: $DEMO/rollout.log)"; exit 1; }
  changed=$(awk '/PLAY RECAP/{r=1; next} r && /changed=/{split($0, a, "changed="); split(a[2], b, " "); s+=b[1]} END{print s+0}' "$DEMO/rollout.log")
  if [ "$changed" = 0 ]; then echo "rollout: changed=0 on every host (nothing to do: idempotent)";
  else echo "rollout: $changed change(s) (a second 'make demo' reports changed=0)"; fi

  step "Starting Prometheus: it scrapes the agents the rollout listed in $DEMO/file_sd.json"
  PROM=$(bash scripts/prometheus.sh start "$DEMO/prometheus" "$DEMO/file_sd.json")
  up=0
  for _ in $(seq 1 60); do
    up=$(curl -fsS "$PROM/api/v1/query" --data-urlencode 'query=count(up{job="workflow_agent"} == 1)' |
      python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)')
    [ "$up" = 6 ] && break
    sleep 1
  done
  echo "prometheus at $PROM: $up of 6 planned instances up"
  [ "$up" = 6 ] || { echo "Prometheus does not see the 6 agents (log: $DEMO/prometheus/prometheus.log)"; exit 1; }

  step "Installing the Pulumi CLI and its YAML language host on the hosts"
  waited=$(date +%s)
  if kill -0 "$build_pid" 2>/dev/null; then
    echo "waiting for the Pulumi build (cold: about 6 minutes on an idle 2-core machine; logs: $DEMO/pulumi-*.log)"
  fi
  if ! wait "$build_pid"; then
    tail -n 20 "$DEMO/pulumi-build.log"
    echo "the Pulumi build failed (log: $DEMO/pulumi-build.log)"
    exit 1
  fi
  waited=$(( $(date +%s) - waited ))
  [ "$waited" -lt 2 ] || echo "the Pulumi build was ready $waited s later"
  mapfile -t pulumi_bins <"$DEMO/pulumi-bins"
  install_pulumi "${pulumi_bins[@]}"

  step "Enqueueing 12 jobs and a Pulumi deployment (pulumi up of the 'base' program)"
  # The git server listens on the demo network's gateway: this machine, as the hosts reach it.
  gateway=$($DOCKER network inspect -f '{{range .IPAM.Config}}{{.Gateway}}{{end}}' "$NET")
  if [ -z "$gateway" ]; then # an engine may leave it out: the subnet's first address
    gateway=$(python3 -c 'import ipaddress, sys; print(ipaddress.ip_network(sys.argv[1])[1])' \
      "$($DOCKER network inspect -f '{{range .IPAM.Config}}{{.Subnet}}{{end}}' "$NET")")
  fi
  [ -s "$DEMO/pulumi-passphrase" ] || (umask 077; openssl rand -hex 16 >"$DEMO/pulumi-passphrase")
  WFA_PULUMI_BIN_DIR=$(dirname "${pulumi_bins[0]}"):$(dirname "${pulumi_bins[1]}") \
    python3 scripts/demo_jobs.py --url "$EMU_URL" --admin-token-file "$DEMO/admin-token" --jobs 12 --agents 6 \
    --prometheus "$PROM" --planned-slots 6 \
    --deploy --git-host "$gateway" --passphrase-file "$DEMO/pulumi-passphrase"

  echo
  echo "Prometheus UI: $PROM (targets: $PROM/targets, alerts: $PROM/alerts), on this machine's loopback."
  echo "Done in $(( $(date +%s) - t0 ))s. Everything is still running. Tear it down with:  make demo-down"
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  # The Pulumi build alone, detached: `make demo` starts it before its bootstrap, and `up` then
  # waits for it through the build's lock.
  build)
    mkdir -p "$DEMO"; chmod 700 "$DEMO"
    setsid bash "$SELF" _build >/dev/null 2>&1 </dev/null &
    ;;
  _build) pulumi_build "$DEMO/pulumi-prebuild.log" >/dev/null ;;
  *) echo "usage: demo.sh up|down|build" >&2; exit 2 ;;
esac
