"""The agent_instances filter: registered under its name."""

from __future__ import annotations

from ansible_collections.selfhosted.workflow_agent.plugins.filter import agent_instances
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_instances import (
    instance_plan,
)


def test_registered_under_its_name():
    assert agent_instances.FilterModule().filters() == {"agent_instances": instance_plan}


def test_the_roles_call_with_its_defaults():
    # roles/agent/defaults/main.yml: 1 instance, port base 8080, no config, no version pinned.
    got = instance_plan(1, port_base=8080, config={}, version="")
    assert got["present"] == [{"name": "1", "port": 8080}]
    assert got["problems"] == []
