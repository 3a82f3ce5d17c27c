#!/usr/bin/env bash
# What a Galaxy user gets. Build the tarball; run galaxy-importer on it (Galaxy's own checks on
# every upload); start a real Galaxy API (scripts/galaxy-server.sh), publish the tarball, an older
# version and the dependencies, and test installs from it (tests/galaxy); install the collection BY
# NAME from that server into $STATE/collections, verify it against the server, lint its docs and
# changelog, run a playbook from it; build an execution environment from the server with
# ansible-builder and run the plan playbook in it (tests/galaxy/ee.sh). Molecule
# (scripts/molecule.sh) then runs its scenarios from the same Galaxy-installed copy.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
. scripts/lib.sh
DIST=$STATE/dist; INSTALLED=$STATE/collections
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
t0=$(date +%s); lap() { echo "   ($(( $(date +%s) - t0 )) s)"; }
# galaxy-smoke too: the smoke play asserts that it writes a new config file.
rm -rf "$DIST" "$INSTALLED" "$STATE/galaxy-smoke" "$STATE/galaxy-work"
mkdir -p "$DIST" "$INSTALLED" "$STATE/galaxy-work"
ansible-galaxy collection build --force --output-path "$DIST" .
tarball=$(ls "$DIST"/selfhosted-workflow_agent-*.tar.gz)
echo "-- tarball: $(du -h "$tarball" | cut -f1) $(tar -tzf "$tarball" | wc -l) files"
if tar -tzf "$tarball" | grep -E '(^|/)(\.venv|__pycache__|tests/output|\.pytest_cache|\.git)/' ; then
  echo "tarball contains caches or venvs (see above): fix build_ignore" >&2; exit 1
fi
tar -tzf "$tarball" | grep -c '^agent/src/workflow_agent/config.py$' >/dev/null || { echo "tarball lacks the vendored agent" >&2; exit 1; }

echo "-- test-only collections (requirements/test-collections.yml) from the venv's ansible bundle"
# --offline: satisfied by the bundle it is a no-op; otherwise it fails naming the collection.
ANSIBLE_COLLECTIONS_PATH=$STATE/galaxy-work/test-cols \
  ansible-galaxy collection install --offline -r requirements/test-collections.yml -p "$STATE/galaxy-work/test-cols"

echo "-- galaxy-importer: in the background (checked below)"
# Its own venv (it pins its own ansible-core and ansible-lint, which it runs from PATH). It writes
# importer_result.json to its working directory.
IVENV=$STATE/venvs/importer
importer() {
  local want; want=$(sha256sum requirements/galaxy-importer.txt | cut -c1-16)
  if [ "$(cat "$IVENV/.stamp" 2>/dev/null)" != "$want" ]; then
    rm -rf "$IVENV"; "$PYTHON" -m venv "$IVENV"
    "$IVENV/bin/pip" install -q --upgrade 'pip<26'
    "$IVENV/bin/pip" install -q --no-deps -r requirements/galaxy-importer.txt
    "$IVENV/bin/pip" check
    echo "$want" > "$IVENV/.stamp"
  fi
  cd "$STATE/galaxy-work" && PATH=$IVENV/bin:$PATH "$IVENV/bin/python" -m galaxy_importer.main "$tarball"
}
importer > "$STATE/galaxy-work/importer.log" 2>&1 &
importer_pid=$!
cleanup() { kill "$importer_pid" 2>/dev/null || true; bash scripts/galaxy-server.sh stop; }
trap cleanup EXIT

echo "-- Galaxy server"
bash scripts/galaxy-server.sh start
lap
echo "-- tests/galaxy: publish, install by name, version range, upgrade"
WFA_GALAXY_DIR=$STATE/galaxy-server WFA_GALAXY_TARBALL=$tarball \
  pytest -q --junitxml="$STATE/junit/galaxy.xml" --basetemp="$STATE/galaxy-work/pytest" tests/galaxy
lap

echo "-- install selfhosted.workflow_agent by name from the server into $INSTALLED"
# The bundle hidden: the dependencies land here too, as a Galaxy user gets them.
ANSIBLE_CONFIG=$STATE/galaxy-server/ansible.cfg ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false \
  ANSIBLE_COLLECTIONS_PATH=$INSTALLED ANSIBLE_GALAXY_CACHE_DIR=$STATE/galaxy-work/cache \
  ansible-galaxy collection install --no-cache -p "$INSTALLED" selfhosted.workflow_agent
cmp <(tar -xzOf "$tarball" MANIFEST.json) "$INSTALLED/ansible_collections/selfhosted/workflow_agent/MANIFEST.json" \
  || { echo "the server served another build than $tarball" >&2; exit 1; }
export ANSIBLE_COLLECTIONS_PATH=$INSTALLED
ANSIBLE_CONFIG=$STATE/galaxy-server/ansible.cfg ansible-galaxy collection verify selfhosted.workflow_agent

echo "-- galaxy-importer"
rc=0; wait "$importer_pid" || rc=$?
cat "$STATE/galaxy-work/importer.log"
grep -q '^Importer processing completed successfully' "$STATE/galaxy-work/importer.log" && [ $rc = 0 ] \
  || { echo "galaxy-importer did not complete (exit $rc, above)" >&2; exit 1; }
if grep -E '^(WARNING|ERROR|CRITICAL):' "$STATE/galaxy-work/importer.log"; then
  echo "galaxy-importer reported the warnings/errors above: Galaxy would show them" >&2; exit 1
fi
lap

# After the importer, whose venv brings ansible-builder; while the server runs, since the image
# build installs the collection from it.
echo "-- execution environment: ansible-builder build from the server, the plan playbook in the image"
bash tests/galaxy/ee.sh "$IVENV" "$INSTALLED" "$STATE/galaxy-work/ee" "$STATE/galaxy-server/ansible.cfg"
lap
bash scripts/galaxy-server.sh stop
trap - EXIT

echo "-- antsibull-changelog lint"; antsibull-changelog lint
echo "-- antsibull-docs lint-collection-docs"
antsibull-docs lint-collection-docs --plugin-docs "$INSTALLED/ansible_collections/selfhosted/workflow_agent"

echo "-- playbook from the installed copy"
cd "$STATE" && ansible-playbook -i localhost, -c local \
  "$OLDPWD/tests/system/galaxy_smoke.yml" -e "smoke_dir=$STATE/galaxy-smoke" \
  -e "ansible_python_interpreter=$(command -v python)"  # the venv's: discovery may pick a pyenv shim
