#!/usr/bin/env bash
# Run Molecule scenarios (default: all of them) from the collection INSTALLED from its tarball by
# scripts/galaxy.sh, so the scenarios prove what a Galaxy user gets.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
. scripts/lib.sh
export ANSIBLE_COLLECTIONS_PATH=$STATE/collections
test -d "$ANSIBLE_COLLECTIONS_PATH/ansible_collections/selfhosted/workflow_agent" \
  || { echo "run 'make galaxy' first (no installed collection at $ANSIBLE_COLLECTIONS_PATH)" >&2; exit 1; }
export MOLECULE_JUNIT_DIR=$STATE/junit
# Per-STATE names, so runs with different STATEs (several engineers) do not collide: containers
# and networks are <prefix>-<scenario>-..., and each scenario's ephemeral dir is under STATE.
export WFA_RUN_PREFIX=${WFA_RUN_PREFIX:-$(basename "$STATE")}
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  mapfile -t scenarios < <(ls molecule/*/molecule.yml | xargs -n1 dirname | xargs -n1 basename)
fi
# Two scenarios at a time by default (WFA_MOLECULE_JOBS): much of a scenario is waiting (systemd
# booting, agents starting, health checks, drains), so a second one fills the cores meanwhile.
# Each scenario writes its own log; every log is printed whole at the end, in the order given.
parallel=${WFA_MOLECULE_JOBS:-2}
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "WFA_MOLECULE_JOBS must be a positive number, not '$parallel'" >&2; exit 2; }
mkdir -p "$STATE/molecule"
one() {
  local s=$1 t0 res
  t0=$(date +%s)
  if MOLECULE_EPHEMERAL_DIRECTORY=$STATE/molecule/$s molecule test -s "$s" >"$STATE/molecule/$s.log" 2>&1; then
    res=passed
  else
    res=FAILED
  fi
  echo "molecule $s: $res in $(( $(date +%s) - t0 ))s" | tee "$STATE/molecule/$s.result"
}
for s in "${scenarios[@]}"; do
  rm -f "$STATE/molecule/$s.result"
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  echo "-- molecule test -s $s (log: $STATE/molecule/$s.log)"
  one "$s" &
done
wait
rc=0; npass=0; nfail=0
for s in "${scenarios[@]}"; do
  echo; echo "== molecule test -s $s"
  cat "$STATE/molecule/$s.log" 2>/dev/null
  if grep -q ": passed in " "$STATE/molecule/$s.result" 2>/dev/null; then
    npass=$((npass + 1))
  else
    nfail=$((nfail + 1)); rc=1
  fi
  cat "$STATE/molecule/$s.result" 2>/dev/null || echo "molecule $s: FAILED (no result)"
done
# The stage's summary line (scripts/stage.sh picks the last "N passed" line).
echo "molecule scenarios: $npass passed, $nfail failed"
exit $rc
