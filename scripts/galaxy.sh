#!/usr/bin/env bash
# What a Galaxy user gets: build the tarball, install it into a clean collections path, check its
# docs and changelog, and run a playbook from the INSTALLED copy (not the source tree).
# Molecule (scripts/molecule.sh) then runs its scenarios from the same installed copy.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
STATE=${WORKFLOW_AGENT_STATE:-/var/tmp/workflow-agent-dev}
DIST=$STATE/dist; INSTALLED=$STATE/collections
# galaxy-smoke too: the smoke play asserts that it writes a new config file.
rm -rf "$DIST" "$INSTALLED" "$STATE/galaxy-smoke"; mkdir -p "$DIST" "$INSTALLED"
ansible-galaxy collection build --force --output-path "$DIST" .
tarball=$(ls "$DIST"/selfhosted-workflow_agent-*.tar.gz)
echo "-- tarball: $(du -h "$tarball" | cut -f1) $(tar -tzf "$tarball" | wc -l) files"
if tar -tzf "$tarball" | grep -E '(^|/)(\.venv|__pycache__|tests/output|\.pytest_cache|\.git)/' ; then
  echo "tarball contains caches or venvs (see above): fix build_ignore" >&2; exit 1
fi
tar -tzf "$tarball" | grep -c '^agent/src/workflow_agent/config.py$' >/dev/null || { echo "tarball lacks the vendored agent" >&2; exit 1; }
# The bundle from PyPI already satisfies the dependencies; Galaxy is never contacted. --force:
# run from a checkout at .../ansible_collections/selfhosted/workflow_agent (as ansible-test
# needs), ansible-galaxy counts the checkout itself as installed and would do nothing.
ansible-galaxy collection install --offline --force -p "$INSTALLED" "$tarball"
export ANSIBLE_COLLECTIONS_PATH=$INSTALLED
ansible-galaxy collection verify --offline selfhosted.workflow_agent
echo "-- antsibull-changelog lint"; antsibull-changelog lint
echo "-- antsibull-docs lint-collection-docs"
antsibull-docs lint-collection-docs --plugin-docs "$INSTALLED/ansible_collections/selfhosted/workflow_agent"
echo "-- playbook from the installed copy"
cd "$STATE" && ansible-playbook -i localhost, -c local \
  "$OLDPWD/tests/system/galaxy_smoke.yml" -e "smoke_dir=$STATE/galaxy-smoke" \
  -e "ansible_python_interpreter=$(command -v python)"  # the venv's: discovery may pick a pyenv shim
