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
rc=0; npass=0; nfail=0
for s in "${scenarios[@]}"; do
  echo "-- molecule test -s $s"
  t0=$(date +%s)
  if MOLECULE_EPHEMERAL_DIRECTORY=$STATE/molecule/$s molecule test -s "$s"; then
    res=passed; npass=$((npass + 1))
  else
    res=FAILED; nfail=$((nfail + 1)); rc=1
  fi
  echo "molecule $s: $res in $(( $(date +%s) - t0 ))s"
done
# The stage's summary line (scripts/stage.sh picks the last "N passed" line).
echo "molecule scenarios: $npass passed, $nfail failed"
exit $rc
