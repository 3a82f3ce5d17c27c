"""The agent image builds from the INSTALLED collection (issue 25): the Galaxy tarball, extracted,
is the whole build context, its Containerfile the recipe, the way a user who has only the
collection builds the image for their registry (playbooks/image.yml does the same with
community.docker).

The build reaches a package index the way a user's does, through PIP_INDEX_URL. HTTPS from build
containers fails on this machine, so the index is a local one on 127.0.0.1 (the build runs with
--network host) holding the pinned dependency wheels that scripts/build-agent-image.sh fetched
with the machine's pip configuration, setuptools for the isolated build, and impostor wheels
under the agent's names: the build must not ask the index for the agent and must install the
agent built from the tarball's agent/. About 1-2 minutes (the tarball, then one image build)."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from index_harness import POISON, impostor_wheel, serve_index

REPO = Path(__file__).resolve().parents[2]
DOCKER = shutil.which("/usr/bin/docker") or shutil.which("docker") or "docker"
BASE = "local/debian12-plain:latest"
DIST = "selfhosted-workflow-agent"
CONSTRAINTS = "roles/agent/files/wheelhouse-constraints.txt"


def docker(*args: str, check: bool = True, timeout: float = 300, **kw):
    return subprocess.run(
        [DOCKER, *args], capture_output=True, text=True, check=check, timeout=timeout, **kw
    )


def agent_version() -> str:
    text = (REPO / "agent/src/workflow_agent/__init__.py").read_text()
    return text.split('__version__ = "', 1)[1].split('"', 1)[0]


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> Path:
    """The collection root as `ansible-galaxy collection install` lays it out from the tarball."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [str(Path(sys.executable).with_name("ansible-galaxy")), "collection", "build",
         "--output-path", str(dist), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    [tarball] = dist.glob("selfhosted-workflow_agent-*.tar.gz")
    root = tmp_path_factory.mktemp("ansible_collections") / "selfhosted" / "workflow_agent"
    with tarfile.open(tarball) as tar:
        tar.extractall(root, filter="data")
    return root


@pytest.fixture(scope="module")
def dependency_wheels() -> list[Path]:
    """The image's pinned dependency wheels, fetched on the host by scripts/build-agent-image.sh
    (its cache is keyed by the constraints, the agent's pyproject.toml and the base's Python)."""
    if docker("info", check=False).returncode != 0:
        pytest.skip("the Docker engine does not answer (run: bash scripts/docker-engine.sh)")
    if docker("image", "inspect", BASE, check=False).returncode != 0:
        pytest.skip(f"{BASE} is missing (run: make images)")
    build = subprocess.run(
        ["bash", str(REPO / "scripts/build-agent-image.sh")],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    state = Path(os.environ.get("WORKFLOW_AGENT_STATE", "/var/tmp/workflow-agent-dev"))
    probe = "import platform, sys; print('%d%d %s' % (*sys.version_info[:2], platform.machine()))"
    pyver = docker("run", "--rm", "--entrypoint", "python3", BASE, "-c", probe).stdout
    inputs = (REPO / CONSTRAINTS).read_bytes() + (REPO / "agent/pyproject.toml").read_bytes()
    key = hashlib.sha256(inputs + pyver.encode()).hexdigest()[:16]
    cache = state / "agent-image" / f"wheels-{key}"
    assert (cache / ".done").exists(), f"scripts/build-agent-image.sh left no {cache}"
    return sorted(cache.glob("*.whl"))


def test_the_tarball_is_the_build_context(collection, dependency_wheels, tmp_path):
    # What the issue found: the Containerfile read a file the tarball does not ship.
    assert not (collection / "requirements").exists()
    assert (collection / "Containerfile").is_file() and (collection / ".dockerignore").is_file()
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
         "--dest", str(tmp_path / "setuptools"), "setuptools>=77"],
        check=True, timeout=600,
    )  # fmt: skip
    wheels = [*dependency_wheels, *(tmp_path / "setuptools").glob("*.whl")]
    wheels += [
        impostor_wheel(tmp_path / "impostors", DIST, agent_version()),
        impostor_wheel(tmp_path / "impostors", DIST, "99.0"),
        impostor_wheel(tmp_path / "impostors", "workflow-agent", "99.0"),
    ]
    tag = f"wfa-tarball-image:{secrets.token_hex(3)}"
    with serve_index(tmp_path / "index", wheels) as (url, served):
        try:
            build = docker(
                "build", "--progress", "plain", "--network", "host",
                "-f", str(collection / "Containerfile"),
                "--build-arg", f"BASE_IMAGE={BASE}",
                "--build-arg", f"PIP_INDEX_URL={url}",
                "--build-arg", f"VERSION={agent_version()}",
                "-t", tag, str(collection),
                check=False, timeout=1800, env={**os.environ, "DOCKER_BUILDKIT": "1"},
            )  # fmt: skip
            log = build.stdout + build.stderr
            assert build.returncode == 0, log[-5000:]
            # The shipped .dockerignore keeps the context to what the Containerfile copies.
            size = re.search(r"transferring context: ([\d.]+)([kMG]?B)", log)
            assert size and size.group(2) in ("B", "kB"), log[:2000]
            # Dependencies came from the index; the agent never did.
            wanted = {"/simple/pydantic/", "/simple/kubernetes/", "/simple/setuptools/"}
            assert wanted <= set(served)
            assert not [p for p in served if "workflow-agent" in p or "workflow_agent" in p], served
            out = docker("run", "--rm", tag, "workflow-agent", "version").stdout
            assert out.startswith(f"workflow-agent {agent_version()} ")
            check = (
                "import importlib.metadata as m, workflow_agent as w, docker, kubernetes.client; "
                f"print(m.version('{DIST}'), getattr(w, 'MARK', 'real'))"
            )
            got = docker("run", "--rm", tag, "python", "-c", check).stdout.split()
            assert got == [agent_version(), "real"], POISON
        finally:
            docker("rmi", tag, check=False)
