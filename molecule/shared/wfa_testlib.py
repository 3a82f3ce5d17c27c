"""Helpers and fixtures for the scenarios' testinfra tests (imported by each tests/conftest.py).

Everything is asserted against the real things: systemd in the hosts, the agent processes, and
the emulator container that create.yml started (its admin API, reached from this machine).
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import time

import httpx
import pytest
import testinfra.utils.ansible_runner

EPHEMERAL = pathlib.Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
UNIT = "workflow-agent"
CONFIG_DIR = "/etc/workflow-agent"
# Generous: other engineers load the same two cores.
DEADLINE = 240.0


def hosts() -> list[str]:
    return testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("all")


class Emulator:
    """The emulator's admin API, as create.yml started it."""

    def __init__(self) -> None:
        info = json.loads((EPHEMERAL / "emulator.json").read_text())
        token = (EPHEMERAL / "admin-token").read_text().strip()
        self.http = httpx.Client(
            base_url=info["host_url"], headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def _ok(self, resp: httpx.Response) -> dict:
        assert resp.status_code < 300, f"{resp.request.method} {resp.request.url}: {resp.text}"
        return resp.json()

    def agents(self, online_within: float = 60) -> dict[str, dict]:
        data = self._ok(self.http.get("/admin/agents", params={"online_within": online_within}))
        return {a["id"]: a for a in data["agents"]}

    def wait_agents(
        self, expected: set[str], online_within: float = 10, hostname: str | None = None
    ) -> dict[str, dict]:
        """The online agents once they are exactly `expected` (agents that stopped drop out).

        With `hostname`, only that host's agents count: a scenario's hosts share the emulator.
        """
        deadline = time.monotonic() + DEADLINE
        while True:
            agents = self.agents(online_within)
            if hostname is not None:
                agents = {k: v for k, v in agents.items() if k.startswith(f"{hostname}/")}
            if set(agents) == expected or time.monotonic() > deadline:
                return agents
            time.sleep(1)

    def create_job(self, run: str, name: str = "work") -> str:
        job = {"steps": [{"name": name, "run": run}]}
        return self._ok(self.http.post("/admin/jobs", json=job))["id"]

    def job(self, job_id: str) -> dict:
        return self._ok(self.http.get(f"/admin/jobs/{job_id}"))

    def wait_jobs(self, ids: list[str]) -> list[dict]:
        deadline = time.monotonic() + DEADLINE
        while True:
            jobs = [self.job(i) for i in ids]
            if all(j["status"] in ("succeeded", "failed", "canceled", "skipped") for j in jobs):
                return jobs
            assert time.monotonic() < deadline, {j["id"]: j["status"] for j in jobs}
            time.sleep(1)

    def run_on_each(self, expected: set[str], run: str = "echo ran as $(id -un); sleep 3") -> dict:
        """Enqueue rounds of jobs until every agent in `expected` has run one; all must succeed.

        Which poller claims a job is up to the pollers, so one round may miss an instance; rounds
        repeat (within the deadline) rather than relying on timing. Agents outside `expected`
        (another host of the scenario) may claim some: those jobs must succeed too, and do not
        count.
        """
        ran: dict[str, list[dict]] = {}
        deadline = time.monotonic() + DEADLINE
        while not expected <= set(ran) and time.monotonic() < deadline:
            ids = [self.create_job(run) for _ in expected]
            for job in self.wait_jobs(ids):
                assert job["status"] == "succeeded", job
                if job["agent"] in expected:
                    ran.setdefault(job["agent"], []).append(job)
        return ran

    def run_on_host(self, hostname: str, run: str) -> dict:
        """Run `run` as one job on an agent of `hostname`, and return that job.

        The scenario's hosts share the emulator's pool, so any host's agent may claim a job.
        The script runs only where `hostname` is `hostname`; a job another host claimed
        does nothing there, and another is enqueued (within the deadline).
        """
        guarded = f'[ "$(hostname)" = {shlex.quote(hostname)} ] || exit 0\n{run}'
        deadline = time.monotonic() + DEADLINE
        while True:
            job = self.wait_jobs([self.create_job(guarded)])[0]
            if job["agent"].startswith(f"{hostname}/"):
                return job
            assert time.monotonic() < deadline, f"no agent of {hostname} claimed a job"


@pytest.fixture(scope="session")
def emulator() -> Emulator:
    return Emulator()


@pytest.fixture(scope="session")
def pool_token() -> str:
    return (EPHEMERAL / "pool-token").read_text().strip()


def instances(host) -> list[str]:
    """The instance names of a host, from the config files the role wrote."""
    out = host.check_output(f"ls {CONFIG_DIR}")
    return sorted(n[: -len(".yaml")] for n in out.split() if n.endswith(".yaml"))


def unit(name: str) -> str:
    return f"{UNIT}@{name}.service"


def show(host, name: str, *props: str) -> dict[str, str]:
    """systemctl show properties of an instance's unit."""
    args = " ".join(f"-p {p}" for p in props)
    out = host.check_output(f"systemctl show {args} {unit(name)}")
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def healthz(host, port: int) -> tuple[int, dict]:
    """GET /healthz from inside the host (the port is not published)."""
    code = (
        "import json,sys,urllib.request,urllib.error\n"
        "try:\n"
        f"    r = urllib.request.urlopen('http://127.0.0.1:{port}/healthz', timeout=10)\n"
        "    print(json.dumps([r.status, json.load(r)]))\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(json.dumps([e.code, json.load(e)]))\n"
    )
    status, body = json.loads(host.check_output(f"python3 -c {shlex.quote(code)}"))
    return status, body


def journal_tail(host, name: str) -> str:
    return host.run(f"journalctl --no-pager -n 30 -u {unit(name)}").stdout
