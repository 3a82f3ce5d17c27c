#!/usr/bin/env bash
# Run `ansible-test sanity|units` on a copy of the collection at a real
# .../ansible_collections/selfhosted/workflow_agent path (ansible-test refuses symlinks and needs git).
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
STATE=${WORKFLOW_AGENT_STATE:-/var/tmp/workflow-agent-dev}
what=$1; shift
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

COLL=$STATE/ansible-test/ansible_collections/selfhosted/workflow_agent
rm -rf "$COLL" "$STATE/ansible-test/dist"; mkdir -p "$COLL" "$STATE/ansible-test/dist"
# Exactly what the Galaxy tarball ships (galaxy.yml build_ignore keeps dev tooling out), plus
# tests/unit, which the tarball ships too. The dev tooling is linted by ruff instead.
ansible-galaxy collection build --force --output-path "$STATE/ansible-test/dist" . >/dev/null
tar -xzf "$STATE"/ansible-test/dist/selfhosted-workflow_agent-*.tar.gz -C "$COLL"
rm -f "$COLL/MANIFEST.json" "$COLL/FILES.json"
cp galaxy.yml "$COLL/"
printf 'tests/output/\n.ansible/\n' >"$COLL/.gitignore"  # else sanity lints its own venvs
( cd "$COLL" && git init -q && git add -A )
cd "$COLL"
case $what in
  sanity) ansible-test sanity --venv --python "$PYV" --color no "$@" ;;
  units)
    ansible-test units --venv --python "$PYV" --color no "$@"
    mkdir -p "$STATE/junit"; cp tests/output/junit/*.xml "$STATE/junit/" 2>/dev/null || true ;;
  *) echo "usage: ansible-test.sh sanity|units" >&2; exit 2 ;;
esac
