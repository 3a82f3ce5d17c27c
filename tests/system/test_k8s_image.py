"""The agent container image (./Containerfile) on the real Docker engine, against the emulator
image: identity (OCI labels, non-root user, tini as PID 1), /healthz 200, the image's own
HEALTHCHECK command, a job run end to end, and SIGTERM -> drain -> exit 0.

The image is built (or found up to date) by scripts/build-agent-image.sh, so the test always
runs the current source. Containers and the network are named wfa-k8simg-<random>."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from agent_harness import wait_for

REPO = Path(__file__).resolve().parents[2]
DOCKER = shutil.which("/usr/bin/docker") or shutil.which("docker") or "docker"
IMAGE = "local/workflow-agent"
EMULATOR_IMAGE = "local/workflow-emulator:latest"
AGENT_UID = "10001"


def docker(*args: str, check: bool = True, env: dict | None = None, timeout: float = 300):
    return subprocess.run(
        [DOCKER, *args],
        capture_output=True,
        text=True,
        check=check,
        env=env,
        timeout=timeout,
    )


def agent_version() -> str:
    text = (REPO / "agent/src/workflow_agent/__init__.py").read_text()
    return text.split('__version__ = "', 1)[1].split('"', 1)[0]


@pytest.fixture(scope="module")
def image() -> str:
    if docker("info", check=False).returncode != 0:
        pytest.skip("the Docker engine does not answer (run: bash scripts/docker-engine.sh)")
    for needed in ("local/debian12-plain:latest", EMULATOR_IMAGE):
        if docker("image", "inspect", needed, check=False).returncode != 0:
            pytest.skip(f"{needed} is missing (run: make images)")
    build = subprocess.run(
        ["bash", str(REPO / "scripts/build-agent-image.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return f"{IMAGE}:{agent_version()}"


class Emu:
    """The emulator container's admin API, reached at its address on the test network."""

    def __init__(self, url: str, admin_token: str) -> None:
        self.url = url
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=30
        )

    def get(self, path: str, **params) -> dict:
        resp = self.http.get(path, params=params)
        resp.raise_for_status()
        return resp.json()

    def post(self, path: str, body: dict) -> dict:
        resp = self.http.post(path, json=body)
        resp.raise_for_status()
        return resp.json()


def container_ip(name: str, network: str) -> str:
    out = docker("inspect", "-f", "{{json .NetworkSettings.Networks}}", name).stdout
    return json.loads(out)[network]["IPAddress"]


