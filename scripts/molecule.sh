#!/usr/bin/env bash
# Run Molecule scenarios (default: all of them) from the collection INSTALLED from its tarball by
# scripts/galaxy.sh, so the scenarios prove what a Galaxy user gets.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
STATE=${WORKFLOW_AGENT_STATE:-/var/tmp/workflow-agent-dev}
export ANSIBLE_COLLECTIONS_PATH=$STATE/collections
test -d "$ANSIBLE_COLLECTIONS_PATH/ansible_collections/selfhosted/workflow_agent" \
  || { echo "run 'make galaxy' first (no installed collection at $ANSIBLE_COLLECTIONS_PATH)" >&2; exit 1; }
export MOLECULE_JUNIT_DIR=$STATE/junit
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  mapfile -t scenarios < <(ls molecule/*/molecule.yml | xargs -n1 dirname | xargs -n1 basename)
fi
rc=0
for s in "${scenarios[@]}"; do
  echo "-- molecule test -s $s"
  if molecule test -s "$s"; then echo "molecule $s: passed"; else echo "molecule $s: FAILED"; rc=1; fi
done
exit $rc
