"""After the upgrade from A (<B>.dev0) to B under load: one restart at a time, no job lost."""

import datetime

import pytest
from wfa_testlib import EPHEMERAL, hosts, journal_tail, show

testinfra_hosts = hosts()
NAMES = ["1", "2", "3"]


def version_b(host) -> str:
    return host.check_output("/opt/workflow-agent/current/bin/workflow-agent --version").split()[1]


def when(value: str) -> float:
    """A `systemctl show --timestamp=us+utc` time as unix seconds."""
    return (
        datetime.datetime.strptime(value, "%a %Y-%m-%d %H:%M:%S.%f UTC")
        .replace(tzinfo=datetime.timezone.utc)
        .timestamp()
    )


@pytest.fixture(scope="module")
def windows(host) -> dict[str, tuple[float, float]]:
    """Each instance's restart: from the start of its stop (drain) to being active again."""
    out = {}
    for name in NAMES:
        props = host.check_output(
            f"systemctl show --timestamp=us+utc -p ActiveExitTimestamp -p ActiveEnterTimestamp "
            f"workflow-agent@{name}.service"
        )
        p = dict(line.split("=", 1) for line in props.splitlines())
        out[name] = (when(p["ActiveExitTimestamp"]), when(p["ActiveEnterTimestamp"]))
    return out


@pytest.fixture(scope="module")
def jobs(emulator) -> list[dict]:
    ids = (EPHEMERAL / "jobs.txt").read_text().split()
    return emulator.wait_jobs(ids)


def test_b_is_installed_and_a_is_gone(host):
    b = version_b(host)
    assert not b.endswith(".dev0")
    assert host.file("/opt/workflow-agent/current").linked_to == f"/opt/workflow-agent/{b}"
    assert not host.file(f"/opt/workflow-agent/{b}.dev0").exists


@pytest.mark.parametrize("name", NAMES)
def test_instances_run_b(host, name):
    assert host.service(f"workflow-agent@{name}.service").is_running, journal_tail(host, name)
    assert show(host, name, "MainPID")["MainPID"] != "0"


def test_emulator_sees_b_on_every_instance(host, emulator):
    hostname = host.check_output("hostname")
    agents = emulator.wait_agents({f"{hostname}/{n}" for n in NAMES}, hostname=hostname)
    assert {a["version"] for a in agents.values()} == {version_b(host)}


def test_restarts_one_at_a_time(windows):
    spans = sorted(windows.values())
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"restarts overlap: {windows}"


def test_no_job_lost(jobs):
    assert len(jobs) >= 6, "the feeder ran too briefly to prove anything"
    assert {j["status"] for j in jobs} == {"succeeded"}, {j["id"]: j["status"] for j in jobs}


def test_restarts_drained_running_jobs(host, jobs, windows):
    """Some instance stopped while it ran a job, and that job still succeeded."""
    hostname = host.check_output("hostname")
    drained = [
        j
        for j in jobs
        for name, (stop, _) in windows.items()
        if j["agent"] == f"{hostname}/{name}" and j["claimed_at"] < stop < j["finished_at"]
    ]
    assert drained, f"no job was running during a restart: {windows}"
    assert {j["status"] for j in drained} == {"succeeded"}