@pytest.fixture(scope="module")
def setup(image):
    """The emulator and one agent (process target) on a private network."""
    tag = "wfa-k8simg-" + secrets.token_hex(3)
    pool_token = "pul-" + secrets.token_hex(20)
    admin_token = secrets.token_hex(20)
    # Tokens travel in the environment of `docker run -e NAME`, never in argv.
    env = {**os.environ, "PULUMI_AGENT_TOKEN": pool_token}
    env.update(EMULATOR_SEED_TOKEN=pool_token, EMULATOR_ADMIN_TOKEN=admin_token)
    names = {"net": tag, "emu": f"{tag}-emulator", "agent": f"{tag}-agent"}
    try:
        docker("network", "create", names["net"])
        docker(
            "run", "-d", "--name", names["emu"], "--network", names["net"],
            "-e", "EMULATOR_SEED_TOKEN", "-e", "EMULATOR_ADMIN_TOKEN",
            EMULATOR_IMAGE, env=env,
        )  # fmt: skip
        emu = Emu(f"http://{container_ip(names['emu'], names['net'])}:8080", admin_token)

        def emulator_up():
            try:
                return httpx.get(emu.url + "/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(emulator_up, what="the emulator answering")
        docker(
            "run", "-d", "--name", names["agent"], "--network", names["net"],
            "-e", "PULUMI_AGENT_TOKEN",
            "-e", f"PULUMI_AGENT_SERVICE_URL=http://{names['emu']}:8080",
            "-e", "PULUMI_AGENT_DEPLOY_TARGET=process",
            "-e", "PULUMI_AGENT_POLLING_INTERVAL=1s",
            "-e", "WORKFLOW_AGENT_INSTANCE=image-test",
            image, env=env,
        )  # fmt: skip
        agent_url = f"http://{container_ip(names['agent'], names['net'])}:8080"
        yield {"names": names, "emu": emu, "agent_url": agent_url, "token": pool_token}
    finally:
        for name in (names["agent"], names["emu"]):
            docker("rm", "-f", name, check=False)
        docker("network", "rm", names["net"], check=False)


def test_image_identity(image):
    """OCI labels, a numeric non-root user, tini as entrypoint, `workflow-agent run`."""
    cfg = json.loads(docker("image", "inspect", "-f", "{{json .Config}}", image).stdout)
    labels = cfg["Labels"]
    assert labels["org.opencontainers.image.version"] == agent_version()
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert cfg["User"] == f"{AGENT_UID}:{AGENT_UID}"
    assert cfg["Entrypoint"] == ["/usr/bin/tini", "--"]
    assert cfg["Cmd"] == ["workflow-agent", "run"]
    assert cfg["Healthcheck"]["Test"][0] == "CMD"
    out = docker("run", "--rm", image, "workflow-agent", "version").stdout
    assert out.startswith(f"workflow-agent {agent_version()} ")
    # Both extras are installed, and the kubernetes SDK imports without its dropped aio part.
    probe = "import docker, kubernetes.client, kubernetes.stream, workflow_agent.targets.kubernetes"
    docker("run", "--rm", image, "python", "-c", probe)


def test_runs_healthy_and_does_a_job(setup):
    names, emu = setup["names"], setup["emu"]

    def healthz():
        try:
            return httpx.get(setup["agent_url"] + "/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthz, what="agent /healthz 200")
    assert httpx.get(setup["agent_url"] + "/readyz", timeout=5).json() == {"status": "ready"}

    # PID 1 is tini; the agent runs under it as the image's non-root user.
    pid1 = docker("exec", names["agent"], "cat", "/proc/1/cmdline").stdout.split("\0")
    assert pid1[0] == "/usr/bin/tini"
    # `docker top` columns: UID PID PPID C STIME TTY TIME CMD.
    top = [row.split(None, 7) for row in docker("top", names["agent"]).stdout.splitlines()[1:]]
    agent_uids = [row[0] for row in top if "workflow-agent run" in row[7]]
    assert agent_uids and set(agent_uids) == {AGENT_UID}, top

    # The image's own HEALTHCHECK command succeeds against the running agent.
    check = json.loads(docker("image", "inspect", "-f", "{{json .Config.Healthcheck}}",
                              docker("inspect", "-f", "{{.Image}}", names["agent"]).stdout.strip()
                              ).stdout)["Test"][1:]  # fmt: skip
    assert docker("exec", names["agent"], *check, check=False).returncode == 0

    online = wait_for(
        lambda: [a for a in emu.get("/admin/agents", online_within=60)["agents"]
                 if a["instance"] == "image-test"],
        what="the agent online at the emulator",
    )  # fmt: skip
    assert online[0]["version"] == agent_version()

    job = emu.post("/admin/jobs", {"steps": [{"name": "hello", "run": "echo hello from $(id -u)"}]})
    done = wait_for(
        lambda: (
            (j := emu.get(f"/admin/jobs/{job['id']}"))["status"]
            in ("succeeded", "failed", "canceled")
            and j
        ),
        what="the job finished",
    )
    assert done["status"] == "succeeded", done
    assert done["steps"][0]["logs"] == [f"hello from {AGENT_UID}"]
    # The pool token never shows in the container's log.
    assert setup["token"] not in docker("logs", names["agent"]).stderr


def test_sigterm_drains_and_exits_0(setup):
    """`docker kill -s TERM` reaches the agent through tini: it drains and exits 0 (no SIGKILL:
    without the signal reaching it, the container would run until the deadline)."""
    name = setup["names"]["agent"]
    docker("kill", "--signal", "TERM", name)
    wait_for(
        lambda: docker("inspect", "-f", "{{.State.Running}}", name).stdout.strip() == "false",
        what="the agent container stopped",
    )
    state = json.loads(docker("inspect", "-f", "{{json .State}}", name).stdout)
    assert state["ExitCode"] == 0, docker("logs", name).stderr[-2000:]
    assert state["OOMKilled"] is False


def test_containerfile_builds_from_a_package_index_without_a_wheelhouse(image, tmp_path):
    """Elsewhere, without a host-built wheelhouse, the build stage makes the wheelhouse itself
    from a package index: `docker build -f Containerfile .` at the repository root (the root
    .dockerignore keeps the context small). HTTPS from build containers fails on this machine,
    so the index is a local PEP 503 directory served over HTTP on the host (the build runs with
    --network host), holding the same pinned wheels plus setuptools for the isolated build."""
    state = Path(os.environ.get("WORKFLOW_AGENT_STATE", "/var/tmp/workflow-agent-dev"))
    caches = sorted((state / "agent-image").glob("wheels-*/.done"), key=lambda p: p.stat().st_mtime)
    assert caches, "scripts/build-agent-image.sh left no dependency wheels"
    flat = tmp_path / "flat"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--dest", str(flat),
         "setuptools>=77"],
        check=True, timeout=600,
    )  # fmt: skip
    simple = tmp_path / "index" / "simple"
    for wheel in [*caches[-1].parent.glob("*.whl"), *flat.glob("*.whl")]:
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        (simple / project).mkdir(parents=True, exist_ok=True)
        shutil.copy(wheel, simple / project / wheel.name)
    served: list[str] = []

    class Index(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # record, do not print
            served.append(self.path)

    handler = functools.partial(Index, directory=str(tmp_path / "index"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tag = f"wfa-k8simg-index:{secrets.token_hex(3)}"
    try:
        # BuildKit, so that the build stage leaves no untagged image behind.
        build = docker(
            "build", "--progress", "plain", "--network", "host", "-f", "Containerfile",
            "--build-arg", "BASE_IMAGE=local/debian12-plain:latest",
            "--build-arg", f"PIP_INDEX_URL=http://127.0.0.1:{server.server_port}/simple/",
            "-t", tag, str(REPO),
            check=False, timeout=1800, env={**os.environ, "DOCKER_BUILDKIT": "1"},
        )  # fmt: skip
        log = build.stdout + build.stderr
        assert build.returncode == 0, log[-5000:]
        # The root .dockerignore keeps the context to what the Containerfile copies.
        size = re.search(r"transferring context: ([\d.]+)([kMG]?B)", log)
        assert size and size.group(2) in ("B", "kB"), log[:2000]
        # The build stage took the dependencies and setuptools from the index.
        assert {"/simple/pydantic/", "/simple/kubernetes/", "/simple/setuptools/"} <= set(served)
        out = docker("run", "--rm", tag, "workflow-agent", "version").stdout
        assert out.startswith(f"workflow-agent {agent_version()} ")
        docker("run", "--rm", tag, "python", "-c", "import docker, kubernetes.client")
    finally:
        server.shutdown()
        docker("rmi", tag, check=False)
