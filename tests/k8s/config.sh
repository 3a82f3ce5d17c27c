#!/usr/bin/env bash
# The config files of the node's daemons, from lib.sh's settings (run by up.sh): the CNI network,
# the private containerd, the kubelet and kube-proxy.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

# up.sh runs this on a running cluster too: a file is replaced (atomically) only when its content
# changes: containerd watches the CNI directory, and reloading a half-written conflist would
# report the pod network not ready (and the node NotReady).
put() { # file; content on stdin
  cat >"$1.new"
  if cmp -s "$1.new" "$1"; then rm "$1.new"; else mv "$1.new" "$1"; fi
}

put "$K8S_DIR/cni/net.d/10-$CNI_NET.conflist" <<EOF
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
put "$K8S_DIR/containerd/config.toml" <<EOF
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
  # One hosts.toml per registry host, read at each pull (adding one needs no restart).
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$K8S_DIR/containerd/certs.d"
EOF
# The suite's registry (registry.sh) speaks plain HTTP, where containerd 1.6 would try HTTPS.
mkdir -p "$K8S_DIR/containerd/certs.d/$REGISTRY_ADDR"
put "$K8S_DIR/containerd/certs.d/$REGISTRY_ADDR/hosts.toml" <<EOF
server = "http://$REGISTRY_ADDR"
[host."http://$REGISTRY_ADDR"]
  capabilities = ["pull", "resolve"]
EOF

put "$K8S_DIR/kubelet/config.yaml" <<EOF
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

put "$K8S_DIR/kube-proxy.yaml" <<EOF
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
