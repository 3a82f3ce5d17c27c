#!/usr/bin/env bash
# Run `ansible-test sanity|units` on a copy of the collection at a real
# .../ansible_collections/selfhosted/workflow_agent path (ansible-test refuses symlinks and needs git).
# Usage: ansible-test.sh [--core 2.17|2.18] sanity|units [ansible-test options]
# --core: with that older ansible-core (meta/runtime.yml claims it), in its own venv
# (scripts/core-venv.sh); its copy and JUnit reports go to their own directories.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
WORK=$STATE/ansible-test; JUNIT=$STATE/junit
if [ "${1:-}" = --core ]; then
  venv=$(bash scripts/core-venv.sh "${2:?usage: ansible-test.sh [--core X.Y] sanity|units}")
  WORK=$STATE/ansible-test-$2; JUNIT=$STATE/junit/core-$2; shift 2
else
  venv=.venv
fi
. "$venv/bin/activate"
what=${1:?usage: ansible-test.sh [--core X.Y] sanity|units}; shift
PYV=$(python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

# ansible-test bootstraps pip with get-pip.py from a download host that is unreachable here;
# it uses a cached copy without checking its hash, so put our stand-in there.
PIPV=$(python - <<'PY'
import pathlib, re, ansible_test
src = (pathlib.Path(ansible_test.__file__).parent / "_internal/python_requirements.py").read_text()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
mkdir -p ~/.ansible/test/cache
cp tests/shims/get_pip.py ~/.ansible/test/cache/get_pip_${PIPV//./_}.py

COLL=$WORK/ansible_collections/selfhosted/workflow_agent
rm -rf "$COLL" "$WORK/dist"; mkdir -p "$COLL" "$WORK/dist"
# Exactly what the Galaxy tarball ships (galaxy.yml build_ignore keeps dev tooling out), plus
# tests/unit, which the tarball ships too. The dev tooling is linted by ruff instead.
ansible-galaxy collection build --force --output-path "$WORK/dist" . >/dev/null
tar -xzf "$WORK"/dist/selfhosted-workflow_agent-*.tar.gz -C "$COLL"
rm -f "$COLL/MANIFEST.json" "$COLL/FILES.json"
cp galaxy.yml "$COLL/"
printf 'tests/output/\n.ansible/\n' >"$COLL/.gitignore"  # else sanity lints its own venvs
# The Helm chart's templates are Go templates that render to YAML, not YAML: sanity's yamllint
# cannot parse them. helm lint --strict, the golden renders and the API server's dry run check
# them (tests/chart). Not sanity ignore files (kubernetes.core's way): galaxy-importer warns
# about every one.
printf 'charts/*/templates/\n' >>"$COLL/.gitignore"
( cd "$COLL" && git init -q && git add -A )
cd "$COLL"
# Each sanity test and each unit test case is a JUnit case: the stages require them
# (scripts/verdict.py), so a run that tested nothing fails.
rc=0
case $what in
  sanity) ansible-test sanity --venv --python "$PYV" --color no --junit "$@" || rc=$? ;;
  units) ansible-test units --venv --python "$PYV" --color no "$@" || rc=$? ;;
  *) echo "usage: ansible-test.sh [--core X.Y] sanity|units" >&2; exit 2 ;;
esac
mkdir -p "$JUNIT"; cp tests/output/junit/*.xml "$JUNIT/" 2>/dev/null || true
exit $rc
