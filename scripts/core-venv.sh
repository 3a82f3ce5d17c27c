#!/usr/bin/env bash
# Create (once per requirements file) the venv of an older ansible-core that meta/runtime.yml
# claims, for `scripts/ansible-test.sh --core X.Y`. Prints the venv's directory: under STATE,
# not in the checkout, which `ansible-galaxy collection build` would pack.
# Usage: core-venv.sh 2.17|2.18
set -euo pipefail
cd "$(dirname "$0")/.."
core=${1:?usage: core-venv.sh 2.17|2.18}
req=requirements/core-$core.txt
[ -f "$req" ] || { echo "core-venv.sh: no $req (cores: $(ls requirements/core-*.txt | sed 's/.*core-//; s/\.txt//' | xargs))" >&2; exit 2; }
venv=${WORKFLOW_AGENT_STATE:-/var/tmp/workflow-agent-dev}/venv-core-$core
if ! cmp -s "$req" "$venv/.stamp" 2>/dev/null; then
  rm -rf "$venv"
  "${PYTHON:-$(command -v python3.11 || command -v python3)}" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade 'pip<26' >&2
  "$venv/bin/python" -m pip install -q -r "$req" >&2
  cp "$req" "$venv/.stamp"
fi
echo "$venv"
