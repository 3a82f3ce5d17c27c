#!/usr/bin/env bash
# Build local/workflow-emulator:latest from tests/emulator/Containerfile.
# Wheels are downloaded on the host (cp311 manylinux x86_64, pinned by
# requirements/constraints.txt) and cached under $STATE; the image carries a label with the hash
# of its inputs, and an image whose label matches is reused, so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
. ../../scripts/lib.sh
IMAGE=${EMULATOR_IMAGE:-local/workflow-emulator:latest}
BASE=${BASE_IMAGE:-local/debian12-plain:latest}
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
CONSTRAINTS=$ROOT/requirements/constraints.txt
mkdir -p "$STATE"

base_id=$($DOCKER image inspect -f '{{.Id}}' "$BASE" 2>/dev/null) \
  || { echo "emulator image: base image $BASE is missing (run: bash scripts/images.sh)" >&2; exit 1; }

# Dependency wheels, cached per constraints file.
wheels=$STATE/emulator-wheels/$(sha256sum "$CONSTRAINTS" pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f "$wheels/.done" ]; then
  echo "emulator image: downloading wheels"
  rm -rf "$wheels"; mkdir -p "$wheels"
  "$PY" -m pip download -q --dest "$wheels" --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.11 --implementation cp --abi cp311 -c "$CONSTRAINTS" \
    starlette uvicorn PyJWT prometheus-client
  touch "$wheels/.done"
fi

hash=$({ echo "$base_id"; ls "$wheels"; cat Containerfile build-image.sh pyproject.toml;
         find src/workflow_emulator -type f ! -name '*.pyc' | LC_ALL=C sort | xargs cat; } | sha256sum | cut -c1-16)
have=$(image_hash "$IMAGE")
if [ "$have" = "$hash" ]; then
  echo "emulator image: $IMAGE up to date"
  exit 0
fi

ctx=$(mktemp -d "$STATE/emulator-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
mkdir "$ctx/wheels"
cp "$wheels"/*.whl "$ctx/wheels/"
# Build our own wheel from a copy, so that the working tree gets no build/ or egg-info.
mkdir "$ctx/pkg"
cp -r pyproject.toml src "$ctx/pkg/"
"$PY" -m pip wheel -q --no-deps --wheel-dir "$ctx/wheels" "$ctx/pkg" >/dev/null
rm -rf "$ctx/pkg"
cp Containerfile "$ctx/"
echo "emulator image: building $IMAGE"
$DOCKER build -q --label "$HASH_LABEL=$hash" --build-arg "BASE_IMAGE=$BASE" \
  -t "$IMAGE" -f "$ctx/Containerfile" "$ctx" >/dev/null
echo "emulator image: $IMAGE built"
