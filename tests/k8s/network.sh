#!/usr/bin/env bash
# The pods' bridge (its address is the node IP) and forwarding past Docker's DROP policy (run by
# up.sh; down.sh removes both).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

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
