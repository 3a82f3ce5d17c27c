"""Rewrite a `docker save` archive so that `kind build node-image` takes every image in it as
built here: kind reads the first of `repositories` / `manifest.json` in the archive, and from
`repositories` every repo:tag (pkg/build/nodeimage/internal/container/docker/archive.go). Any
image kind requires that is not "built" it fetches from its registry, which this machine cannot
reach. `repositories` goes first and also names the images kind requires but this node image does
not ship (kindnetd and the local-path provisioner, replaced by manifests/): declared, never
loaded, so kind fetches nothing. `ctr import` then loads what manifest.json holds.

usage: archive.py IN.tar OUT.tar [DECLARED_REF...]
"""

import io
import json
import sys
import tarfile


def main(src: str, dst: str, declared: list[str]) -> int:
    with tarfile.open(src) as tin:
        members = tin.getmembers()
        manifest = json.load(tin.extractfile("manifest.json"))
        repos: dict[str, dict[str, str]] = {}
        for image in manifest:
            layer = image["Layers"][-1].split("/")[0]
            for ref in image.get("RepoTags") or []:
                name, tag = ref.rsplit(":", 1)
                repos.setdefault(name, {})[tag] = layer
        for ref in declared:
            name, tag = ref.rsplit(":", 1)
            repos.setdefault(name, {})[tag] = "declared-not-shipped"
        data = json.dumps(repos, sort_keys=True).encode()
        with tarfile.open(dst, "w") as tout:
            info = tarfile.TarInfo("repositories")
            info.size, info.mode = len(data), 0o644
            tout.addfile(info, io.BytesIO(data))
            for m in members:
                if m.name != "repositories":
                    tout.addfile(m, tin.extractfile(m) if m.isfile() else None)
    print(" ".join(sorted(f"{n}:{t}" for n, tags in repos.items() for t in tags)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
