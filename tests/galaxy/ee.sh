#!/usr/bin/env bash
# The execution-environment route, as far as it goes without a container registry:
# `ansible-builder create` renders a build context from tests/galaxy/execution-environment.yml,
# and `ansible-builder introspect` (the step the image build runs once the collections are in)
# finds this collection's Python and system requirements through its meta/execution-environment.yml.
# Usage: ee.sh IMPORTER_VENV COLLECTIONS_PATH WORKDIR   (ansible-builder comes with galaxy-importer)
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=$1 cols=$2 work=$3
fail() { echo "execution environment: $*" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work"
"$venv/bin/ansible-builder" create -f tests/galaxy/execution-environment.yml -c "$work/context" \
  --output-filename Containerfile
cf=$work/context/Containerfile
grep -qx 'ARG EE_BASE_IMAGE="local/debian12-plain:latest"' "$cf" || fail "$cf: not built FROM the base image"
grep -qx 'ARG PKGMGR="/usr/bin/apt-get"' "$cf" || fail "$cf: not apt-get"
grep -q '^RUN .*ansible-galaxy collection install .*-r requirements.yml' "$cf" || fail "$cf: installs no collections"
grep -q '^RUN .*introspect.py introspect .*--write-pip=' "$cf" || fail "$cf: no introspection of the collections' requirements"
grep -q 'name: selfhosted.workflow_agent' "$work/context/_build/requirements.yml" \
  || fail "$work/context/_build/requirements.yml does not name selfhosted.workflow_agent"
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
