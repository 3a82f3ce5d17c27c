#!/usr/bin/env bash
# Bring up a single-node Kubernetes cluster built from pinned Go modules (`make k8s-up`):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a private containerd (own
# socket and state, dockerd's is left alone), kubelet and kube-proxy, with Debian's runc and
# CNI plugins. Writes $STATE/k8s/kubeconfig (symlinked at /var/tmp/workflow-agent-k8s/kubeconfig),
# waits for the node to be Ready and imports the local images. Idempotent: a healthy cluster of
# this STATE is reused. On failure it prints the logs and removes what it started.
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
if [ -d "$K8S_DIR/run" ]; then
  if all_running && node_ready; then
    log "cluster already up"
    # shellcheck disable=SC2086  # a list of image names
    import_images $IMAGES
    finish
    exit 0
  fi
  log "a stale or partial cluster is in $K8S_DIR: removing it first"
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

# --- certificates (EC P-256; fast) -------------------------------------------------------------
PKI=$K8S_DIR/pki
new_key() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
  chmod 600 "$1"
}
new_cert() { # name, subject, extendedKeyUsage, [subjectAltName]
  local n=$PKI/$1
  new_key "$n.key"
  openssl req -new -key "$n.key" -subj "$2" -out "$n.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$3"
    [ -z "${4:-}" ] || echo "subjectAltName=$4"
  } >"$n.ext"
  openssl x509 -req -in "$n.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days 3650 -extfile "$n.ext" -out "$n.crt" 2>/dev/null
  rm -f "$n.csr" "$n.ext"
}
new_key "$PKI/ca.key"
openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=wfa-k8s-ca" -days 3650 -out "$PKI/ca.crt" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
new_cert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$KUBE_SVC_IP"
new_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
new_cert admin "/O=system:masters/CN=wfa-k8s-admin" clientAuth
new_cert controller-manager "/CN=system:kube-controller-manager" clientAuth
new_cert scheduler "/CN=system:kube-scheduler" clientAuth
new_cert kube-proxy "/CN=system:kube-proxy" clientAuth
new_cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
new_cert kubelet "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
new_key "$PKI/sa.key"
openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

write_kubeconfig() { # file, user cert name
  local f=$K8S_DIR/$1
  cat >"$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: wfa-k8s
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: wfa-k8s
  context: {cluster: wfa-k8s, user: $2}
current-context: wfa-k8s
EOF
  chmod 600 "$f"
}
write_kubeconfig kubeconfig admin
for c in controller-manager scheduler kube-proxy kubelet-client; do
  write_kubeconfig "$c.kubeconfig" "$c"
done

# --- the bridge (its address is the node IP) and forwarding past Docker's DROP policy ---------
if ! ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
  ip link add "$CNI_BRIDGE" type bridge
fi
# A fixed MAC: otherwise the bridge takes the lowest MAC of its ports, which changes as pods
# come and go, and pods' ARP entries for the gateway go stale (connections to the node IP
# then time out for up to a minute).
ip link set "$CNI_BRIDGE" address 02:77:66:61:00:01
ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$CNI_BRIDGE"
ip link set "$CNI_BRIDGE" up
for dir in -i -o; do
  iptables -C FORWARD "$dir" "$CNI_BRIDGE" -m comment --comment "$CNI_NET" -j ACCEPT 2>/dev/null ||
    iptables -I FORWARD 1 "$dir" "$CNI_BRIDGE" -m comment --comment "$CNI_NET" -j ACCEPT
done

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
cat >"$K8S_DIR/cni/net.d/10-$CNI_NET.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "bridge", "bridge": "$CNI_BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$K8S_DIR/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
cat >"$K8S_DIR/containerd/config.toml" <<EOF
# Private containerd for the kubelet; dockerd keeps its own. See tests/k8s/README.md.
version = 2
root = "$K8S_DIR/containerd/root"
state = "$K8S_DIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$K8S_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/$PAUSE_IMAGE"
  # CAP_SYS_RESOURCE is missing: runc may not lower oom_score_adj below containerd's own.
  restrict_oom_score_adj = true
  # netns bind mounts under our state dir, not /run/netns, so down.sh finds exactly ours.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$K8S_DIR/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$K8S_DIR/cni/net.d"
EOF
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
cat >"$K8S_DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
address: 0.0.0.0
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
# This machine: cgroups v1 hybrid (kubelet >= 1.35 refuses v1 unless told), cgroupfs like
# dockerd, no swap accounting worth failing on.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: false
podLogsDir: $K8S_DIR/pod-logs
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
serializeImagePulls: false
# Shared disk: evict only when really full; never garbage-collect the imported images early.
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
imageGCHighThresholdPercent: 98
imageGCLowThresholdPercent: 95
EOF
start_daemon kubelet "$KUBE" kubelet --config "$K8S_DIR/kubelet/config.yaml" \
  --kubeconfig "$K8S_DIR/kubelet-client.kubeconfig" --root-dir "$K8S_DIR/kubelet/root" \
  --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"

cat >"$K8S_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $K8S_DIR/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave host sysctls alone: no conntrack table tuning, no route_localnet.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
nodePortAddresses: [primary] # NodePorts on the node IP only, not on eth0
EOF
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
