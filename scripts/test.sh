#!/usr/bin/env bash
# `make test`: bootstrap what the suite needs, then every stage. Each stage prints one verdict
# line; all stages run even after a failure so one run shows everything; exit 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
. scripts/lib.sh
export WORKFLOW_AGENT_STATE=$STATE
mkdir -p "$STATE/logs"; rm -f "$STATE/summary"; rm -rf "$STATE/junit"; mkdir -p "$STATE/junit"
t0=$(date +%s)
failed=0
# Each stage once: bootstrap and galaxy are done by then, so later stages must not redo them.
run() { make --no-print-directory -o bootstrap -o galaxy "$@" || failed=1; }

# The Go builds (Pulumi first, then Kubernetes and the Prometheus with Kubernetes discovery that
# the kind scenario runs: minutes of CPU each when cold, instant when cached) start at once, at
# nice 19 in the background (scripts/go-builds.sh), so they overlap the download-bound bootstrap;
# each stage that needs a build waits for that build only. Ended with the run, however it ends.
bash scripts/go-builds.sh start
trap 'bash scripts/go-builds.sh stop' EXIT
trap 'exit 130' INT TERM

bash scripts/stage.sh bootstrap -- make --no-print-directory bootstrap || {
  echo "bootstrap failed; nothing else can run"; exit 1; }
for s in lint sanity units pytest; do run "$s"; done
make --no-print-directory -o bootstrap -o images galaxy || failed=1
run molecule
run bench-smoke  # each benchmark once, smallest size: a broken benchmark shows here
if why=$(bash scripts/go-builds.sh wait kube prometheus); then
  run k8s
else
  echo "k8s       FAIL: the cluster build failed ($(paste -sd ';' <<<"$why"))" | tee -a "$STATE/summary"
  failed=1
fi

echo
echo "== summary ($(( $(date +%s) - t0 ))s)"
cat "$STATE/summary"
# One closing line that counts every test case of every runner (pytest, ansible-test units,
# testinfra under molecule), from their JUnit reports.
.venv/bin/python scripts/junit_total.py "$STATE/junit"
exit $failed
