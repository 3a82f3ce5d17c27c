"""The suite's OCI registry (tests/k8s/registry.sh) and the routes through it: what
scripts/push-images.sh pushes (the agent image, the chart as an OCI artifact), the test cluster's
containerd pulling an image from it (not a side-loaded import), and the image playbook
(selfhosted.workflow_agent.image) run from an installed collection tarball, building and pushing.

Real registry, real Docker engine, real cluster, real helm. Repositories and namespaces are
named wfa-reg-<random> and removed afterwards."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from index_harness import serve_index

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("WORKFLOW_AGENT_STATE", "/var/tmp/workflow-agent-dev"))
REGISTRY_LOG = STATE / "logs" / "registry.log"
STABLE_KUBECONFIG = Path("/var/tmp/workflow-agent-k8s/kubeconfig")
DOCKER = shutil.which("/usr/bin/docker") or shutil.which("docker") or "docker"
BIN = Path(sys.executable).parent
WAIT = 300  # seconds: a loaded 2-core machine shared with other test runs
# The registry's distribution API header on every answer.
API_HEADER = "registry/2.0"


def run(*cmd: str, check: bool = True, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def docker(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    return run(DOCKER, *args, check=check, timeout=timeout)


def agent_version() -> str:
    text = (REPO / "agent/src/workflow_agent/__init__.py").read_text()
    return text.split('__version__ = "', 1)[1].split('"', 1)[0]


def manifest_digest(addr: str, repository: str, tag: str) -> str | None:
    """The digest the registry serves for repository:tag, or None when it has no such tag."""
    accept = ", ".join(
        (
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "application/vnd.docker.distribution.manifest.v2+json",
        )
    )
    r = httpx.head(f"http://{addr}/v2/{repository}/manifests/{tag}", headers={"Accept": accept})
    return r.headers["Docker-Content-Digest"] if r.status_code == 200 else None


def delete_repository_tag(addr: str, repository: str, tag: str) -> None:
    """Remove what a test pushed (the registry runs with deletion enabled)."""
    digest = manifest_digest(addr, repository, tag)
    if digest:
        httpx.delete(f"http://{addr}/v2/{repository}/manifests/{digest}")


def run_agent_pod(
    kubectl: list[str], namespace: str, registry: str, repository: str, tag: str, digest: str
) -> None:
    """Run `workflow-agent version` in a pod from registry/repository:tag with imagePullPolicy
    Always; check its output, its imageID and that containerd fetched the tag from the registry."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "agent", "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "agent",
                    "image": f"{registry}/{repository}:{tag}",
                    "imagePullPolicy": "Always",
                    "command": ["workflow-agent", "version"],
                    "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
                }
            ],
        },
    }
    run(*kubectl, "apply", "-f", "-", input=json.dumps(pod))
    succeeded = "--for=jsonpath={.status.phase}=Succeeded"
    run(*kubectl, "-n", namespace, "wait", "pod/agent", succeeded, f"--timeout={WAIT}s")
    logs = run(*kubectl, "-n", namespace, "logs", "agent").stdout
    assert logs.startswith(f"workflow-agent {agent_version()} ")
    status = json.loads(run(*kubectl, "-n", namespace, "get", "pod", "agent", "-o", "json").stdout)
    # The content's digest (the CRI names it by the first repository containerd knew it from).
    assert status["status"]["containerStatuses"][0]["imageID"].endswith(f"@{digest}")
    pulls = [
        line
        for line in REGISTRY_LOG.read_text().splitlines()
        if f"http.request.uri=/v2/{repository}/manifests/{tag}" in line
        and 'http.request.useragent="containerd/' in line
        and "http.response.status=200" in line
    ]
    assert pulls, f"containerd never fetched {repository}:{tag} from the registry"


@pytest.fixture(scope="module")
def registry() -> str:
    if docker("info", check=False).returncode != 0:
        pytest.skip("the Docker engine does not answer (run: bash scripts/docker-engine.sh)")
    start = run("bash", str(REPO / "tests/k8s/registry.sh"), "start", timeout=1800)
    return start.stdout.strip()


@pytest.fixture(scope="module")
def pushed(registry) -> dict[str, str]:
    """What scripts/push-images.sh pushed: {WFA_AGENT_IMAGE: ..., WFA_CHART: ..., ...}."""
    version = agent_version()
    for image in (f"local/workflow-agent:{version}", "local/workflow-job:latest"):
        if docker("image", "inspect", image, check=False).returncode != 0:
            pytest.skip(f"{image} is missing (run: make images)")
    out = run("bash", str(REPO / "scripts/push-images.sh"), timeout=1800).stdout
    refs = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert refs["WFA_REGISTRY"] == registry
    return refs


