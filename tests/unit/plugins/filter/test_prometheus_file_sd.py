"""The prometheus_file_sd filter: what it reads from hostvars, as the playbooks call it."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.selfhosted.workflow_agent.plugins.filter.prometheus_file_sd import (
    FilterModule,
    prometheus_file_sd,
)


def test_registered_under_its_name():
    assert FilterModule().filters()["prometheus_file_sd"] is prometheus_file_sd


def test_reads_the_plan_hosts_variables_with_their_defaults():
    hostvars = {
        "h1": {
            "workflow_agent_planned_instances": [
                {"name": "1", "slots": 2},
                {"name": "2", "slots": 1},
            ],
            "workflow_agent_prometheus_address": "192.0.2.1",
            "workflow_agent_http_port_base": 9100,
            "workflow_agent_deploy_target": "process",
        },
        # No address: ansible_host; no port base: 8080; no target: the agent's default.
        "h2": {
            "workflow_agent_planned_instances": [{"name": "1", "slots": 1}],
            "ansible_host": "h2.example",
        },
        # Planned to run nothing.
        "h3": {"workflow_agent_planned_instances": [], "ansible_host": "h3.example"},
        "other": {},
    }
    plan = {
        "h2": {"instances": 1, "slots": 1},
        "h1": {"instances": 2, "slots": 3},
        "h3": {"instances": 0, "slots": 0},
    }
    out = prometheus_file_sd(plan, hostvars, pool="default")
    assert [(g["targets"][0], g["labels"]) for g in out] == [
        (
            "192.0.2.1:9100",
            {"host": "h1", "instance": "h1/1", "deploy_target": "process", "pool": "default"},
        ),
        (
            "192.0.2.1:9101",
            {"host": "h1", "instance": "h1/2", "deploy_target": "process", "pool": "default"},
        ),
        (
            "h2.example:8080",
            {"host": "h2", "instance": "h2/1", "deploy_target": "docker", "pool": "default"},
        ),
    ]


def test_without_a_plan_it_reads_the_roles_instances():
    hostvars = {"a": {"workflow_agent_instances": 2}, "b": {"workflow_agent_instances": ["x"]}}
    out = prometheus_file_sd(["a", "b"], hostvars)
    assert [(g["targets"][0], g["labels"]["instance"]) for g in out] == [
        ("a:8080", "a/1"),
        ("a:8081", "a/2"),
        ("b:8080", "b/x"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((["a"],), "prometheus_file_sd: hostvars is required"),
        ((["nope"], {}), "prometheus_file_sd: 'nope' is not a host of the inventory"),
        (
            (
                ["a"],
                {
                    "a": {
                        "workflow_agent_planned_instances": [{"name": "1"}],
                        "workflow_agent_http_port_base": 0,
                    }
                },
            ),
            "prometheus_file_sd: host 'a': workflow_agent_http_port_base 0 is not a TCP port",
        ),
    ],
)
def test_errors_are_filter_errors_naming_the_problem(args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        prometheus_file_sd(*args)
