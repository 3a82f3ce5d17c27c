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

# The summary, then one closing line that counts every test case of every runner (pytest,
# ansible-test units, testinfra under molecule) from their JUnit reports, and names each stage
# that failed: a stage that failed before any case ran still shows there.
finish() {
  echo
  echo "== summary ($(( $(date +%s) - t0 ))s)"
  cat "$STATE/summary"
  python3 scripts/junit_total.py --summary "$STATE/summary" --exit-code "$failed" "$STATE/junit"
  exit $failed
}

# make TARGET... as stage NAME. A stage whose make fails before stage.sh wrote its verdict (a
# prerequisite failed) gets a verdict line all the same, so that the summary names every failure.
run_stage() {
  local name=$1
  shift
  make --no-print-directory "$@" && return 0
  failed=1
  grep -Eq "^$name +FAIL" "$STATE/summary" 2>/dev/null ||
    bash scripts/stage.sh "$name" --failed "make $name failed before the stage ran"
}
# Each stage once: bootstrap and galaxy are done by then, so later stages must not redo them.
run() { run_stage "$1" -o bootstrap -o galaxy "$1"; }

# The Go builds (Pulumi first, then Kubernetes and the Prometheus with Kubernetes discovery that
# the kind scenario runs: minutes of CPU each when cold, instant when cached) start at once, at
# nice 19 in the background (scripts/go-builds.sh), so they overlap the download-bound bootstrap;
# each stage that needs a build waits for that build only. Ended with the run, however it ends.
bash scripts/go-builds.sh start
export WFA_GO_BUILDS_STARTED=1 # the builds stage waits for these instead of starting its own
trap 'bash scripts/go-builds.sh stop' EXIT
trap 'exit 130' INT TERM

if ! bash scripts/stage.sh bootstrap -- make --no-print-directory bootstrap; then
  echo "bootstrap failed; nothing else can run"
  failed=1
  finish
fi
for s in lint sanity units pytest; do run "$s"; done
run_stage galaxy -o bootstrap -o images galaxy
run molecule
# Each benchmark once, smallest size: a broken benchmark shows here. It measures nothing worth
# keeping (no verdicts), so it runs beside deploy and builds, which mostly wait (on Pulumi's
# deployments, on unpacking modules). After the Pulumi builds: its deploy section builds the
# Pulumi job image too. Its own exit status, as the subshell's `failed` is lost.
( bash scripts/go-builds.sh wait pulumi pulumi-language-yaml >/dev/null 2>&1; run bench-smoke; exit $failed ) &
bench_pid=$!
run deploy       # real Pulumi deployments: waits for the Pulumi builds only
run builds       # waits for every Go build, then rehearses each one's resolution (make builds)
wait "$bench_pid" || failed=1
if why=$(bash scripts/go-builds.sh wait kube prometheus kind coredns); then
  run k8s
else
  bash scripts/stage.sh k8s --failed "the cluster build failed ($(paste -sd ';' <<<"$why"))"
  failed=1
fi
finish
