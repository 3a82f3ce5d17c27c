"""The agent_instances and agent_probe_problems filters: registered under their names."""

from __future__ import annotations

from ansible_collections.selfhosted.workflow_agent.plugins.filter import (
    agent_instances,
    agent_probe_problems,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_instances import (
    instance_plan,
    probe_problems,
)


def test_registered_under_their_names():
    assert agent_instances.FilterModule().filters() == {"agent_instances": instance_plan}
    assert agent_probe_problems.FilterModule().filters() == {"agent_probe_problems": probe_problems}


def test_the_roles_call_with_its_defaults():
    # roles/agent/defaults/main.yml: 1 instance, port base 8080, no config, no version pinned.
    got = instance_plan(1, port_base=8080, config={}, version="")
    assert got["present"] == [{"name": "1", "port": 8080}]
    assert got["problems"] == []
