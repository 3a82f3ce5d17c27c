#!/usr/bin/env bash
# Build a kind node image here, from local parts only, and print its name. The steps are kind's
# own: its base image (images/base of the pinned kind module, rebuilt on Debian 12 with Debian's
# containerd, runc and CNI plugins: base/Containerfile), then `kind build node-image --type file`
# from a kubernetes-server tarball made of our Go-built binaries (kubeadm, kubelet and kubectl are
# the multi-call `kube` of tests/k8s) and image archives of the control-plane images, CoreDNS and
# pause, all built here (images/). A last layer puts the node image's pod network and storage
# manifests in place (manifests/). Nothing is pulled.
#   tests/kind/build-node.sh           build, or reuse the image whose input hash matches
# The image is local/wfa-kind-node:<kubernetes version>; its label holds the hash of every input.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=scripts/golib.sh
. scripts/golib.sh
HERE=tests/kind
log() { echo "kind-node: $*" >&2; }
die() { echo "kind-node: ERROR: $*" >&2; exit 1; }

KIND=$(bash scripts/build-go-tool.sh kind) || die "the kind CLI did not build"
COREDNS=$(bash scripts/build-go-tool.sh coredns) || die "CoreDNS did not build"
KUBE_BIN=$(bash tests/k8s/build.sh) || die "the Kubernetes binaries did not build"
[ -x "$KUBE_BIN/kubeadm" ] || die "$KUBE_BIN has no kubeadm"
KIND_SRC=$(go_module_dir tests/gotools/kind sigs.k8s.io/kind)
KUBE_VERSION=$("$KUBE_BIN/kubeadm" version -o short)
NODE_IMAGE=local/wfa-kind-node:$KUBE_VERSION
bash scripts/images.sh bookworm >&2 # local/debian12:latest, the base of every image here

# Every input, hashed: the binaries (their cache directories are named by their own input
# hashes), kind's files, and this directory.
hash=$({ echo "$KIND $COREDNS $KUBE_BIN $(image_hash local/debian12:latest)"
         find "$HERE" -type f ! -name '*.md' -print0 | LC_ALL=C sort -z | xargs -0 cat
         find "$KIND_SRC/images/base/files" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
       } | sha256sum | cut -c1-16)
if [ "$(image_hash "$NODE_IMAGE")" = "$hash" ]; then
  echo "$NODE_IMAGE"
  exit 0
fi
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/var/tmp}/wfa-kind-node.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

build() { # image context [tag...]: docker build of context/Containerfile, labelled with the hash
  local image=$1 ctx=$2
  shift 2
  local tags=(-t "$image") t
  for t in "$@"; do tags+=(-t "$t"); done
  $DOCKER build -q --label "$HASH_LABEL=$hash" "${tags[@]}" -f "$ctx/Containerfile" "$ctx" >/dev/null
}

log "base image from kind $("$KIND" version | awk '{print $2}')'s images/base"
mkdir -p "$work/base"
cp -r "$HERE/base/." "$work/base/"
cp -r --no-preserve=mode "$KIND_SRC/images/base/files" "$work/base/files"
build local/wfa-kind-base:latest "$work/base"

# The images kubeadm's config names, each from what builds it here; a name we do not know fails
# the build (a new kubeadm wants a new image).
mkdir -p "$work/kube" "$work/coredns" "$work/pause"
cp "$HERE/images/kube/"* "$work/kube/"
cp "$KUBE_BIN/kube" "$work/kube/kube"
cp "$HERE/images/coredns/Containerfile" "$work/coredns/"
cp "$COREDNS" "$work/coredns/coredns"
cp "$KUBE_BIN/pause" "$work/pause/pause"
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$work/pause/Containerfile"
kube_tags=() coredns_tags=() pause_tags=()
while read -r ref; do
  case ${ref%:*} in
    registry.k8s.io/kube-apiserver | registry.k8s.io/kube-controller-manager | \
      registry.k8s.io/kube-scheduler | registry.k8s.io/kube-proxy | registry.k8s.io/etcd)
      kube_tags+=("$ref") ;;
    registry.k8s.io/coredns/coredns) coredns_tags+=("$ref") ;;
    registry.k8s.io/pause) pause_tags+=("$ref") ;;
    *) die "kubeadm $KUBE_VERSION wants $ref, which nothing here builds" ;;
  esac
done < <("$KUBE_BIN/kubeadm" config images list --kubernetes-version "$KUBE_VERSION")
# kind's build also asks for containerd's sandbox image: base/Containerfile sets it to kubeadm's
# pause, listed above (a mismatch fails kind's build, naming the image it would fetch).
log "images: ${kube_tags[*]} ${coredns_tags[*]} ${pause_tags[*]}"
build local/wfa-kind-kube:latest "$work/kube" "${kube_tags[@]}"
build local/wfa-kind-coredns:latest "$work/coredns" "${coredns_tags[@]}"
build local/wfa-kind-pause:latest "$work/pause" "${pause_tags[@]}"

# kind requires its kindnetd and local-path images too: declared, not shipped (archive.py).
declared=$(grep -ho '"docker.io/kindest/[^"]*"' "$KIND_SRC"/pkg/build/nodeimage/const_{cni,storage}.go | tr -d '"')
[ "$(wc -w <<<"$declared")" = 3 ] || die "kind's default CNI and storage images changed: $declared"
srv=$work/tar/kubernetes/server/bin
mkdir -p "$srv"
echo "$KUBE_VERSION" >"$work/tar/kubernetes/version"
for b in kubeadm kubelet kubectl; do cp "$KUBE_BIN/kube" "$srv/$b"; done # regular files: kind reads no links
$DOCKER save "${kube_tags[@]}" "${coredns_tags[@]}" "${pause_tags[@]}" -o "$work/all.tar"
# shellcheck disable=SC2086 # the declared refs are words
python3 "$HERE/archive.py" "$work/all.tar" "$srv/kube-apiserver.tar" $declared >/dev/null
rm "$work/all.tar"
for t in kube-controller-manager kube-scheduler kube-proxy; do $DOCKER save "${pause_tags[0]}" -o "$srv/$t.tar"; done
tar -C "$work/tar" -c kubernetes | gzip -1 >"$work/kubernetes-server-linux-amd64.tar.gz"
rm -rf "$work/tar"

log "kind build node-image (log: $STATE/logs/kind-build-node.log)"
mkdir -p "$STATE/logs"
# kind runs `docker`: the engine's own client, whichever docker comes first on PATH.
if ! PATH=/usr/bin:$PATH TMPDIR=$work "$KIND" build node-image --type file \
  --base-image local/wfa-kind-base:latest --image local/wfa-kind-node:built \
  "$work/kubernetes-server-linux-amd64.tar.gz" >"$STATE/logs/kind-build-node.log" 2>&1; then
  tail -n 30 "$STATE/logs/kind-build-node.log" >&2
  die "kind build node-image failed"
fi
mkdir -p "$work/node"
sed "s/@KUBE_VERSION@/$KUBE_VERSION/g" "$HERE/manifests/default-cni.yaml" >"$work/node/default-cni.yaml"
cp "$HERE/manifests/default-storage.yaml" "$work/node/"
printf 'FROM local/wfa-kind-node:built\nCOPY default-cni.yaml default-storage.yaml /kind/manifests/\n' >"$work/node/Containerfile"
old=$(image_id "$NODE_IMAGE")
build "$NODE_IMAGE" "$work/node"
$DOCKER rmi local/wfa-kind-node:built >/dev/null
drop_replaced "$old"
log "$NODE_IMAGE built in $(($(date +%s) - start)) s"
echo "$NODE_IMAGE"
