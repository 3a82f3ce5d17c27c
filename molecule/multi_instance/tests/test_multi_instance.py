"""After [a, b (slots 2), c] became [a, b], twice: c is stopped and gone, a and b untouched."""

import json
import subprocess
from pathlib import Path

import pytest
from wfa_testlib import (
    CONFIG_DIR,
    EPHEMERAL,
    INVENTORY,
    healthz,
    hosts,
    instances,
    journal_tail,
    show,
    unit,
)

CONVERGE = Path(__file__).resolve().parents[2] / "shared" / "converge.yml"

testinfra_hosts = hosts()


def before(host) -> str:
    return (EPHEMERAL / f"before-{host.backend.get_hostname()}.txt").read_text()


def test_only_a_and_b_remain(host):
    assert instances(host) == ["a", "b"]


def test_c_is_stopped_and_gone(host):
    assert not host.service(unit("c")).is_running
    assert not host.service(unit("c")).is_enabled
    assert not host.file(f"{CONFIG_DIR}/c.yaml").exists
    assert not host.file("/var/lib/workflow-agent/c").exists
    assert "workflow-agent@c" not in host.check_output("ps -eo args=")


@pytest.mark.parametrize("name", ["a", "b"])
def test_a_and_b_untouched(host, name):
    now = show(host, name, "InvocationID", "MainPID")
    recorded = before(host)
    assert f"InvocationID={now['InvocationID']}" in recorded, journal_tail(host, name)
    assert f"MainPID={now['MainPID']}" in recorded
    assert host.service(unit(name)).is_running


def test_per_instance_override(host):
    assert "slots: 2" in host.check_output(f"cat {CONFIG_DIR}/b.yaml").splitlines()
    assert "slots:" not in host.check_output(f"cat {CONFIG_DIR}/a.yaml")


@pytest.mark.parametrize("port", [8080, 8081])
def test_ports_kept(host, port):
    assert healthz(host, port)[0] == 200


def test_emulator_sees_a_and_b_only(host, emulator):
    hostname = host.check_output("hostname")
    expected = {f"{hostname}/a", f"{hostname}/b"}
    # c's last poll ages out of the window; a and b keep polling every second.
    assert set(emulator.wait_agents(expected, online_within=10)) == expected


def test_jobs_still_run_on_a_and_b(host, emulator):
    hostname = host.check_output("hostname")
    expected = {f"{hostname}/a", f"{hostname}/b"}
    assert set(emulator.run_on_each(expected)) == expected


def test_a_changed_service_environment_restarts_every_instance(host):
    """Last, as it restarts them: every instance reads the service environment, so a new proxy
    restarts a and b (a new instance's directories restart none: molecule/scale)."""
    before_ids = {n: show(host, n, "InvocationID")["InvocationID"] for n in ("a", "b")}
    proxy = {"workflow_agent_proxy": {"https": "http://proxy-2.invalid:3128"}}
    cmd = ["ansible-playbook", "-i", str(Path(INVENTORY).parent), str(CONVERGE)]
    cmd += ["--limit", host.backend.get_hostname(), "-e", json.dumps(proxy)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "proxy-2.invalid" in host.check_output(f"cat {CONFIG_DIR}/environment")
    for name in ("a", "b"):
        now = show(host, name, "InvocationID", "MainPID")
        assert now["InvocationID"] != before_ids[name], journal_tail(host, name)
        environ = host.check_output(f"tr '\\0' '\\n' < /proc/{now['MainPID']}/environ")
        assert "HTTPS_PROXY=http://proxy-2.invalid:3128" in environ.splitlines()
