#!/usr/bin/env bash
# A stage of `make test` that needs Go builds (scripts/go-builds.sh): those builds done, the
# Pulumi job image built from them, then the suites given, reported as $STATE/junit/REPORT.xml.
#   builds-stage.sh REPORT [BUILD...] -- SUITE...     (no BUILD: every build)
# `make builds`: every build, then the resolution rehearsal of each and the image's checks.
# `make deploy`: the Pulumi builds only, then real deployments through the agent.
# Under `make test` the builds started in the background at its start (WFA_GO_BUILDS_STARTED=1),
# so this waits for them; on its own it runs them (cached: instant).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
. scripts/lib.sh
report=${1:?usage: builds-stage.sh REPORT [BUILD...] -- SUITE...}
shift
builds=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  builds+=("$1")
  shift
done
[ "${1:-}" = -- ] && shift
rc=0
if [ -n "${WFA_GO_BUILDS_STARTED:-}" ]; then
  bash scripts/go-builds.sh wait "${builds[@]}" || rc=1
else
  bash scripts/go-builds.sh run "${builds[@]}" || rc=1
fi
# A Pulumi build that failed is not tried again here (minutes): its failure is reported above.
if bash scripts/go-builds.sh wait pulumi pulumi-language-yaml >/dev/null 2>&1; then
  bash scripts/build-pulumi-image.sh || rc=1
fi
. .venv/bin/activate
pytest -q --junitxml="$STATE/junit/$report.xml" "$@" || rc=1
exit $rc
