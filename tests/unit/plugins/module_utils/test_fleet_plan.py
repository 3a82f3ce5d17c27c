"""The plan playbook's plan (module_utils/fleet_plan.py): weights, names, summary lines."""

from __future__ import annotations

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.fleet_plan import (
    capacity,
    fleet_plan,
    instances,
    summary,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.pool_plan import (
    PoolPlanError,
)


@pytest.mark.parametrize(
    ("cpus", "memory_mb", "per", "weight"),
    [
        (8, 32768, 2048, 8),  # CPUs are the scarcer resource
        (8, 8192, 2048, 4),  # memory is
        (4, 1024, 2048, 1),  # never below 1
        (4, None, 2048, 4),  # memory unknown: CPUs alone
        (None, 0, 2048, 1),  # nothing known
        ("2", "65536", "1", 2),  # facts as strings
    ],
)
def test_capacity_is_the_scarcer_of_cpus_and_memory(cpus, memory_mb, per, weight):
    assert capacity(cpus, memory_mb, per) == weight


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((2, 4096, 0), "workflow_agent_weight_memory_mb must be at least 1, got 0"),
        (("many", 4096), "host capacity: CPUs and memory must be whole numbers"),
    ],
)
def test_capacity_refuses_what_it_cannot_count(args, message):
    with pytest.raises(PoolPlanError, match=message):
        capacity(*args)


def test_instances_are_named_from_1_and_the_last_takes_the_rest():
    assert instances({"instances": 3, "slots": 5}, 2) == [
        {"name": "1", "slots": 2},
        {"name": "2", "slots": 2},
        {"name": "3", "slots": 1},
    ]
    assert instances({"instances": 0, "slots": 0}, 2) == []


def test_the_plan_its_weights_names_and_lines():
    hosts = [{"name": "small", "weight": 1, "max": 1}, {"name": "big", "weight": 3}]
    got = fleet_plan(hosts, 7, slots_per_instance=2)
    assert got["plan"] == {
        "small": {"instances": 1, "slots": 2},
        "big": {"instances": 3, "slots": 5},
    }
    assert got["weights"] == {"small": 1, "big": 3}
    assert got["instances"]["big"][-1] == {"name": "3", "slots": 1}
    assert got["lines"] == [
        "big: 3 instance(s), 5 slot(s) (weight 3)",
        "small: 1 instance(s), 2 slot(s) (weight 1)",
        "total: 7 slot(s) over 2 host(s), 2 per instance (target 7, cap 150)",
    ]


def test_an_impossible_plan_raises_the_planners_error():
    with pytest.raises(PoolPlanError, match="target 151 is above the cap of 150"):
        fleet_plan([{"name": "a", "weight": 1}], 151)


PLAN = {
    "b": {"instances": 2, "slots": 3},
    "a": {"instances": 1, "slots": 1},
    "c": {"instances": 0, "slots": 0},
    "d": {"instances": 1, "slots": 1},
}


def test_the_summary_per_host_and_in_total():
    results = {
        "a": {"checked": True, "instances": "1", "slots": 1, "added": [], "removed": ["2"]},
        "b": {"checked": True, "instances": 2, "slots": 3, "added": ["1", "2"], "removed": []},
        "c": {"checked": False, "instances": 0, "slots": 0, "added": [], "removed": []},
        "d": None,
    }
    assert summary(PLAN, results, pool="p", online=3) == [
        "a: planned 1 instance(s), 1 slot(s); actual 1 instance(s), 1 slot(s); removed 2",
        "b: planned 2 instance(s), 3 slot(s); actual 2 instance(s), 3 slot(s); added 1,2",
        "c: planned 0 instance(s), 0 slot(s); actual nothing to run",
        "d: planned 1 instance(s), 1 slot(s); actual not converged (failed or not reached)",
        "total: planned 5 slot(s); actual 4 slot(s) in 3 healthy instance(s)",
        "pool p: 3 agent(s) online",
    ]


def test_check_mode_checks_nothing():
    results = {name: {"checked": False, "added": ["1"], "removed": []} for name in PLAN}
    lines = summary(PLAN, results)
    assert (
        lines[0] == "a: planned 1 instance(s), 1 slot(s); actual not checked (check mode); added 1"
    )
    assert lines[-1] == "total: planned 5 slot(s); actual 0 slot(s) in 0 healthy instance(s)"
