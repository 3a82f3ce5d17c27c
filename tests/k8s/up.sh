#!/usr/bin/env bash
# Bring up a single-node Kubernetes cluster built from pinned Go modules (`make k8s-up`):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a private containerd (own
# socket and state, dockerd's is left alone), kubelet and kube-proxy, with Debian's runc and
# CNI plugins. Writes $STATE/k8s/kubeconfig (symlinked at /var/tmp/workflow-agent-k8s/kubeconfig),
# waits for the node to be Ready and imports the local images. Idempotent: a healthy cluster of
# this STATE is reused. On failure it prints the logs and removes what it started.
# The pieces: lib.sh (settings), build.sh (binaries), pki.sh (certificates, kubeconfigs),
# network.sh (bridge, forwarding), config.sh (the daemons' config files), import-image.sh; this
# file orders them and starts and waits for the daemons.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

WAIT=${WFA_K8S_WAIT:-300} # seconds per readiness wait; generous for a loaded 2-core machine
IMAGES=${WFA_K8S_IMAGES:-local/workflow-agent:latest local/workflow-emulator:latest local/workflow-job:latest}

[ "$(id -u)" = 0 ] || die "must run as root (it starts containerd and the kubelet)"
lock_cluster

# --- one cluster per machine -------------------------------------------------------------
mkdir -p "$STABLE_DIR"
owner=$(cat "$STABLE_DIR/owner" 2>/dev/null || true)
if [ -n "$owner" ] && [ "$owner" != "$K8S_DIR" ] && [ -d "$owner/run" ]; then
  die "a cluster of another STATE runs from $owner; use $STABLE_DIR/kubeconfig, or remove it" \
    "with: make STATE=$(dirname "$owner") k8s-down"
fi

# --- prerequisites ---------------------------------------------------------------------------
need_pkgs=""
[ -x /usr/lib/cni/bridge ] || need_pkgs="$need_pkgs containernetworking-plugins"
command -v containerd >/dev/null || need_pkgs="$need_pkgs containerd"
command -v runc >/dev/null || need_pkgs="$need_pkgs runc"
command -v iptables >/dev/null || need_pkgs="$need_pkgs iptables"
if [ -n "$need_pkgs" ]; then
  log "installing$need_pkgs"
  apt-get update -qq
  # shellcheck disable=SC2086  # a list of package names
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need_pkgs >/dev/null
fi
"$DOCKER" info >/dev/null 2>&1 || die "the Docker engine does not answer (run: bash scripts/docker-engine.sh)"

BIN=$(bash "$K8S_SRC/build.sh")
KUBE=$BIN/kube

import_images() { # images...
  local img
  for img in "$@"; do
    if "$DOCKER" image inspect "$img" >/dev/null 2>&1; then
      bash "$K8S_SRC/import-image.sh" "$img"
    else
      log "image $img not in Docker yet: not imported (later: tests/k8s/import-image.sh $img)"
    fi
  done
}

