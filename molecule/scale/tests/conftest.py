# wfa_testlib is on pytest's pythonpath (the repository's pytest.ini).
import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from wfa_testlib import DEADLINE, EPHEMERAL, emulator, pool_token  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[3]
FILE_SD = EPHEMERAL / "file_sd.json"  # where molecule.yml has the rollout write its targets


class Prometheus:
    """A real Prometheus on loopback (scripts/prometheus.sh) scraping the rollout's file_sd."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)

    def query(self, expr: str) -> list[dict]:
        resp = self.http.get("/api/v1/query", params={"query": expr})
        assert resp.status_code == 200, resp.text
        return resp.json()["data"]["result"]

    @staticmethod
    def file_sd() -> dict[str, dict]:
        """The rollout's file_sd: {instance label: target group}."""
        return {g["labels"]["instance"]: g for g in json.loads(FILE_SD.read_text())}

    def targets(self) -> dict[str, str]:
        """The active targets of the agents' job: {instance label: health}."""
        resp = self.http.get("/api/v1/targets", params={"state": "active"})
        assert resp.status_code == 200, resp.text
        return {
            t["labels"]["instance"]: t["health"]
            for t in resp.json()["data"]["activeTargets"]
            if t["labels"]["job"] == "workflow_agent"
        }

    def wait_fleet(self, expected: set[str], slots: int) -> dict:
        """Once Prometheus scrapes exactly `expected` (instance labels), each up == 1, and
        sum(workflow_agent_slots) is `slots`: what it sees. Else, at the deadline, what it saw."""
        deadline = time.monotonic() + DEADLINE
        while True:
            seen = {
                "targets": self.targets(),
                "up": {
                    r["metric"]["instance"]: r["value"][1]
                    for r in self.query('up{job="workflow_agent"}')
                },
                "slots": [
                    r["value"][1]
                    for r in self.query('sum(workflow_agent_slots{job="workflow_agent"})')
                ],
            }
            want_slots = [str(slots)] if expected else []
            if (
                set(seen["targets"]) == expected
                and seen["up"] == dict.fromkeys(expected, "1")
                and seen["slots"] == want_slots
            ) or time.monotonic() > deadline:
                return seen
            time.sleep(1)


@pytest.fixture(scope="module")
def prometheus():
    state = EPHEMERAL / "prometheus"
    script = ROOT / "scripts" / "prometheus.sh"
    start = subprocess.run(
        ["bash", str(script), "start", str(state), str(FILE_SD)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=os.environ.copy(),
    )
    assert start.returncode == 0, start.stdout + start.stderr
    try:
        yield Prometheus(start.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["bash", str(script), "stop", str(state)], timeout=60, check=False)
