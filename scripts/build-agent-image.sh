#!/usr/bin/env bash
# Build the agent image local/workflow-agent:<version> (and :latest) from ./Containerfile.
#
# HTTPS fails inside build containers here, so the wheelhouse is made on the host: the agent
# wheel (pip wheel, from a copy of agent/) plus every dependency of it and of its docker and
# kubernetes extras (pip download, pinned by the agent role's wheelhouse-constraints.txt, the pins
# the collection ships, for the base image's Python and architecture). The image then installs
# with pip --no-index. The build context is a small temporary directory. The image carries a
# label with the hash of all inputs; an image whose label matches is reused, so a second run
# takes a second or two.
#
# Environment: BASE_IMAGE (default local/debian12-plain:latest, from scripts/images.sh),
# AGENT_IMAGE (default local/workflow-agent), DOCKER, WORKFLOW_AGENT_STATE (caches), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/lib.sh
BASE=${BASE_IMAGE:-local/debian12-plain:latest}
IMAGE=${AGENT_IMAGE:-local/workflow-agent}
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
CONSTRAINTS=roles/agent/files/wheelhouse-constraints.txt
SOURCE=$(awk '$1 == "repository:" {print $2}' galaxy.yml)
VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' agent/src/workflow_agent/__init__.py)
[ -n "$VERSION" ] || { echo "agent image: cannot read __version__ from agent/src/workflow_agent/__init__.py" >&2; exit 1; }
mkdir -p "$STATE"

base_id=$($DOCKER image inspect -f '{{.Id}}' "$BASE" 2>/dev/null) \
  || { echo "agent image: base image $BASE is missing (run: bash scripts/images.sh)" >&2; exit 1; }

# The base image's Python and machine decide which wheels fit; asked once per base image.
probe=$STATE/agent-image/base-${base_id#sha256:}
probe=${probe:0:200}
if [ ! -s "$probe" ]; then
  mkdir -p "$(dirname "$probe")"
  $DOCKER run --rm --entrypoint python3 "$BASE" -c \
    'import platform, sys; print("%d%d %s" % (sys.version_info[0], sys.version_info[1], platform.machine()))' \
    >"$probe.tmp"
  mv "$probe.tmp" "$probe"
fi
read -r pyver machine <"$probe"

# Dependency wheels, cached per constraints, agent metadata and target Python.
deps=$STATE/agent-image/wheels-$( { cat "$CONSTRAINTS" agent/pyproject.toml; echo "$pyver $machine"; } | sha256sum | cut -c1-16)
ctx=$(mktemp -d "$STATE/agent-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/wheelhouse" "$ctx/agent/src" "$ctx/roles/agent/files" "$ctx/pkg"
# Build our own wheel from a copy, so that the working tree gets no build/ or egg-info.
cp agent/pyproject.toml agent/README.md "$ctx/pkg/"
tar -C agent/src -c --exclude=__pycache__ --exclude='*.pyc' workflow_agent | tar -C "$ctx/pkg" -x
mkdir -p "$ctx/pkg/src" && mv "$ctx/pkg/workflow_agent" "$ctx/pkg/src/"
SOURCE_DATE_EPOCH=315532800 "$PY" -m pip wheel -q --no-deps \
  --wheel-dir "$ctx/wheelhouse" "$ctx/pkg" >/dev/null
agent_wheel=$(ls "$ctx"/wheelhouse/selfhosted_workflow_agent-*.whl)
if [ ! -f "$deps/.done" ]; then
  echo "agent image: downloading dependency wheels (cp$pyver, $machine)"
  rm -rf "$deps"; mkdir -p "$deps"
  "$PY" -m pip download -q --dest "$deps" --only-binary=:all: --implementation cp \
    --python-version "$pyver" --abi "cp$pyver" --abi abi3 --abi none \
    --platform "manylinux2014_$machine" --platform "manylinux_2_28_$machine" --platform any \
    -c "$CONSTRAINTS" "${agent_wheel}[docker,kubernetes]" >/dev/null
  rm -f "$deps"/selfhosted_workflow_agent-*.whl
  touch "$deps/.done"
fi
cp "$deps"/*.whl "$ctx/wheelhouse/"
cp Containerfile "$ctx/"
cp "$CONSTRAINTS" "$ctx/roles/agent/files/"
cp -r "$ctx/pkg/pyproject.toml" "$ctx/pkg/README.md" "$ctx/agent/"
cp -r "$ctx/pkg/src/workflow_agent" "$ctx/agent/src/"
rm -rf "$ctx/pkg"

hash=$({ echo "$base_id $VERSION $SOURCE"; cat Containerfile scripts/build-agent-image.sh "$CONSTRAINTS";
         (cd "$ctx" && ls wheelhouse && find agent -type f | LC_ALL=C sort | xargs cat); } \
       | sha256sum | cut -c1-16)
have=$(image_hash "$IMAGE:$VERSION")
if [ "$have" = "$hash" ]; then
  $DOCKER tag "$IMAGE:$VERSION" "$IMAGE:latest"
  echo "agent image: $IMAGE:$VERSION up to date"
  exit 0
fi

old_id=$(image_id "$IMAGE:$VERSION")
echo "agent image: building $IMAGE:$VERSION from $BASE"
# BuildKit: the build stage stays in the build cache instead of as an untagged image.
DOCKER_BUILDKIT=1 $DOCKER build -q --label "$HASH_LABEL=$hash" \
  --build-arg "BASE_IMAGE=$BASE" --build-arg "VERSION=$VERSION" --build-arg "SOURCE=$SOURCE" \
  -t "$IMAGE:$VERSION" -t "$IMAGE:latest" -f "$ctx/Containerfile" "$ctx" >/dev/null
drop_replaced "$old_id"
size=$($DOCKER image inspect -f '{{.Size}}' "$IMAGE:$VERSION")
echo "agent image: $IMAGE:$VERSION built ($((size / 1000000)) MB)"