node_ready() {
  [ "$(kubectl get node "$NODE_NAME" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

finish() {
  ln -sfn "$BIN/kubectl" "$K8S_DIR/kubectl"
  ln -sfn "$K8S_DIR/kubeconfig" "$STABLE_DIR/kubeconfig"
  ln -sfn "$BIN/kubectl" "$STABLE_DIR/kubectl"
  echo "$K8S_DIR" >"$STABLE_DIR/owner"
  log "node $NODE_NAME Ready; Kubernetes $KUBE_VERSION; node IP (pods -> host) $NODE_IP"
  log "kubectl: $STABLE_DIR/kubectl (also $K8S_DIR/kubectl)"
  echo "KUBECONFIG=$K8S_DIR/kubeconfig"
}

# --- reuse a healthy cluster ---------------------------------------------------------------
all_running() {
  local c
  for c in $COMPONENTS; do running "$c" || return 1; done
}
# A config change (config.sh) reaches a running cluster's containerd by a restart: its containers
# live on in their shims and the kubelet reconnects. The other daemons keep what they started with.
restart_containerd_on_new_config() {
  local conf=$K8S_DIR/containerd/config.toml before pid
  before=$(sha256sum <"$conf")
  bash "$K8S_SRC/config.sh"
  [ "$(sha256sum <"$conf")" != "$before" ] || return 0
  log "containerd's config changed: restarting containerd (pods keep running)"
  pid=$(pid_of containerd)
  kill "$pid"
  while [ -d "/proc/$pid" ]; do sleep 0.2; done
  setsid containerd --config "$conf" >>"$K8S_DIR/logs/containerd.log" 2>&1 </dev/null 8>&- &
  echo $! >"$K8S_DIR/run/containerd.pid"
  local deadline=$(($(date +%s) + WAIT))
  until ctr --address "$CONTAINERD_SOCK" version >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || die "containerd did not come back after ${WAIT}s; log: $K8S_DIR/logs/containerd.log"
    sleep 0.5
  done
  settle_node || die "node $NODE_NAME not Ready a minute after the containerd restart; logs: $K8S_DIR/logs"
}
# Running daemons with a NotReady node are a cluster in a moment of change (a containerd restart
# by this script a moment ago, a kubelet catching up), not a broken one: wait a minute for it.
settle_node() {
  local deadline=$(($(date +%s) + 60))
  until node_ready; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 1
  done
}
if [ -d "$K8S_DIR/run" ]; then
  if all_running && settle_node; then
    log "cluster already up"
    restart_containerd_on_new_config
    # shellcheck disable=SC2086  # a list of image names
    import_images $IMAGES
    finish
    exit 0
  fi
  stopped=$(for c in $COMPONENTS; do running "$c" || printf ' %s' "$c"; done)
  log "a stale or partial cluster is in $K8S_DIR (not running:${stopped:- none, but the node is" \
    "not Ready}): removing it first"
  bash "$K8S_SRC/down.sh"
fi

for port in $CLUSTER_PORTS; do
  if ss -Htln "( sport = :$port )" | grep -q .; then
    die "TCP port $port is already in use (the cluster needs: $CLUSTER_PORTS)"
  fi
done

on_error() {
  local c
  trap - ERR
  for c in $COMPONENTS; do
    [ -s "$K8S_DIR/logs/$c.log" ] || continue
    echo "----- $c.log (last 25 lines) -----" >&2
    tail -n 25 "$K8S_DIR/logs/$c.log" >&2
  done
  if [ "${WFA_K8S_KEEP_ON_FAILURE:-0}" = 1 ]; then
    log "bring-up FAILED; left as is for inspection in $K8S_DIR (remove with down.sh)"
  else
    log "bring-up FAILED; removing what was started (WFA_K8S_KEEP_ON_FAILURE=1 keeps it)"
    bash "$K8S_SRC/down.sh" >&2 || true
  fi
  exit 1
}
trap on_error ERR

start=$(date +%s)
umask 022
mkdir -p "$K8S_DIR"/{run,logs,pki,etcd,kubelet,containerd,cni/net.d,cni/ipam,pod-logs}
chmod 700 "$K8S_DIR/etcd" "$K8S_DIR/pki"
echo "$K8S_DIR" >"$STABLE_DIR/owner"

wait_for() { # description, command...
  local what=$1 deadline=$(($(date +%s) + WAIT))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || {
      log "timed out after ${WAIT}s waiting for $what"
      return 1
    }
    sleep 1
  done
}

start_daemon() { # name, command...
  local name=$1
  shift
  # setsid: the daemons outlive this script (and make); not a process group leader, so
  # setsid execs in place and $! is the daemon's pid.
  setsid "$@" >"$K8S_DIR/logs/$name.log" 2>&1 </dev/null 8>&- &
  echo $! >"$K8S_DIR/run/$name.pid"
}

# --- certificates and kubeconfigs, the bridge, the daemons' config files ----------------------
bash "$K8S_SRC/pki.sh"
bash "$K8S_SRC/network.sh"
bash "$K8S_SRC/config.sh"

# --- etcd and the control plane ------------------------------------------------------------------
start_daemon etcd "$KUBE" etcd --name wfa-k8s --data-dir "$K8S_DIR/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster wfa-k8s=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn
etcd_healthy() { # plain bash: curl may not be installed
  exec 3<>/dev/tcp/127.0.0.1/2379 || return 1
  printf 'GET /health HTTP/1.0\r\n\r\n' >&3
  grep -q '"health":"true"' <&3
  local rc=$?
  exec 3>&-
  return $rc
}
wait_for etcd etcd_healthy

start_daemon kube-apiserver "$KUBE" kube-apiserver \
  --etcd-servers http://127.0.0.1:2379 --bind-address 0.0.0.0 --secure-port "$APISERVER_PORT" \
  --advertise-address "$NODE_IP" --service-cluster-ip-range "$SERVICE_CIDR" \
  --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --allow-privileged=true --profiling=false
wait_for kube-apiserver kubectl get --raw /readyz

start_daemon kube-controller-manager "$KUBE" kube-controller-manager \
  --kubeconfig "$K8S_DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$K8S_DIR/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$K8S_DIR/controller-manager.kubeconfig" \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --use-service-account-credentials=true --leader-elect=false --bind-address 127.0.0.1 \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --service-cluster-ip-range "$SERVICE_CIDR" --profiling=false
start_daemon kube-scheduler "$KUBE" kube-scheduler \
  --kubeconfig "$K8S_DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig "$K8S_DIR/scheduler.kubeconfig" \
  --authorization-kubeconfig "$K8S_DIR/scheduler.kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --profiling=false

# --- containerd (private instance), CNI and the pause image ----------------------------------------
start_daemon containerd containerd --config "$K8S_DIR/containerd/config.toml"
wait_for containerd ctr --address "$CONTAINERD_SOCK" version

if [ "$("$DOCKER" image inspect -f '{{ index .Config.Labels "wfa-k8s.pause" }}' "$PAUSE_IMAGE" 2>/dev/null)" != "$BIN" ]; then
  ctx=$(mktemp -d)
  cp "$BIN/pause" "$ctx/pause"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
  "$DOCKER" build -q --label "wfa-k8s.pause=$BIN" -t "$PAUSE_IMAGE" -f "$ctx/Containerfile" "$ctx" >/dev/null
  rm -rf "$ctx"
fi
import_images "$PAUSE_IMAGE"

# --- kubelet and kube-proxy ---------------------------------------------------------------------
for s in $KUBELET_SYSCTLS; do
  echo "$s=$(sysctl -n "$s")"
done >"$K8S_DIR/sysctl.saved"
start_daemon kubelet "$KUBE" kubelet --config "$K8S_DIR/kubelet/config.yaml" \
  --kubeconfig "$K8S_DIR/kubelet-client.kubeconfig" --root-dir "$K8S_DIR/kubelet/root" \
  --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"

start_daemon kube-proxy "$KUBE" kube-proxy --config "$K8S_DIR/kube-proxy.yaml"

# While the node registers: the project's images (seconds each).
# shellcheck disable=SC2086  # a list of image names
import_images $IMAGES

wait_for "node $NODE_NAME Ready" node_ready
# Pods cannot be created before their namespace's default ServiceAccount exists.
wait_for "the default ServiceAccount" kubectl -n default get serviceaccount default
trap - ERR
log "up in $(($(date +%s) - start)) s"
finish
