#!/usr/bin/env bash
# The execution-environment route, as a user takes it: `ansible-builder build` of
# tests/galaxy/execution-environment.yml (beside it, the ansible.cfg of the Galaxy server to
# install from), then the collection's plan playbook run in the image with `docker run`.
#
# The collection comes into the image from the suite's Galaxy server (scripts/galaxy-server.sh),
# by name, as from galaxy.ansible.com: the build runs with --network host, so the build
# containers reach that server on loopback (and the package index as the host does; the base
# image carries the host's pip settings, see tests/images/ee-base/Containerfile).
# The image carries a label with the hash of its inputs (the definition, the base image, the
# collections the server serves, ansible-builder's pins); an image whose label matches is reused,
# so a second run only runs the checks. ansible-builder comes with galaxy-importer.
#
# Usage: ee.sh IMPORTER_VENV COLLECTIONS_PATH WORKDIR GALAXY_ANSIBLE_CFG
#   COLLECTIONS_PATH: the by-name install from that server (scripts/galaxy.sh), to compare with.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=$1 cols=$2 work=$3 galaxy_cfg=$4
IMAGE=local/workflow-agent-ee:latest
. scripts/lib.sh
fail() { echo "execution environment: $*" >&2; exit 1; }
ours=ansible_collections/selfhosted/workflow_agent
[ -f "$galaxy_cfg" ] || fail "no Galaxy server config at $galaxy_cfg (is the server running?)"
rm -rf "$work"; mkdir -p "$work"; chmod 0700 "$work"; mkdir "$work/def"
# The definition as a user has it: beside it, the ansible.cfg of their Galaxy server (0600: it
# holds the server's credentials).
cp tests/galaxy/execution-environment.yml "$work/def/"
install -m 0600 "$galaxy_cfg" "$work/def/ansible.cfg"
# The Helm CLI the agent_k8s role needs on the controller (scripts/build-go-tool.sh: cached, or
# waits for the background build).
helm=$(bash scripts/build-go-tool.sh helm) || fail "the Helm CLI could not be built (above)"
install -m 0755 "$helm" "$work/def/helm"
def=$work/def/execution-environment.yml

"$venv/bin/ansible-builder" create -f "$def" -c "$work/context" --output-filename Containerfile >/dev/null
cf=$work/context/Containerfile
grep -qx 'ARG EE_BASE_IMAGE="local/debian12-ee-base:latest"' "$cf" || fail "$cf: not built FROM the EE base image"
grep -qx 'ARG PKGMGR="/usr/bin/apt-get"' "$cf" || fail "$cf: not apt-get"
grep -q '^RUN .*ansible-galaxy collection install .*-r requirements.yml' "$cf" || fail "$cf: installs no collections"
grep -q '^RUN .*introspect.py introspect .*--write-pip=' "$cf" || fail "$cf: no introspection of the collections' requirements"
# The Galaxy credentials stay in the galaxy stage, which the final image does not copy from whole.
[ "$(awk '/^FROM /{stage=$NF} /ansible\.cfg/{print stage}' "$cf" | sort -u)" = galaxy ] \
  || fail "$cf: ansible.cfg outside the galaxy stage"
grep -q 'name: selfhosted.workflow_agent' "$work/context/_build/requirements.yml" \
  || fail "$work/context/_build/requirements.yml does not name selfhosted.workflow_agent"
rm -rf "$work/context"  # it holds a copy of ansible.cfg
"$venv/bin/ansible-builder" introspect "$cols" > "$work/introspect.yml"
"$venv/bin/python" - "$work/introspect.yml" <<'PY'
import re, sys, yaml
text = open(sys.argv[1]).read()
data = yaml.safe_load(text[text.index("---"):])
ours = lambda key: [e.split("#")[0].strip() for e in data.get(key) or []
                    if e.endswith("from collection selfhosted.workflow_agent")]
names = {re.split(r"[<>=!~ \[]", r)[0] for r in ours("python")}
# PyYAML is not there on purpose: ansible-builder counts it as present in every image.
want = {"pydantic", "packaging", "kubernetes"}
assert want <= names, f"introspect found {sorted(names)} for selfhosted.workflow_agent, want {sorted(want)}"
system = ours("system")
assert any(s.startswith("python3-pip") for s in system), f"introspect found system deps {system}"
print(f"introspect: selfhosted.workflow_agent needs {sorted(names)} and {system}")
PY

base_id=$($DOCKER image inspect -f '{{.Id}}' local/debian12-ee-base:latest 2>/dev/null) \
  || fail "base image local/debian12-ee-base:latest is missing (run: make images)"
