#!/usr/bin/env bash
# Static checks: ruff (Python), yamllint, ansible-lint (production profile), antsibull-changelog.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
echo "-- ruff"; ruff check . && ruff format --check .
echo "-- yamllint"; yamllint -s .
echo "-- ansible-lint"; ansible-lint --offline --profile production
echo "-- antsibull-changelog"; antsibull-changelog lint
echo "All checks passed"
