"""upstream_agent: reading upstream's unit files the way systemd does."""

from __future__ import annotations

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import upstream_agent as ua

# Upstream's AMI unit (agent-images/packer/deployment_agent.service_ubuntu): no [Unit], no User=.
AMI_UNIT = """\
[Service]
WorkingDirectory=/home/ubuntu/.pulumi/bin/
ExecStart=/home/ubuntu/.pulumi/bin/customer-managed-workflow-agent/customer-managed-workflow-agent \
  run
KillMode=process

[Install]
WantedBy=multi-user.target
"""


def homes(user):
    return {"root": "/root", "ubuntu": "/home/ubuntu"}[user]


def describe(text, exists=lambda p: False, name="workflow_agent.service"):
    return ua.describe(
        name,
        "/etc/systemd/system/" + name,
        text,
        homes,
        exists,
        realpath=lambda p: p.rstrip("/") or "/",
    )


def test_the_ami_unit_is_an_upstream_install():
    found = describe(AMI_UNIT)
    assert found["command"] == "customer-managed-workflow-agent"
    assert found["executable"] == (
        "/home/ubuntu/.pulumi/bin/customer-managed-workflow-agent/customer-managed-workflow-agent"
    )
    assert found["user"] == "root"  # no User=: systemd runs it as root
    assert found["kill_mode"] == "process"
    assert found["dirs"] == {
        "cwd": "/home/ubuntu/.pulumi/bin",
        "home": "/root",
        "exe_dir": "/home/ubuntu/.pulumi/bin/customer-managed-workflow-agent",
    }
    assert found["config_option"] is None


def test_the_candidates_are_both_names_in_each_directory():
    files = ua.candidate_files(describe(AMI_UNIT))
    assert files[:2] == [
        "/home/ubuntu/.pulumi/bin/pulumi-workflow-agent.yaml",
        "/home/ubuntu/.pulumi/bin/pulumi-deployment-agent.yaml",
    ]
    assert "/etc/pulumi-workflow-agent.yaml" in files
    assert "/root/pulumi-deployment-agent.yaml" in files
    assert len(files) == 8 == len(set(files))


def test_the_legacy_command_with_prefixes_user_and_home_working_directory():
    text = (
        "[Unit]\nDescription=x\n[Service]\nUser=ubuntu\nWorkingDirectory=-~\n"
        "ExecStart=-/opt/cmda/customer-managed-deployment-agent run\n"
    )
    found = describe(text)
    assert found["command"] == "customer-managed-deployment-agent"
    assert found["user"] == "ubuntu"
    assert found["working_directory"] == "/home/ubuntu"
    assert found["kill_mode"] == "control-group"


def test_a_bare_command_is_found_on_systemds_search_path():
    text = "[Service]\nExecStart=customer-managed-workflow-agent run\n"
    found = describe(text, exists=lambda p: p == "/usr/bin/customer-managed-workflow-agent")
    assert found["executable"] == "/usr/bin/customer-managed-workflow-agent"
    assert found["working_directory"] == "/"  # systemd's default for system units


def test_continuation_lines_environment_and_config_option():
    text = (
        '[Service]\n# a comment\nEnvironment=PULUMI_AGENT_LOG_LEVEL=debug "A=b c"\n'
        "Environment=PULUMI_AGENT_LOG_LEVEL=info\n"
        "WorkingDirectory=/srv\n"
        "ExecStart=/opt/customer-managed-workflow-agent \\\n  run --config conf/agent.yaml\n"
    )
    found = describe(text)
    assert found["argv"] == [
        "/opt/customer-managed-workflow-agent",
        "run",
        "--config",
        "conf/agent.yaml",
    ]
    assert found["config_option"] == "/srv/conf/agent.yaml"
    assert found["environment"] == {"PULUMI_AGENT_LOG_LEVEL": "info", "A": "b c"}
    assert ua.candidate_files(found)[-1] == "/srv/conf/agent.yaml"


@pytest.mark.parametrize(
    "text",
    [
        "[Service]\nExecStart=/usr/bin/workflow-agent run\n",  # ours, not upstream's
        "[Service]\nExecStart=/bin/sh -c 'customer-managed-workflow-agent run'\n",  # not argv[0]
        "[Unit]\nExecStart=/x/customer-managed-workflow-agent run\n",  # not in [Service]
        "[Service]\nExecStart=/x/customer-managed-workflow-agent run\nExecStart=\n",  # reset
        "",
    ],
)
def test_other_units_are_not_upstream_installs(text):
    assert describe(text) is None


def test_an_unsplittable_exec_start_is_one_clear_error():
    with pytest.raises(ua.UnitError, match="cannot be split"):
        describe("[Service]\nExecStart=/x/customer-managed-workflow-agent 'run\n")
