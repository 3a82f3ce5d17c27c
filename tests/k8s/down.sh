#!/usr/bin/env bash
# Remove every trace of the cluster of this STATE (`make k8s-down`): pods (torn down through
# CNI), processes (by pid file), mounts, network namespaces, the bridge, iptables rules, kubelet
# cgroups, sysctls the kubelet changed, and $STATE/k8s. Keeps the binary cache and the pause
# image in Docker. Safe to run twice, or when nothing is up.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "must run as root"
lock_cluster
start=$(date +%s)

owner=$(cat "$STABLE_DIR/owner" 2>/dev/null || true)
if [ -n "$owner" ] && [ "$owner" != "$K8S_DIR" ] && [ -d "$owner/run" ]; then
  # Another STATE's cluster owns the machine-wide names: touch only our own directory.
  log "the running cluster belongs to $owner; removing only $K8S_DIR"
  rm -rf "$K8S_DIR"
  exit 0
fi

KUBE=$(bin_dir)/kube
[ -x "$KUBE" ] || KUBE=""

# Ours and not yet exited (a zombie counts as gone: PID 1 here reaps adopted children late).
alive() {
  [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1)" != Z ] &&
    tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$K8S_DIR"
}
any_alive() {
  local pid
  for pid in "$@"; do alive "$pid" && return 0; done
  return 1
}

stop() { # names...: TERM them all at once, KILL whatever is left after 15 s
  local name pid pids=()
  for name in "$@"; do
    if running "$name"; then
      pids+=("$(pid_of "$name")")
      kill -TERM "$(pid_of "$name")" 2>/dev/null
    fi
    rm -f "$K8S_DIR/run/$name.pid"
  done
  for _ in $(seq 1 60); do
    any_alive "${pids[@]}" || return 0
    sleep 0.25
  done
  for pid in "${pids[@]}"; do
    if alive "$pid"; then kill -KILL "$pid" 2>/dev/null; fi
  done
}

stop kubelet kube-proxy
if running containerd; then
  # Stopping every sandbox through CRI makes containerd run CNI DEL for it.
  [ -z "$KUBE" ] || "$KUBE" cri-reset "unix://$CONTAINERD_SOCK" >/dev/null || log "cri-reset reported errors"
  for task in $(ctr_k8s tasks ls -q 2>/dev/null); do
    ctr_k8s tasks kill -s KILL "$task" >/dev/null 2>&1
    ctr_k8s tasks delete -f "$task" >/dev/null 2>&1
  done
fi
stop containerd
# Containers whose shim survived (e.g. containerd was killed earlier).
if [ -d "$K8S_DIR/containerd/runc/k8s.io" ]; then
  for c in $(runc --root "$K8S_DIR/containerd/runc/k8s.io" list -q 2>/dev/null); do
    runc --root "$K8S_DIR/containerd/runc/k8s.io" delete --force "$c" >/dev/null 2>&1
  done
fi
for pid in $(pgrep -f -- "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK( |$)" || true); do
  kill -KILL "$pid" 2>/dev/null
done
stop kube-scheduler kube-controller-manager kube-apiserver etcd

# Mounts below the state dir (rootfs overlays, sandbox shm, netns, pod volumes), deepest first.
awk '{print $5}' /proc/self/mountinfo | grep -F "$K8S_DIR/" | sort -r | while read -r m; do
  umount -l "$m" 2>/dev/null || log "could not unmount $m"
done

# iptables: kube-proxy's and the kubelet's KUBE-* chains (no other kube-proxy runs: one
# cluster per machine), CNI per-pod chains, and our FORWARD rules.
[ -z "$KUBE" ] || "$KUBE" kube-proxy --cleanup >/dev/null 2>&1 || true
for table in filter nat mangle; do
  rules=$(iptables -t "$table" -S 2>/dev/null) || continue
  # Rules that jump to a KUBE-* chain, or carry our comment (CNI uses name: "wfa-k8s").
  echo "$rules" | awk '$1 == "-A" && $2 !~ /^KUBE-/' |
    grep -E -- "(-j KUBE-|\"$CNI_NET\"|--comment $CNI_NET( |$))" | while read -r rule; do
      eval "iptables -t $table ${rule/-A/-D}" 2>/dev/null
    done
  for chain in $(echo "$rules" | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
    iptables -t "$table" -F "$chain" 2>/dev/null
  done
  for chain in $(echo "$rules" | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
    iptables -t "$table" -X "$chain" 2>/dev/null
  done
done
# CNI chains left empty and unreferenced once our rules are gone (another CNI user's stay).
for chain in $(iptables -t nat -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^CNI-/ {print $2}'); do
  if ! iptables -t nat -S "$chain" 2>/dev/null | grep -q '^-A'; then
    iptables -t nat -S | grep -q -- "-j $chain\( \|$\)" || iptables -t nat -X "$chain" 2>/dev/null
  fi
done

ip link del "$CNI_BRIDGE" 2>/dev/null

# Kubelet cgroups (cgroupfs driver: kubepods under every v1 hierarchy), deepest first.
find /sys/fs/cgroup/*/kubepods* -depth -type d 2>/dev/null | while read -r d; do rmdir "$d" 2>/dev/null; done

if [ -f "$K8S_DIR/sysctl.saved" ]; then
  while IFS='=' read -r key value; do sysctl -qw "$key=$value" >/dev/null 2>&1; done <"$K8S_DIR/sysctl.saved"
fi
# The kubelet also links every container log into the fixed /var/log/containers.
find /var/log/containers -maxdepth 1 -type l -lname "$K8S_DIR/*" -delete 2>/dev/null

rm -rf "$K8S_DIR"
if [ "$owner" = "$K8S_DIR" ]; then
  rm -f "$STABLE_DIR/owner" "$STABLE_DIR/kubeconfig" "$STABLE_DIR/kubectl"
  rmdir "$STABLE_DIR" 2>/dev/null
fi
log "down in $(($(date +%s) - start)) s"
exit 0
