#!/usr/bin/env bash
# The Kubernetes stage of `make test`: the tests/k8s cluster (built from pinned Kubernetes Go
# modules; reused when one is already up), its proof tests, the kubernetes target's tests on it,
# the strategic-merge-patch cross-checks against its kubectl; then the Molecule `kind` scenario on
# a real three-node kind cluster from the node image built here (tests/kind/build-node.sh, in the
# background meanwhile). Takes the tests/k8s cluster down again only if this stage brought it up.
# The Makefile's k8s target names the reports each of these must fill (scripts/verdict.py).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
K8S=/var/tmp/workflow-agent-k8s
. .venv/bin/activate
mkdir -p "$STATE/logs" "$STATE/junit"
# The kind node image: docker builds and kind's own node-image build, a minute or two when its
# inputs changed, instant otherwise; it overlaps the suites on the tests/k8s cluster.
bash tests/kind/build-node.sh >"$STATE/logs/kind-node.out" 2>"$STATE/logs/kind-node.log" &
node_pid=$!
was_up=0
if [ -x "$K8S/kubectl" ] && "$K8S/kubectl" --kubeconfig "$K8S/kubeconfig" get --raw /readyz >/dev/null 2>&1; then
  was_up=1
fi
bash tests/k8s/up.sh || exit 1
# The suite's OCI registry (tests/k8s/registry.sh), which the cluster's containerd pulls from: the
# agent and job images and the chart are pushed there, and the chart and the kind scenario install
# from it by reference, as a user does from their own registry. WFA_REGISTRY, WFA_AGENT_IMAGE,
# WFA_JOB_IMAGE, WFA_CHART and WFA_CHART_VERSION name what is there.
reg_was_up=0
bash tests/k8s/registry.sh status >/dev/null 2>&1 && reg_was_up=1
bash tests/k8s/registry.sh start >/dev/null || exit 1
refs=$(bash scripts/push-images.sh) || exit 1
# shellcheck disable=SC2086 # NAME=value words
export $refs
# The real deployments in pods run local/pulumi:latest (built by the deploy stage; cached here).
bash scripts/build-pulumi-image.sh || exit 1
export KUBECONFIG=$K8S/kubeconfig
rc=0
# The cluster's own kubectl on PATH: test_strategic_merge.py compares its patches with `kubectl patch --local`.
# First the suites that run images imported into containerd (tests/k8s/import-image.sh, pull
# policy Never), then those that pull from the registry: an imported image and its pushed copy
# share their config digest, and once containerd 1.6's CRI has pulled the copy the kubelet may no
# longer find the imported name (ErrImageNeverPull, seen when the registry suites ran first).
PATH=$K8S:$PATH pytest -q --junitxml="$STATE/junit/k8s.xml" \
  tests/k8s/test_cluster.py agent/tests/targets/test_kubernetes.py \
  agent/tests/targets/test_strategic_merge.py::test_same_result_as_kubectl || rc=1
pytest -q --junitxml="$STATE/junit/k8s-contract.xml" \
  agent/tests/targets/test_contract.py -k kubernetes || rc=1
PATH=$K8S:$PATH pytest -q --junitxml="$STATE/junit/k8s-registry.xml" \
  tests/k8s --ignore=tests/k8s/test_cluster.py tests/chart/test_chart_cluster.py || rc=1
# The single-node cluster and the registry are done with: down before kind starts its three nodes
# (2 cores), if this stage brought them up.
if [ "$reg_was_up" = 0 ]; then bash tests/k8s/registry.sh stop || rc=1; fi
if [ "$was_up" = 0 ]; then bash tests/k8s/down.sh || rc=1; fi
# The kind scenario verifies with Ansible, which writes no JUnit report: record its outcome, named
# by kind's version, the node image and the cluster's node count.
kind_name="molecule kind"
if wait "$node_pid" && node_image=$(tail -n 1 "$STATE/logs/kind-node.out") && [ -n "$node_image" ]; then
  kind_bin=$(bash scripts/build-go-tool.sh kind) && kube_bin=$(bash tests/k8s/build.sh) || exit 1
  nodes=$(grep -c '^ *- role:' molecule/kind/files/kind-cluster.yaml)
  kind_name="molecule kind ($("$kind_bin" version | awk '{print $1, $2}'), $nodes nodes, $node_image)"
  # kind and kubectl (the multi-call kube) first on PATH, and the engine's own docker client for kind.
  PATH=$(dirname "$kind_bin"):$kube_bin:/usr/bin:$PATH WFA_KIND_NODE_IMAGE=$node_image \
    python scripts/verdict.py record "$STATE/junit/molecule-kind.xml" "$kind_name" -- \
    bash scripts/molecule.sh kind || rc=1
else
  echo "k8s: the kind node image did not build (log: $STATE/logs/kind-node.log):" >&2
  tail -n 30 "$STATE/logs/kind-node.log" >&2
  python scripts/verdict.py record "$STATE/junit/molecule-kind.xml" "$kind_name" -- \
    sh -c 'echo "no kind node image: tests/kind/build-node.sh failed" >&2; exit 1' || rc=1
fi
exit $rc
