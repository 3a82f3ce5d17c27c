"""The container image on the real Docker engine, started the way Molecule's create.yml does."""

import pathlib
import secrets
import subprocess
import time

import httpx
import pytest
from emu_helpers import STEPS, docker_available

DOCKER = "/usr/bin/docker"
BUILD = pathlib.Path(__file__).resolve().parents[1] / "build-image.sh"
IMAGE = "local/workflow-emulator:latest"

skip = docker_available()
pytestmark = pytest.mark.skipif(skip is not None, reason=skip or "")


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=300, check=check)


@pytest.fixture(scope="module")
def image():
    if docker("image", "inspect", "local/debian12-plain:latest", check=False).returncode != 0:
        pytest.skip("base image local/debian12-plain:latest is missing (run: make images)")
    res = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    return IMAGE


@pytest.fixture
def container(image):
    name = f"wfa-emu-test-{secrets.token_hex(4)}"
    pool_token, admin_token = "pul-" + secrets.token_hex(20), secrets.token_hex(20)
    # Tokens go in by name only (-e NAME): their values never reach docker's argv.
    subprocess.run(
        [
            DOCKER,
            "run",
            "-d",
            "--name",
            name,
            "-e",
            "EMULATOR_SEED_TOKEN",
            "-e",
            "EMULATOR_ADMIN_TOKEN",
            "-e",
            "EMULATOR_HEARTBEAT_TIMEOUT=60s",
            image,
        ],
        env={"EMULATOR_SEED_TOKEN": pool_token, "EMULATOR_ADMIN_TOKEN": admin_token},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    try:
        yield name, pool_token, admin_token
    finally:
        docker("rm", "-f", name, check=False)


def wait_url(name: str) -> str:
    ip = docker("inspect", "-f", "{{.NetworkSettings.IPAddress}}", name).stdout.strip()
    url = f"http://{ip}:8080"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, docker("logs", name).stderr
        time.sleep(0.2)


def test_image_serves_the_seed_pool_as_non_root_and_keeps_state(container):
    name, pool_token, admin_token = container
    url = wait_url(name)
    admin = {"Authorization": f"Bearer {admin_token}"}
    pool = {"Authorization": f"token {pool_token}", "X-Agent-Hostname": "h", "X-Agent-Pid": "1"}
    assert httpx.get(f"{url}/api/deployments/poll", headers=pool).status_code == 204
    job = httpx.post(f"{url}/admin/jobs", headers=admin, json={"steps": STEPS}).json()["id"]
    assert httpx.get(f"{url}/admin/stats", headers=admin).json()["heartbeat_timeout"] == 60

    assert docker("exec", name, "id", "-u").stdout.strip() == "10001"
    inspect = docker("inspect", "-f", "{{json .Args}} {{json .Config.Cmd}}", name).stdout
    assert pool_token not in inspect and admin_token not in inspect  # env only, never argv

    docker("restart", "-t", "30", name)
    url = wait_url(name)
    assert httpx.get(f"{url}/admin/jobs/{job}", headers=admin).json()["status"] == "not-started"
    claim = httpx.get(f"{url}/api/deployments/poll", headers=pool)
    assert claim.status_code == 200 and claim.json()["jobID"] == job

    docker("stop", "-t", "30", name)
    assert docker("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip() == "0"