@pytest.fixture(scope="module")
def helm() -> str:
    return run("bash", str(REPO / "scripts/build-go-tool.sh"), "helm", timeout=3600).stdout.strip()


@pytest.fixture(scope="module")
def kubectl() -> list[str]:
    kubeconfig = Path(os.environ.get("KUBECONFIG") or STABLE_KUBECONFIG)
    if not kubeconfig.exists():
        pytest.skip(f"no cluster: {kubeconfig} does not exist (make k8s-up)")
    binary = kubeconfig.resolve().parent / "kubectl"
    base = [str(binary) if binary.exists() else "kubectl", "--kubeconfig", str(kubeconfig)]
    probe = run(*base, "get", "--raw", "/readyz", check=False, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"the cluster of {kubeconfig} is not up: {probe.stderr.strip()[:200]}")
    return base


@pytest.fixture
def namespace(kubectl):
    name = f"wfa-reg-{secrets.token_hex(3)}"
    run(*kubectl, "create", "namespace", name)
    yield name
    run(*kubectl, "delete", "namespace", name, "--wait=false", check=False)


def test_registry_serves_the_distribution_api(registry):
    """/v2/ answers 200 with the distribution API header, on loopback; start again reuses the
    running registry (same pid) and status agrees."""
    assert re.fullmatch(r"127\.0\.0\.1:\d+", registry)
    r = httpx.get(f"http://{registry}/v2/")
    assert r.status_code == 200
    assert r.headers["Docker-Distribution-Api-Version"] == API_HEADER
    pid = (STATE / "registry" / "registry.pid").read_text()
    again = run("bash", str(REPO / "tests/k8s/registry.sh"), "start")
    assert again.stdout.strip() == registry
    assert "already up" in again.stderr
    assert (STATE / "registry" / "registry.pid").read_text() == pid
    assert run("bash", str(REPO / "tests/k8s/registry.sh"), "status", check=False).returncode == 0


def test_push_images_puts_the_agent_image_and_the_chart_in_the_registry(
    registry, pushed, helm, tmp_path
):
    """The agent image under its version, with the same content as the local build; the chart as
    an OCI artifact that `helm show chart` and `helm pull` read back by reference."""
    version = agent_version()
    assert pushed["WFA_AGENT_IMAGE"] == f"{registry}/selfhosted/workflow-agent:{version}"
    digest = manifest_digest(registry, "selfhosted/workflow-agent", version)
    assert digest, "the registry has no selfhosted/workflow-agent:" + version
    # Docker recorded the same digest for the local image when it pushed it.
    repo_digests = json.loads(docker("image", "inspect", "-f", "{{json .RepoDigests}}",
                                     f"local/workflow-agent:{version}").stdout)  # fmt: skip
    assert f"{registry}/selfhosted/workflow-agent@{digest}" in repo_digests
    assert manifest_digest(registry, "selfhosted/workflow-job", "latest")

    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp_path / "helm"),
        "HELM_CONFIG_HOME": str(tmp_path / "helm"),
    }
    chart = pushed["WFA_CHART"]
    assert chart == f"oci://{registry}/charts/workflow-agent"
    shown = run(
        helm,
        "show",
        "chart",
        chart,
        "--version",
        pushed["WFA_CHART_VERSION"],
        "--plain-http",
        env=env,
    )
    meta = dict(
        line.split(": ", 1) for line in shown.stdout.splitlines() if re.match(r"^\w+: ", line)
    )
    assert meta["name"] == "workflow-agent"
    assert meta["version"] == pushed["WFA_CHART_VERSION"]
    run(helm, "pull", chart, "--version", pushed["WFA_CHART_VERSION"], "--plain-http",
        "--destination", str(tmp_path), env=env)  # fmt: skip
    tgz = tmp_path / f"workflow-agent-{pushed['WFA_CHART_VERSION']}.tgz"
    listing = run("tar", "-tzf", str(tgz)).stdout.split()
    assert "workflow-agent/Chart.yaml" in listing
    assert "workflow-agent/values.yaml" in listing


def test_the_cluster_pulls_the_agent_image_from_the_registry(registry, pushed, kubectl, namespace):
    """A tag nobody imported, imagePullPolicy Always: the pod runs the agent only if the node's
    containerd pulled it from the registry over plain HTTP. The registry's log shows containerd
    fetching that manifest by its tag, and the pod's imageID carries the registry's digest."""
    repository = f"{namespace}/workflow-agent"
    tag = secrets.token_hex(4)
    ref = f"{registry}/{repository}:{tag}"
    docker("tag", pushed["WFA_AGENT_IMAGE"], ref)
    try:
        docker("push", "-q", ref)
        digest = manifest_digest(registry, repository, tag)
        assert digest
        run_agent_pod(kubectl, namespace, registry, repository, tag, digest)
    finally:
        docker("rmi", ref, check=False)
        delete_repository_tag(registry, repository, tag)


