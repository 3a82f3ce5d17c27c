"""The agent container image (./Containerfile, built by scripts/build-agent-image.sh, cached by a
hash of its inputs): its size, and the time from `docker run` to /healthz answering 200.

Baselines: the base image's size, and the time to the first 200 of a bare Python HTTP server
(`python3 -m http.server`) started the same way from the base image. Both containers use the
host network so that they reach the emulator on 127.0.0.1 and the benchmark reaches them.
(Docker's own "healthy" status waits for the image's HEALTHCHECK interval, 30 s, so it says
nothing about start-up speed; /healthz is what the check itself calls.)
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time

import httpx
from benchlib import DOCKER, REPO, STATE, emulator, median

BASE = "local/debian12-plain:latest"
IMAGE = "local/workflow-agent:latest"


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=check, timeout=600)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _size_mb(image: str) -> float:
    return round(int(_docker("image", "inspect", "-f", "{{.Size}}", image).stdout) / 1e6, 1)


def _time_to_200(args: list[str], port: int, path: str) -> float:
    name = f"wfa-rel-bench-{secrets.token_hex(4)}"
    t0 = time.monotonic()
    _docker("run", "-d", "--rm", "--name", name, "--network", "host", *args)
    try:
        with httpx.Client(timeout=2, trust_env=False) as http:
            while time.monotonic() - t0 < 120:
                try:
                    if http.get(f"http://127.0.0.1:{port}{path}").status_code == 200:
                        return time.monotonic() - t0
                except httpx.TransportError:
                    pass
                time.sleep(0.02)
        raise TimeoutError(f"{name}: no 200 on port {port} within 120 s")
    finally:
        _docker("rm", "-f", name, check=False)


def run(runs: int = 1) -> dict:
    """`runs` pairs of (agent, bare server) starts, alternating."""
    if not (REPO / "Containerfile").exists():
        return {"na": "no image: there is no Containerfile at the repository root"}
    build = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-agent-image.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if build.returncode != 0:
        return {"na": "no image: the build failed: " + (build.stderr or build.stdout)[-300:]}
    env_file = STATE / "image" / "agent.env"
    env_file.parent.mkdir(parents=True, exist_ok=True)
    agent, bare = [], []
    with emulator("image") as emu:
        for _ in range(runs):
            port = _free_port()
            # The token goes through a 0600 env file, never argv.
            env_file.write_text(
                f"PULUMI_AGENT_TOKEN={emu.pool_token}\nPULUMI_AGENT_SERVICE_URL={emu.url}\n"
                f"PULUMI_AGENT_DEPLOY_TARGET=process\nPULUMI_AGENT_HTTP_SERVER_PORT={port}\n"
                "PULUMI_AGENT_POLLING_INTERVAL=5s\n"
            )
            os.chmod(env_file, 0o600)
            agent.append(_time_to_200(["--env-file", str(env_file), IMAGE], port, "/healthz"))
            port = _free_port()
            bare.append(
                _time_to_200(
                    [BASE, "python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                    port,
                    "/",
                )
            )
    env_file.unlink(missing_ok=True)
    return {
        "image": IMAGE,
        "size_mb": _size_mb(IMAGE),
        "base_size_mb": _size_mb(BASE),
        "time_to_healthy_ms_median": round(median(agent) * 1000),
        "bare_http_server_ms_median": round(median(bare) * 1000),
        "ratio": round(median(agent) / median(bare), 2),
        "runs": runs,
    }
