#!/usr/bin/env bash
# Put what a Kubernetes user pulls into the suite's registry (tests/k8s/registry.sh, started here
# when it is not up): the agent image, the job image, and the Helm chart as an OCI artifact.
#   bash scripts/push-images.sh
# prints, one per line (for `eval` or a test's environment):
#   WFA_REGISTRY=127.0.0.1:5001
#   WFA_AGENT_IMAGE=127.0.0.1:5001/selfhosted/workflow-agent:<agent version>
#   WFA_JOB_IMAGE=127.0.0.1:5001/selfhosted/workflow-job:latest
#   WFA_CHART=oci://127.0.0.1:5001/charts/workflow-agent
#   WFA_CHART_VERSION=<the chart's version>
# The images are the local builds (scripts/build-agent-image.sh, scripts/build-job-image.sh;
# AGENT_IMAGE and WORKFLOW_AGENT_JOB_IMAGE name others, as there). Pushing again what the registry
# has costs a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
AGENT=${AGENT_IMAGE:-local/workflow-agent}
JOB=${WORKFLOW_AGENT_JOB_IMAGE:-local/workflow-job:latest}
CHART_DIR=charts/workflow-agent
say() { echo "push-images: $*" >&2; }
die() {
  echo "push-images: ERROR: $*" >&2
  exit 1
}

VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' agent/src/workflow_agent/__init__.py)
[ -n "$VERSION" ] || die "cannot read __version__ from agent/src/workflow_agent/__init__.py"
for image in "$AGENT:$VERSION" "$JOB"; do
  $DOCKER image inspect "$image" >/dev/null 2>&1 ||
    die "no Docker image $image (build it: scripts/build-agent-image.sh, scripts/build-job-image.sh)"
done
[ -f "$CHART_DIR/Chart.yaml" ] || die "no chart at $CHART_DIR (no Chart.yaml)"

# Helm first (it may still be building in the background: the build script waits for it).
HELM=$(bash scripts/build-go-tool.sh helm)
ADDR=$(bash tests/k8s/registry.sh start)

push_image() { # local image, registry reference
  $DOCKER tag "$1" "$2"
  $DOCKER push -q "$2" >/dev/null || die "docker push $2 failed"
  say "pushed $2"
}
AGENT_REF=$ADDR/selfhosted/workflow-agent:$VERSION
JOB_REF=$ADDR/selfhosted/workflow-job:${JOB##*:}
push_image "$AGENT:$VERSION" "$AGENT_REF"
push_image "$JOB" "$JOB_REF"

# Helm's registry config and caches live in STATE, not in the caller's home.
export HELM_CACHE_HOME=$STATE/helm/cache HELM_CONFIG_HOME=$STATE/helm/config HELM_DATA_HOME=$STATE/helm/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$HELM" package "$CHART_DIR" --destination "$tmp" >/dev/null || die "helm package $CHART_DIR failed"
chart_field() { awk -v k="$1:" '$1 == k {gsub(/["\047]/, "", $2); print $2; exit}' "$CHART_DIR/Chart.yaml"; }
CHART_NAME=$(chart_field name)
CHART_VERSION=$(chart_field version)
tgz=$tmp/$CHART_NAME-$CHART_VERSION.tgz
[ -f "$tgz" ] || die "helm package wrote $(ls "$tmp"), not $tgz"
"$HELM" push "$tgz" "oci://$ADDR/charts" --plain-http >"$tmp/push.log" 2>&1 ||
  die "helm push failed: $(cat "$tmp/push.log")"
say "pushed oci://$ADDR/charts/$CHART_NAME:$CHART_VERSION"

echo "WFA_REGISTRY=$ADDR"
echo "WFA_AGENT_IMAGE=$AGENT_REF"
echo "WFA_JOB_IMAGE=$JOB_REF"
echo "WFA_CHART=oci://$ADDR/charts/$CHART_NAME"
echo "WFA_CHART_VERSION=$CHART_VERSION"