hash=$({ echo "$base_id"; cat tests/galaxy/execution-environment.yml requirements/galaxy-importer.txt; sha256sum "$helm"
         find "$cols/ansible_collections" -mindepth 3 -maxdepth 3 \( -name MANIFEST.json -o -name FILES.json \) \
           | LC_ALL=C sort | xargs cat; } | sha256sum | cut -c1-16)
have=$(image_hash "$IMAGE")
if [ "$have" = "$hash" ]; then
  echo "execution environment: $IMAGE up to date"
else
  old_id=$(image_id "$IMAGE")
  echo "execution environment: ansible-builder build $IMAGE (log: $work/build.log)"
  t=$(date +%s)
  # ansible-builder runs `docker` from PATH: here the Debian client, whose BuildKit keeps the
  # intermediate stages (the galaxy stage with ansible.cfg) out of the image list.
  mkdir -p "$work/bin"; ln -s "$DOCKER" "$work/bin/docker"
  # The build cache keys the galaxy stage's install on its files, not on what the server serves
  # (a rebuilt collection keeps its version): this comment makes it install again when that
  # changed. The base stage (ansible-core, ansible-runner) stays cached.
  echo "# the collections this build installs: $hash" >> "$work/def/ansible.cfg"
  PATH=$work/bin:$PATH DOCKER_BUILDKIT=1 "$venv/bin/ansible-builder" build -f "$def" -c "$work/build-context" \
    -t "$IMAGE" --container-runtime docker -v 3 \
    --extra-build-cli-args "--network host --label $HASH_LABEL=$hash" > "$work/build.log" 2>&1 \
    || { tail -n 40 "$work/build.log" >&2; fail "ansible-builder build failed (above; log: $work/build.log)"; }
  rm -rf "$work/build-context"  # it holds a copy of ansible.cfg
  drop_replaced "$old_id"
  echo "execution environment: built in $(( $(date +%s) - t )) s ($(( $($DOCKER image inspect -f '{{.Size}}' "$IMAGE") / 1000000 )) MB)"
fi

# The image holds the build the server served, its Python and system requirements, and not the
# Galaxy credentials.
$DOCKER run --rm "$IMAGE" cat "/usr/share/ansible/collections/$ours/MANIFEST.json" > "$work/MANIFEST.json" \
  || fail "$IMAGE has no selfhosted.workflow_agent in /usr/share/ansible/collections (above)"
cmp -s "$work/MANIFEST.json" "$cols/$ours/MANIFEST.json" \
  || fail "$IMAGE holds another build of selfhosted.workflow_agent than the server serves"
$DOCKER run --rm "$IMAGE" bash -c 'python3 -c "import pydantic, packaging, kubernetes, yaml" && dpkg-query -W python3-pip' \
  >/dev/null || fail "$IMAGE lacks the collection's Python packages or python3-pip (above)"
$DOCKER run --rm "$IMAGE" test ! -e /etc/ansible/ansible.cfg || fail "$IMAGE holds the build's ansible.cfg"
want_helm=$("$helm" version --template '{{.Version}}')
have_helm=$($DOCKER run --rm "$IMAGE" helm version --template '{{.Version}}') \
  || fail "$IMAGE has no working helm (above)"
[ "$have_helm" = "$want_helm" ] || fail "$IMAGE has helm $have_helm, not $want_helm"

# The plan playbook, by its FQCN, against a small inventory: a and b weighted in it, c weighed
# from its own CPUs and memory by the agent role's platform look (a raw command in the container),
# with a memory unit so large that its weight is 1.
cat > "$work/inventory.yml" <<'EOF'
workflow_agents:
  hosts:
    a: {workflow_agent_weight: 3}
    b: {workflow_agent_weight: 1}
    c: {workflow_agent_weight_memory_mb: 1000000000}
  vars:
    ansible_connection: local
EOF
rc=0
$DOCKER run --rm -v "$work/inventory.yml:/runner/inventory.yml:ro" "$IMAGE" \
  ansible-playbook -i inventory.yml selfhosted.workflow_agent.plan \
  -e workflow_agent_pool_target=9 -e workflow_agent_slots_per_instance=2 > "$work/plan.log" 2>&1 || rc=$?
for want in 'a: 3 instance(s), 5 slot(s) (weight 3)' 'b: 1 instance(s), 2 slot(s) (weight 1)' \
            'c: 1 instance(s), 2 slot(s) (weight 1)' 'total: 9 slot(s) over 3 host(s), 2 per instance (target 9, cap 150)'; do
  grep -qF "\"$want\"" "$work/plan.log" || { cat "$work/plan.log" >&2; fail "the plan run in $IMAGE (exit $rc) did not show: $want"; }
done
[ "$rc" = 0 ] || { cat "$work/plan.log" >&2; fail "the plan run in $IMAGE exited $rc"; }
echo "execution environment: the plan in $IMAGE: a 5, b 2, c 2 slots"
