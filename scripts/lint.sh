#!/usr/bin/env bash
# Static checks: ruff (Python), yamllint, ansible-lint (production profile), antsibull-changelog,
# actionlint.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
echo "-- ruff"; ruff check . && ruff format --check .
echo "-- yamllint"; yamllint -s .
# ansible-lint resolves the collection's own FQCNs through a collections path that holds it.
. scripts/lib.sh
mkdir -p "$STATE/lint/ansible_collections/selfhosted"
ln -sfn "$PWD" "$STATE/lint/ansible_collections/selfhosted/workflow_agent"
export ANSIBLE_COLLECTIONS_PATH="$STATE/lint:$(python -c 'import ansible_collections, os; print(os.path.dirname(list(ansible_collections.__path__)[0]))')"
echo "-- ansible-lint"; ansible-lint --offline --profile production
echo "-- antsibull-changelog"; antsibull-changelog lint
# The GitHub Actions workflow users copy (extensions/github), as GitHub would read it; actionlint
# also runs shellcheck on its run: blocks when shellcheck is on PATH.
echo "-- actionlint"
actionlint=$(bash scripts/build-go-tool.sh actionlint)
"$actionlint" extensions/github/*.yml
echo "All checks passed"
