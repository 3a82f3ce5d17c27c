# Shared settings and helpers of up.sh, down.sh, build.sh and import-image.sh (sourced, not run).
# The variables are used by the scripts that source this file.
# shellcheck shell=bash disable=SC2034

K8S_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${WORKFLOW_AGENT_STATE:-${STATE:-/var/tmp/workflow-agent-dev}}
K8S_DIR=$STATE/k8s
PKI=$K8S_DIR/pki
# One cluster per machine (fixed ports, bridge and node name): this directory records which
# STATE owns it and holds a stable kubeconfig symlink.
STABLE_DIR=/var/tmp/workflow-agent-k8s
# Built binaries are kept per version and inputs, outside any STATE, so k8s-down keeps them.
# Go's module and build caches are the project's, shared with its other Go builds (scripts/golib.sh).
CACHE_DIR=${WFA_K8S_CACHE:-/var/cache/workflow-agent-k8s}
GO=${GO:-/usr/local/go/bin/go}
DOCKER=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)}

KUBE_VERSION=$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$K8S_SRC/kube/go.mod")
NODE_NAME=wfa-k8s-node
CNI_NET=wfa-k8s
CNI_BRIDGE=wfak8s0
POD_CIDR=10.244.0.0/24
# The bridge gateway is also the node IP: pods reach the host (and the emulator) there.
NODE_IP=10.244.0.1
SERVICE_CIDR=10.96.0.0/16
KUBE_SVC_IP=10.96.0.1
APISERVER_PORT=6443
CONTAINERD_SOCK=$K8S_DIR/containerd/containerd.sock
PAUSE_IMAGE=local/wfa-k8s-pause:1
# Ports the cluster listens on; up.sh refuses to start when one is taken.
# The suite's OCI registry (registry.sh), one per machine like the cluster: plain HTTP on loopback,
# where the host's dockerd pushes (it treats 127.0.0.0/8 as insecure by default) and the node's
# containerd, a host process, pulls (config.sh gives it a hosts.toml for this address).
REGISTRY_ADDR=127.0.0.1:5001
CLUSTER_PORTS="2379 2380 $APISERVER_PORT 10248 10249 10250 10256 10257 10259"
# Host sysctls the kubelet rewrites (protectKernelDefaults=false); down.sh restores them.
KUBELET_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
COMPONENTS="etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy"

# up.sh and down.sh hold this lock, so that two engineers' runs do not interleave. up.sh
# calls down.sh itself, with WFA_K8S_LOCKED set.
lock_cluster() {
  [ -z "${WFA_K8S_LOCKED:-}" ] || return 0
  exec 8>/run/lock/workflow-agent-k8s.lock
  flock 8
  export WFA_K8S_LOCKED=1
}

log() { echo "k8s: $*" >&2; }
die() {
  echo "k8s: ERROR: $*" >&2
  exit 1
}

# The cache key covers every input of the build, so a change rebuilds and nothing else does:
# whole-line shell comments are left out, as golib.sh's go_key does.
bin_dir() {
  local key
  key=$(sed '/^[[:space:]]*#/d' "$K8S_SRC/build.sh" "$K8S_SRC/../../scripts/golib.sh" \
    "$K8S_SRC/kube/go.mod" "$K8S_SRC/kube/go.sum" "$K8S_SRC"/kube/*.go "$K8S_SRC"/kube/pause/*.go |
    sha256sum | cut -c1-12)
  echo "$CACHE_DIR/$KUBE_VERSION-$key"
}

pid_of() { cat "$K8S_DIR/run/$1.pid" 2>/dev/null || true; }

# True when the pid file names a live process started from this cluster's binaries.
running() {
  local pid
  pid=$(pid_of "$1")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$K8S_DIR"
}

kubectl() { "$KUBE" kubectl --kubeconfig "$K8S_DIR/kubeconfig" "$@"; }

ctr_k8s() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }
