"""The collection as Galaxy users get it, from a real Galaxy v3 API (Pulp + pulp_ansible).

scripts/galaxy.sh starts the server (scripts/galaxy-server.sh) and runs this module with
WFA_GALAXY_DIR (the server's state: env, ansible.cfg) and WFA_GALAXY_TARBALL (the tarball just
built). The session fixture publishes that tarball, an older version of it (the same content with
the version rewritten), and the dependencies repacked from PyPI's `ansible` bundle; every test then
installs into an empty collections path with the bundle hidden, so everything comes from the server.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

GALAXY_DIR = os.environ.get("WFA_GALAXY_DIR")
TARBALL = os.environ.get("WFA_GALAXY_TARBALL")
pytestmark = pytest.mark.skipif(
    not (GALAXY_DIR and TARBALL),
    reason="needs the Galaxy server and tarball of scripts/galaxy.sh (make galaxy)",
)

NAME = "selfhosted.workflow_agent"
OLD = "0.0.1"  # the older published version the upgrade starts from


def _env_file() -> dict[str, str]:
    lines = Path(GALAXY_DIR, "env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


class Server:
    def __init__(self, tmp: Path):
        env = _env_file()
        self.url = env["GALAXY_URL"]
        self.api = env["PULP_API"]
        self._auth = "Basic " + base64.b64encode(f"admin:{env['ADMIN_PASSWORD']}".encode()).decode()
        self.tmp = tmp
        # The v3 API's canonical collection index (the per-distribution paths redirect there).
        root, base_path = self.url.rstrip("/").rsplit("/", 1)
        self.index = f"{root}/default/api/v3/plugin/ansible/content/{base_path}/collections/index"

    def request(self, method: str, url: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - loopback Pulp
        req.add_header("Authorization", self._auth)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - loopback Pulp
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else {}
        except urllib.error.HTTPError as e:
            return e.code, {}

    def wait_task(self, href: str) -> None:
        base = self.api.split("/pulp/api/v3")[0]
        for _ in range(240):
            _, task = self.request("GET", base + href)
            if task.get("state") == "completed":
                return
            if task.get("state") in ("failed", "canceled"):
                raise AssertionError(f"Pulp task {href} {task['state']}: {task.get('error')}")
            time.sleep(0.5)
        raise AssertionError(f"Pulp task {href} did not finish in 120 s")

    def versions(self, fqcn: str) -> list[str]:
        ns, name = fqcn.split(".")
        code, body = self.request("GET", f"{self.index}/{ns}/{name}/versions/?limit=100")
        return sorted(v["version"] for v in body.get("data", [])) if code == 200 else []

    def remove(self, fqcn: str) -> None:
        """Delete every published version (and its artifacts), so a rebuilt tarball of the same
        version can be published again: the database outlives runs."""
        ns, name = fqcn.split(".")
        code, body = self.request("DELETE", f"{self.index}/{ns}/{name}/")
        if code == 404:
            return
        assert code == 202, f"DELETE {fqcn}: HTTP {code}"
        self.wait_task(body["task"])
        cleanup = {"orphan_protection_time": 0}
        code, body = self.request("POST", f"{self.api}/orphans/cleanup/", cleanup)
        assert code == 202, f"orphan cleanup: HTTP {code}"
        self.wait_task(body["task"])

    def env(self, collections: Path) -> dict[str, str]:
        return {
            **os.environ,
            "ANSIBLE_CONFIG": str(Path(GALAXY_DIR, "ansible.cfg")),
            "ANSIBLE_COLLECTIONS_PATH": str(collections),
            # Hide PyPI's `ansible` bundle: dependencies must come from the server.
            "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
            "ANSIBLE_GALAXY_CACHE_DIR": str(self.tmp / "galaxy-cache"),
            "ANSIBLE_LOCAL_TEMP": str(self.tmp / "ansible-tmp"),
        }

    def galaxy(self, *args: str, collections: Path, cwd: Path | None = None) -> str:
        proc = subprocess.run(
            ["ansible-galaxy", "collection", *args],
            env=self.env(collections),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"ansible-galaxy collection {' '.join(args)} failed:\n{out}"
        return out

    def publish(self, tarball: Path) -> None:
        self.galaxy("publish", str(tarball), collections=self.tmp / "none")


def repack(src: Path, out: Path, version: str | None = None) -> Path:
    """Rebuild an installed (or unpacked) collection as a tarball: MANIFEST.json's
    collection_info becomes galaxy.yml, optionally with another version."""
    work = out / "src" / src.name
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work, ignore=shutil.ignore_patterns("__pycache__"))
    info = json.loads((work / "MANIFEST.json").read_text())["collection_info"]
    galaxy_yml = {k: v for k, v in info.items() if v not in (None, [], {}, "")}
    if version:
        galaxy_yml["version"] = version
    (work / "MANIFEST.json").unlink()
    (work / "FILES.json").unlink()
    (work / "galaxy.yml").write_text(yaml.safe_dump(galaxy_yml))
    dist = out / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["ansible-galaxy", "collection", "build", "--force", "--output-path", str(dist), str(work)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"repacking {src}:\n{proc.stdout}{proc.stderr}"
    return dist / f"{info['namespace']}-{info['name']}-{galaxy_yml['version']}.tar.gz"


def bundled(fqcn: str) -> Path:
    """Where PyPI's `ansible` bundle (in this venv) has a collection."""
    import ansible_collections

    ns, name = fqcn.split(".")
    for root in ansible_collections.__path__:
        path = Path(root, ns, name)
        if (path / "MANIFEST.json").is_file():
            return path
    raise AssertionError(f"{fqcn} is not in the venv's ansible bundle")


def manifest(collections: Path, fqcn: str) -> dict:
    ns, name = fqcn.split(".")
    path = collections / "ansible_collections" / ns / name / "MANIFEST.json"
    assert path.is_file(), f"{fqcn} is not installed in {collections}"
    return json.loads(path.read_text())["collection_info"]


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Server:
    tmp = tmp_path_factory.mktemp("galaxy")
    srv = Server(tmp)
    tarball = Path(TARBALL)
    this = json.loads(_member(tarball, "MANIFEST.json"))["collection_info"]
    # Dependencies, and theirs (community.docker needs community.library_inventory_filtering_v1):
    # repacked from the bundle, published once (they outlive runs with the database).
    todo, seen = list(this["dependencies"]), set()
    while todo:
        dep = todo.pop()
        if dep in seen:
            continue
        seen.add(dep)
        path = bundled(dep)
        todo += json.loads((path / "MANIFEST.json").read_text())["collection_info"]["dependencies"]
        if not srv.versions(dep):
            srv.publish(repack(path, tmp / "deps"))
    # This collection: the tarball just built, and an older version of the same content.
    srv.remove(NAME)
    unpacked = tmp / "unpacked" / "workflow_agent"
    unpacked.mkdir(parents=True)
    with tarfile.open(tarball) as tf:
        tf.extractall(unpacked, filter="data")
    srv.publish(repack(unpacked, tmp / "old", version=OLD))
    srv.publish(tarball)
    assert srv.versions(NAME) == sorted([OLD, this["version"]])
    srv.version = this["version"]
    srv.dependencies = this["dependencies"]
    return srv


def _member(tarball: Path, name: str) -> str:
    with tarfile.open(tarball) as tf:
        return tf.extractfile(name).read().decode()


def test_install_by_name_resolves_dependencies_from_the_server(server, tmp_path):
    out = server.galaxy("install", NAME, "--no-cache", collections=tmp_path)
    assert manifest(tmp_path, NAME)["version"] == server.version
    assert server.dependencies, "galaxy.yml declares no dependency: nothing to resolve"
    host = server.url.split("/pulp_ansible/")[0]
    for dep in server.dependencies:
        assert manifest(tmp_path, dep)["version"], dep
        ns, name = dep.split(".")
        assert f"Downloading {host}/" in out and f"/artifacts/{ns}-{name}-" in out, out
    # Every file of the install matches what the server serves.
    out = server.galaxy("verify", NAME, collections=tmp_path)
    assert f"Successfully verified that checksums for '{NAME}:{server.version}'" in out, out


@pytest.mark.parametrize("route", ["tarball", "git"])
def test_install_from_a_file_or_git_with_dependencies_from_the_server(server, tmp_path, route):
    # The README's routes from a checkout: the tarball built from it, or the git repository.
    source = TARBALL if route == "tarball" else f"git+file://{Path(__file__).resolve().parents[2]}"
    out = server.galaxy("install", source, "--no-cache", collections=tmp_path)
    assert manifest(tmp_path, NAME)["version"] == server.version
    for dep in server.dependencies:
        assert manifest(tmp_path, dep)["version"], f"{dep} not installed:\n{out}"


def test_requirements_file_with_a_version_range(server, tmp_path):
    req = tmp_path / "requirements.yml"
    in_range = {"name": NAME, "version": f">={OLD},<{server.version}"}
    req.write_text(yaml.safe_dump({"collections": [in_range]}))
    cols = tmp_path / "cols"
    server.galaxy("install", "-r", str(req), "--no-cache", collections=cols)
    assert manifest(cols, NAME)["version"] == OLD  # the newest in range, not the newest published


def test_upgrade_from_an_older_published_version(server, tmp_path):
    server.galaxy("install", f"{NAME}:=={OLD}", "--no-cache", collections=tmp_path)
    assert manifest(tmp_path, NAME)["version"] == OLD
    out = server.galaxy("install", NAME, "--no-cache", collections=tmp_path)
    assert manifest(tmp_path, NAME)["version"] == OLD, "without --upgrade, install keeps it"
    assert "already installed" in out, out
    server.galaxy("install", "--upgrade", NAME, "--no-cache", collections=tmp_path)
    assert manifest(tmp_path, NAME)["version"] == server.version
