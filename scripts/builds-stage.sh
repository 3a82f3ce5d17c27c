#!/usr/bin/env bash
# The builds stage of `make test`: every Go build done (scripts/go-builds.sh), the Pulumi job image
# built from them, then the suites given (make builds: the resolution rehearsal of each build and
# the image's checks). Under `make test` the builds started in the background at its start
# (WFA_GO_BUILDS_STARTED=1), so this waits for them; on its own it runs them (cached: instant).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
. scripts/lib.sh
rc=0
if [ -n "${WFA_GO_BUILDS_STARTED:-}" ]; then
  bash scripts/go-builds.sh wait || rc=1
else
  bash scripts/go-builds.sh run || rc=1
fi
# A Pulumi build that failed is not tried again here (minutes): its failure is reported above.
if bash scripts/go-builds.sh wait pulumi pulumi-language-yaml >/dev/null 2>&1; then
  bash scripts/build-pulumi-image.sh || rc=1
fi
. .venv/bin/activate
pytest -q --junitxml="$STATE/junit/builds.xml" "$@" || rc=1
exit $rc
