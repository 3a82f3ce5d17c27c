"""After workflow_agent_state=absent (with workflow_agent_remove_user), twice: nothing is left."""

import pytest
from wfa_testlib import hosts

testinfra_hosts = hosts()


def test_no_agent_process(host):
    assert "workflow-agent" not in host.check_output("ps -eo user=,args=")


def test_no_units(host):
    assert not host.file("/etc/systemd/system/workflow-agent@.service").exists
    wants = host.run("ls /etc/systemd/system/multi-user.target.wants/").stdout
    assert "workflow-agent" not in wants
    listed = host.check_output("systemctl list-units --all --plain --no-legend 'workflow-agent@*'")
    assert listed == ""


DIRS = [
    "/opt/workflow-agent",
    "/etc/workflow-agent",
    "/var/lib/workflow-agent",
    "/var/log/workflow-agent",
]


@pytest.mark.parametrize("path", DIRS)
def test_no_files(host, path):
    assert not host.file(path).exists


def test_no_user_or_group(host):
    assert not host.user("workflow-agent").exists
    assert not host.group("workflow-agent").exists


def test_no_agent_left_online(host, emulator):
    hostname = host.check_output("hostname")
    # The stopped agents' last polls age out of the window.
    online = emulator.wait_agents(set(), online_within=10)
    assert not [a for a in online if a.startswith(f"{hostname}/")]
