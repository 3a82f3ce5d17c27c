"""Test helpers: the agent side of the wire spoken with plain httpx, and the Docker probe."""

import itertools
import json
import os
import subprocess

import httpx

STEPS = [{"name": "build", "run": "echo build"}, {"name": "deploy", "run": "echo deploy"}]
_pids = itertools.count(1000)


class Agent:
    """The agent side of the wire, spoken directly with httpx (no agent code involved)."""

    def __init__(self, emu, *, token=None, hostname="host-1", instance="1", pid=None):
        headers = {
            "Authorization": f"token {token or emu.pool_token}",
            "User-Agent": "workflow-agent/9.9.9 (linux; amd64)",
        }
        if hostname:
            headers["X-Agent-Hostname"] = hostname
        if instance:
            headers["X-Agent-Instance"] = instance
        headers["X-Agent-Pid"] = str(pid or next(_pids))
        self.url = emu.url
        self.http = httpx.Client(base_url=emu.url, headers=headers, timeout=30)
        self.id = f"{hostname}/{instance or headers['X-Agent-Pid']}"

    def close(self):
        self.http.close()

    def poll(self) -> httpx.Response:
        return self.http.get("/api/deployments/poll")

    def claim(self) -> dict:
        resp = self.poll()
        assert resp.status_code == 200, resp.text
        return resp.json()

    def ack(self, claim: dict) -> httpx.Response:
        body = {"jobID": claim["jobID"], "deploymentID": claim["deploymentID"]}
        return self.http.post("/api/agent-workflows/deployment", json=body)

    def status(self, claim: dict) -> httpx.Response:
        return self.http.get(f"/api/deployments/{claim['deploymentID']}/status")

    def job(self, claim: dict) -> "Job":
        return Job(self.url, claim)


class Job:
    """Job-scoped calls with the claim's job token, bodies sent without a Content-Type."""

    def __init__(self, url: str, claim: dict):
        self.id = claim["jobID"]
        self.http = httpx.Client(
            base_url=f"{url}/api/workflow/jobs",
            headers={"Authorization": f"token {claim['jobToken']}"},
            timeout=30,
        )

    def _raw(self, method: str, path: str, body: bytes) -> httpx.Response:
        # httpx adds no Content-Type for raw `content`: exactly what the real runner sends.
        return self.http.request(method, f"/{self.id}{path}", content=body)

    def definition(self) -> httpx.Response:
        return self.http.get(f"/{self.id}")

    def step(self, index: int, status: str) -> httpx.Response:
        return self._raw("PATCH", f"/{index}/status", f'{{"status":"{status}"}}'.encode())

    def logs(self, index: int, offset: int, lines: list[str]) -> httpx.Response:
        body = {
            "offset": offset,
            "lines": [{"t": "2026-01-02T03:04:05.123456789Z", "l": x} for x in lines],
        }
        return self._raw("POST", f"/{index}/logs", json.dumps(body).encode())

    def heartbeat(self) -> httpx.Response:
        return self._raw("POST", "/heartbeat", b"")


def metric(text: str, name: str, **labels: str) -> float:
    """One sample's value from Prometheus text (0 when absent): counters are compared by delta."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        sample, _, value = line.rpartition(" ")
        if sample == (f"{name}{{{want}}}" if want else name):
            return float(value)
    return 0.0


def docker_available() -> str | None:
    """None when the Docker engine answers, else the reason to skip."""
    docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else None
    if docker is None:
        return "no /usr/bin/docker on this machine"
    res = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        return "the Docker engine does not answer (run: bash scripts/docker-engine.sh)"
    return None
