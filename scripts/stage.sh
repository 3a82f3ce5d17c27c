#!/usr/bin/env bash
# Run one stage of the suite: full output to $STATE/logs/<stage>.log, a one-line verdict to the
# terminal and to $STATE/summary. Usage: stage.sh NAME [--require SUITE]... -- command...
# `stage.sh NAME --failed WHY` records a stage that could not run (its build failed, say): the
# same verdict line, `NAME FAIL: WHY`, which scripts/junit_total.py counts in the closing line.
# Each SUITE (REPORT[::PATH], see scripts/verdict.py) must run at least one case that does not
# skip, else the stage fails even when its command exits 0; the skips left are listed.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
name=$1; shift
if [ "${1:-}" = --failed ]; then
  mkdir -p "$STATE"
  printf '%-9s FAIL: %s\n' "$name" "${2:?stage.sh NAME --failed WHY}" | tee -a "$STATE/summary"
  exit 1
fi
suites=()
while [ "${1:-}" = --require ]; do suites+=("$2"); shift 2; done
[ "${1:-}" = "--" ] && shift
suites_verdict() { python3 "$(dirname "$0")/verdict.py" "$1" "$STATE/junit" "${suites[@]}"; }
mkdir -p "$STATE/logs" "$STATE/junit"
# A report left by an earlier run must not stand in for this one.
if [ ${#suites[@]} -gt 0 ]; then suites_verdict clear || exit 2; fi
log="$STATE/logs/$name.log"
start=$(date +%s)
echo "== $name (log: $log)"
if [ "${STAGE_QUIET:-1}" = 1 ] && [ -z "${CI:-}${VERBOSE:-}" ]; then
  bash -c "$*" >"$log" 2>&1; rc=$?
else
  bash -c "$*" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
fi
secs=$(( $(date +%s) - start ))
# The runner's own closing line (pytest, molecule, ansible-test, lint) is the stage's summary.
last=$(grep -E '([0-9]+ (passed|failed|error)|PLAY RECAP|ERROR|FATAL|Passed|Failed|ok=|issues? found|All checks passed)' "$log" | tail -n 1)
suite_lines=""
if [ ${#suites[@]} -gt 0 ]; then
  suite_lines=$(suites_verdict check) || { [ $rc != 0 ] || rc=1; }
  echo "$suite_lines" >>"$log"
fi
if [ $rc = 0 ]; then verdict=PASS; else verdict=FAIL; fi
line=$(printf '%-9s %s in %4ss  %s' "$name" "$verdict" "$secs" "${last:0:140}")
# The summary keeps the suites that failed and every skip with its reason.
notes=$(grep -v ': ok: ' <<<"$suite_lines")
{ echo "$line"; [ -z "$notes" ] || echo "$notes"; } | tee -a "$STATE/summary"
if [ $rc != 0 ]; then echo "--- last 40 lines of $log:"; tail -n 40 "$log"; fi
exit $rc
