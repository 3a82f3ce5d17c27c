"""After [a, b (slots 2), c] became [a, b], twice: c is stopped and gone, a and b untouched."""

import pytest
from wfa_testlib import CONFIG_DIR, EPHEMERAL, healthz, hosts, instances, journal_tail, show, unit

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
