#!/usr/bin/env bash
# Run one stage of the suite: full output to $STATE/logs/<stage>.log, a one-line verdict to the
# terminal and to $STATE/summary. Usage: stage.sh NAME -- command...
set -uo pipefail
STATE=${WORKFLOW_AGENT_STATE:-/var/tmp/workflow-agent-dev}
name=$1; shift; [ "${1:-}" = "--" ] && shift
mkdir -p "$STATE/logs" "$STATE/junit"
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
if [ $rc = 0 ]; then verdict=PASS; else verdict=FAIL; fi
line=$(printf '%-9s %s in %4ss  %s' "$name" "$verdict" "$secs" "${last:0:140}")
echo "$line"; echo "$line" >>"$STATE/summary"
if [ $rc != 0 ]; then echo "--- last 40 lines of $log:"; tail -n 40 "$log"; fi
exit $rc
