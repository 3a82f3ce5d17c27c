"""The fleet_plan filter: host weights read from hostvars, errors as AnsibleFilterError."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.selfhosted.workflow_agent.plugins.filter.fleet_plan import (
    FilterModule,
    fleet_plan_filter,
)


def test_registered_under_its_name():
    assert FilterModule().filters()["fleet_plan"] is fleet_plan_filter


HOSTVARS = {
    # weight from the platform facts: min(4 CPUs, 16384 // 2048 = 8) = 4
    "b": {"workflow_agent_facts": {"platform": {"cpus": 4, "memory_mb": 16384}}},
    # an explicit weight wins; bounds are passed on
    "a": {
        "workflow_agent_weight": 2,
        "workflow_agent_max_instances": 1,
        "workflow_agent_facts": {},
    },
    # memory per unit from the host: 16384 // 8192 = 2
    "c": {
        "workflow_agent_facts": {"platform": {"cpus": 8, "memory_mb": 16384}},
        "workflow_agent_weight_memory_mb": 8192,
        "workflow_agent_min_instances": None,
    },
}


def test_weights_come_from_hostvars_and_hosts_are_sorted():
    got = fleet_plan_filter(["c", "b", "a"], HOSTVARS, target=8)
    assert got["weights"] == {"a": 2, "b": 4, "c": 2}
    assert list(got["plan"]) == ["a", "b", "c"]
    assert got["plan"]["a"] == {"instances": 1, "slots": 1}  # its max
    assert sum(p["slots"] for p in got["plan"].values()) == 8


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": 200}, "pool_plan: target 200 is above the cap of 150"),
        ({"target": None}, "fleet_plan: hostvars and target are required"),
    ],
)
def test_errors_are_filter_errors(kwargs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        fleet_plan_filter(["a", "b"], HOSTVARS, **kwargs)