@pytest.fixture(scope="module")
def installed_collection(tmp_path_factory) -> Path:
    """The collection as a user gets it: built into a tarball and installed from it (no
    dependency resolution: community.docker comes from the venv's ansible bundle)."""
    base = tmp_path_factory.mktemp("installed")
    ansible = str(BIN / "ansible-galaxy")
    run(ansible, "collection", "build", "--force", "--output-path", str(base / "dist"), str(REPO))
    (tarball,) = (base / "dist").glob("selfhosted-workflow_agent-*.tar.gz")
    # --force: ansible-galaxy counts a copy in the user's own collections path as installed
    # already, and would install nothing here.
    run(ansible, "collection", "install", "--offline", "--no-deps", "--force", "-p",
        str(base / "cols"), str(tarball), cwd=base)  # fmt: skip
    root = base / "cols" / "ansible_collections" / "selfhosted" / "workflow_agent"
    assert (root / "playbooks" / "image.yml").is_file()
    assert not (root / "scripts").exists() and not (root / "requirements").exists()
    return base / "cols"


def image_playbook(cols: Path, tmp_path: Path, variables: dict) -> tuple[int, dict, str]:
    """ansible-playbook selfhosted.workflow_agent.image from `cols`; (rc, json report, output)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps(variables))
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(cols),
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
        "ANSIBLE_NOCOLOR": "1",
    }
    proc = run(str(BIN / "ansible-playbook"), "selfhosted.workflow_agent.image", "-e", f"@{extra}",
               check=False, timeout=1800, env=env, cwd=tmp_path)  # fmt: skip
    try:
        report = json.loads(proc.stdout[proc.stdout.index("{") :])
    except ValueError:
        pytest.fail(f"no JSON report:\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, report, proc.stdout + proc.stderr


def failures(report: dict) -> list[str]:
    return [
        result["msg"]
        for play in report["plays"]
        for task in play["tasks"]
        for result in task["hosts"].values()
        if result.get("failed")
    ]


@pytest.fixture(scope="module")
def package_index(tmp_path_factory):
    """HTTPS fails in build containers here: the build stage takes the agent's pinned
    dependencies (and setuptools, its build backend) from a PEP 503 index on the host, as a user
    behind a mirror would (PIP_INDEX_URL, with the build on the host's network)."""
    if docker("image", "inspect", "local/debian12-plain:latest", check=False).returncode != 0:
        pytest.skip("local/debian12-plain:latest is missing (run: make images)")
    caches = sorted((STATE / "agent-image").glob("wheels-*/.done"), key=lambda p: p.stat().st_mtime)
    if not caches:
        pytest.skip("no dependency wheels: scripts/build-agent-image.sh has not run (make images)")
    base = tmp_path_factory.mktemp("index")
    run(sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
        "--dest", str(base / "flat"), "setuptools>=77")  # fmt: skip
    wheels = [*caches[-1].parent.glob("*.whl"), *(base / "flat").glob("*.whl")]
    started = time.time()
    with serve_index(base / "root", wheels) as served:
        yield served
    remove_build_stages(since=started)


def remove_build_stages(since: float) -> None:
    """Docker's classic builder (community.docker's) keeps the Containerfile's build stage as an
    untagged image, about 300 MB a build: remove the ones these tests made."""
    for image in docker("images", "--filter", "dangling=true", "-q", "--no-trunc").stdout.split():
        inspect = docker("image", "inspect", "-f", "{{.Created}}", image, check=False).stdout
        created = datetime.fromisoformat(inspect.strip()[:26].rstrip("Z") + "+00:00")
        history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
        if created.timestamp() >= since and "/src/wheelhouse" in history:
            docker("rmi", image, check=False)


def test_the_image_playbook_builds_and_pushes_from_the_installed_collection(
    registry, installed_collection, package_index, kubectl, namespace, tmp_path
):
    """The user's route: only the installed collection, its Containerfile and pinned
    dependencies. The image lands in the registry under the agent's version, the test cluster
    pulls it and runs the agent from it, the agent never came from the index; a second run
    changes nothing."""
    url, served = package_index
    version = agent_version()
    repository = f"{namespace}/workflow-agent"
    ref = f"{registry}/{repository}:{version}"
    variables = {
        "workflow_agent_image_repository": f"{registry}/{repository}",
        "workflow_agent_image_build_args": {
            "BASE_IMAGE": "local/debian12-plain:latest",
            "PIP_INDEX_URL": url,
        },
        "workflow_agent_image_build_network": "host",
    }
    try:
        rc, report, out = image_playbook(installed_collection, tmp_path / "first", variables)
        assert rc == 0, out[-6000:]
        digest = manifest_digest(registry, repository, version)
        assert digest, f"the registry has no {repository}:{version}"
        # Built from the installed copy, not from this checkout.
        built = [
            action
            for play in report["plays"]
            for task in play["tasks"]
            for result in task["hosts"].values()
            for action in result.get("actions", [])
            if action.startswith("Built image")
        ]
        assert built and str(installed_collection) in built[0], built
        run_agent_pod(kubectl, namespace, registry, repository, version, digest)
        # Only the dependencies came from the index; the agent was built from the collection.
        assert "/simple/pydantic/" in served
        assert not [p for p in served if "workflow-agent" in p or "workflow_agent" in p], served

        rc, report, out = image_playbook(installed_collection, tmp_path / "again", variables)
        assert rc == 0, out[-6000:]
        assert report["stats"]["localhost"]["changed"] == 0, out[-6000:]
        assert manifest_digest(registry, repository, version) == digest
    finally:
        docker("rmi", ref, check=False)
        delete_repository_tag(registry, repository, version)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({}, "missing required arguments: workflow_agent_image_repository"),
        (
            {"workflow_agent_image_repository": "workflow-agent"},
            "workflow_agent_image_repository: workflow-agent is not a repository to push to",
        ),
        (
            {"workflow_agent_image_repository": "registry.example.com/team/workflow-agent:1.0"},
            "give the registry host, then a lower-case path, and no tag or digest",
        ),
        (
            {
                "workflow_agent_image_repository": "registry.example.com/team/workflow-agent",
                "workflow_agent_image_tag": "-1",
            },
            "workflow_agent_image_tag: -1 is not an image tag",
        ),
        (
            {
                "workflow_agent_image_repository": "registry.example.com/team/workflow-agent",
                "workflow_agent_image_registry_username": "me",
            },
            "workflow_agent_image_registry_username and workflow_agent_image_registry_password go",
        ),
    ],
)
def test_the_image_playbook_refuses_bad_input_with_one_message(
    installed_collection, tmp_path, variables, message
):
    rc, report, out = image_playbook(installed_collection, tmp_path, variables)
    assert rc != 0
    (msg,) = failures(report)
    assert message in msg, out[-3000:]
    assert "Traceback" not in out


