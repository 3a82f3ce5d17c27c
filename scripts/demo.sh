#!/usr/bin/env bash
# `make demo`: the main job. An emulator and 3 systemd container "hosts" on one docker network,
# the collection's rollout playbook with a pool target of 6 (2 agents per host), 12 jobs, and a
# summary of who ran what. Everything stays up; `make demo-down` removes it.
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=${WORKFLOW_AGENT_STATE:-/var/tmp/workflow-agent-dev}
DEMO=$STATE/demo
NET=wfa-demo
EMU=wfa-demo-emulator
HOSTS=(wfa-demo-1 wfa-demo-2 wfa-demo-3)
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

down() {
  step "Removing the demo containers and network"
  docker rm -f "${HOSTS[@]}" "$EMU" >/dev/null 2>&1 || true
  docker network rm "$NET" >/dev/null 2>&1 || true
  rm -rf "$DEMO"
  echo "demo removed"
}

up() {
  mkdir -p "$DEMO"; chmod 700 "$DEMO"
  step "Building the collection and installing it from its tarball"
  bash scripts/galaxy.sh >"$DEMO/galaxy.log" 2>&1 || { tail -n 30 "$DEMO/galaxy.log"; exit 1; }
  export ANSIBLE_COLLECTIONS_PATH=$STATE/collections
  echo "installed at $ANSIBLE_COLLECTIONS_PATH"

  step "Starting the service emulator"
  [ -s "$DEMO/pool-token" ] || { umask 077; printf 'pul-%s' "$(openssl rand -hex 20)" >"$DEMO/pool-token"; }
  [ -s "$DEMO/admin-token" ] || { umask 077; openssl rand -hex 20 >"$DEMO/admin-token"; }
  docker network inspect "$NET" >/dev/null 2>&1 || docker network create "$NET" >/dev/null
  if ! docker container inspect "$EMU" >/dev/null 2>&1; then
    # Tokens reach the container through an env file, never argv.
    printf 'EMULATOR_SEED_TOKEN=%s\nEMULATOR_ADMIN_TOKEN=%s\n' "$(cat "$DEMO/pool-token")" "$(cat "$DEMO/admin-token")" >"$DEMO/emulator.env"
    docker run -d --name "$EMU" --network "$NET" --env-file "$DEMO/emulator.env" local/workflow-emulator:latest >/dev/null
  fi
  EMU_URL="http://$(docker inspect -f "{{(index .NetworkSettings.Networks \"$NET\").IPAddress}}" "$EMU"):8080"
  for _ in $(seq 1 50); do curl -fsS "$EMU_URL/metrics" >/dev/null 2>&1 && break; sleep 0.2; done
  echo "emulator at $EMU_URL (inside the network: http://$EMU:8080)"

  step "Starting 3 systemd container hosts"
  for h in "${HOSTS[@]}"; do
    docker container inspect "$h" >/dev/null 2>&1 || docker run -d --name "$h" --hostname "$h" --network "$NET" \
      --cap-add SYS_ADMIN --security-opt seccomp=unconfined --cgroupns=host \
      -v /sys/fs/cgroup:/sys/fs/cgroup:rw --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
      local/debian12-systemd:latest /sbin/init >/dev/null
  done
  for h in "${HOSTS[@]}"; do docker exec "$h" systemctl is-system-running --wait >/dev/null 2>&1 || true; echo "$h: $(docker exec "$h" systemctl is-system-running)"; done

  step "Rolling out a pool of 6 over 3 hosts (selfhosted.workflow_agent.rollout)"
  cat >"$DEMO/inventory.yml" <<INV
workflow_agents:
  hosts:
$(for h in "${HOSTS[@]}"; do echo "    $h:"; done)
  vars:
    ansible_connection: community.docker.docker
    workflow_agent_pool_target: 6
    workflow_agent_service_url: http://$EMU:8080
    workflow_agent_token: "{{ lookup('ansible.builtin.file', '$DEMO/pool-token') }}"
    workflow_agent_deploy_target: process
    workflow_agent_polling_interval: 2s
    workflow_agent_job_status_loop_interval: 5s
INV
  ansible-playbook -i "$DEMO/inventory.yml" selfhosted.workflow_agent.rollout | tee "$DEMO/rollout.log"

  step "Enqueueing 12 jobs"
  python3 scripts/demo_jobs.py --url "$EMU_URL" --admin-token-file "$DEMO/admin-token" --jobs 12

  echo
  echo "Everything is still running. Tear it down with:  make demo-down"
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  *) echo "usage: demo.sh up|down" >&2; exit 2 ;;
esac