@pytest.fixture
def registry_with_login(tmp_path):
    """A second registry, with basic auth (htpasswd): the registry provisions the user `docker`
    with a random password and logs it once. Plain HTTP on loopback, as the suite's."""
    binary = run("bash", str(REPO / "scripts/build-go-tool.sh"), "registry").stdout.strip()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    config = tmp_path / "registry.yml"
    config.write_text(
        json.dumps(  # YAML's flow style is JSON
            {
                "version": 0.1,
                "log": {"level": "warn", "formatter": "json"},
                "storage": {"filesystem": {"rootdirectory": str(tmp_path / "data")}},
                "http": {"addr": addr},
                "auth": {"htpasswd": {"realm": "wfa-reg", "path": str(tmp_path / "htpasswd")}},
            }
        )
    )
    log = tmp_path / "registry.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [binary, "serve", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "OTEL_TRACES_EXPORTER": "none"},
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://{addr}/v2/").status_code == 401:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.2)
        provisioned = [
            json.loads(line) for line in log.read_text().splitlines() if "password" in line
        ]
        yield addr, provisioned[0]["user"], provisioned[0]["password"]
    finally:
        docker("logout", addr, check=False)
        proc.terminate()
        proc.wait(timeout=30)


def test_the_image_playbook_logs_in_to_the_registry_without_showing_the_password(
    registry_with_login, installed_collection, package_index, tmp_path
):
    """With a username and password, the playbook logs in to the repository's registry first
    (docker_login, no_log): the push to a registry that refuses anonymous clients works, and the
    password shows nowhere in the playbook's output."""
    addr, user, password = registry_with_login
    url, _ = package_index
    version = agent_version()
    repository = f"{addr}/wfa-reg-login/workflow-agent"
    variables = {
        "workflow_agent_image_repository": repository,
        "workflow_agent_image_build_args": {
            "BASE_IMAGE": "local/debian12-plain:latest",
            "PIP_INDEX_URL": url,
        },
        "workflow_agent_image_build_network": "host",
        "workflow_agent_image_registry_username": user,
        "workflow_agent_image_registry_password": password,
    }
    try:
        rc, report, out = image_playbook(installed_collection, tmp_path, variables)
        assert rc == 0, out[-6000:]
        assert password not in out
        manifest = f"http://{addr}/v2/wfa-reg-login/workflow-agent/manifests/{version}"
        accept = {"Accept": "application/vnd.docker.distribution.manifest.v2+json"}
        assert httpx.head(manifest, headers=accept).status_code == 401
        assert httpx.head(manifest, headers=accept, auth=(user, password)).status_code == 200
    finally:
        docker("rmi", f"{repository}:{version}", check=False)
