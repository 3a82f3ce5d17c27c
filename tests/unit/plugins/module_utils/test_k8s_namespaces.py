"""The agent_k8s role's namespace checks and replica plan (module_utils/k8s_namespaces.py)."""

from __future__ import annotations

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_namespaces import (
    namespace_plan,
)


def test_names_and_dicts_become_entries_in_order():
    got = namespace_plan(["b", {"name": "a", "weight": 2}, 7])
    assert got["namespaces"] == [{"name": "b"}, {"name": "a", "weight": 2}, {"name": "7"}]
    assert got["names"] == ["b", "a", "7"]
    assert got["problems"] == []


def test_each_namespace_takes_its_replicas_else_the_default():
    got = namespace_plan(["a", {"name": "b", "replicas": 3}], replicas=2)
    assert got["replicas"] == {"a": 2, "b": 3}
    assert got["min_replicas"] == {"a": 2, "b": 3}


def test_a_pool_target_is_spread_by_weight_and_bounds():
    got = namespace_plan(["a", {"name": "b", "weight": 2}], pool_target=6)
    assert got["replicas"] == {"a": 2, "b": 4}
    capped = namespace_plan([{"name": "a", "max": 1}, "b"], pool_target=6, slots=2)
    assert capped["replicas"] == {"a": 1, "b": 2}  # a: at most 1 replica (2 slots), b the rest


def test_a_plan_made_elsewhere_wins_over_a_target():
    plan = {"a": {"instances": 5, "slots": 5}, "b": {"instances": 0, "slots": 0}}
    got = namespace_plan(["a", "b"], plan=plan, pool_target=2, replicas=9)
    assert got["replicas"] == {"a": 5, "b": 0}


@pytest.mark.parametrize(
    ("autoscaling", "min_replicas", "expected"),
    [
        ("none", None, {"a": 0, "b": 2}),
        ("hpa", None, {"a": 1, "b": 2}),
        ("keda", 0, {"a": 0, "b": 0}),
    ],
)
def test_autoscaler_lower_bounds(autoscaling, min_replicas, expected):
    plan = {"a": {"instances": 0}, "b": {"instances": 2}}
    got = namespace_plan(["a", "b"], plan=plan, min_replicas=min_replicas, autoscaling=autoscaling)
    assert got["min_replicas"] == expected


def test_state_absent_checks_the_names_and_plans_nothing():
    got = namespace_plan(["a"], state="absent", plan={"x": {"instances": 1}})
    assert got == {
        "namespaces": [{"name": "a"}],
        "names": ["a"],
        "replicas": {},
        "min_replicas": {},
        "problems": [],
    }


V = "workflow_agent_k8s_namespaces"


@pytest.mark.parametrize(
    ("namespaces", "kwargs", "message"),
    [
        ([], {}, f"{V} must list at least one namespace"),
        ("ns-a", {}, f"{V} must be a list of namespace names or dicts"),
        ({"name": "a"}, {}, f"{V} must be a list of namespace names or dicts"),
        (
            [{"name": "a", "slots": 2, "zone": 1}],
            {},
            f"{V}: unknown key(s) slots, zone; a namespace entry is a name or a dict with the keys "
            "name, weight, min, max, replicas",
        ),
        (
            ["ok", "Not_A_Label", "x" * 64],
            {},
            f"{V}: not a lowercase RFC 1123 label (letters, digits and -, at most 63 characters): "
            f"Not_A_Label, {'x' * 64}",
        ),
        (["a", "b", "a", "b", "a"], {}, f"{V}: listed twice: a, b"),
        (
            ["a", "ns-z"],
            {"plan": {"a": {"instances": 1}, "b": {"instances": 1}}},
            "workflow_agent_k8s_plan has no entry (with `instances`) for the namespace(s) ns-z "
            "(its keys: a, b)",
        ),
        (
            ["a"],
            {"pool_target": 151},
            "pool_plan: target 151 is above the cap of 150 concurrent workflows",
        ),
        (
            ["a"],
            {"pool_target": 2, "slots": 0},
            "pool_plan: slots_per_instance must be at least 1, got 0",
        ),
        ([{"name": "a", "replicas": "two"}], {}, f"{V}: replicas must be whole numbers"),
    ],
)
def test_problems_name_the_variable(namespaces, kwargs, message):
    problems = namespace_plan(namespaces, **kwargs)["problems"]
    assert len(problems) == 1, problems
    assert problems[0].startswith(message), problems


def test_unknown_keys_and_bad_names_are_reported_together():
    problems = namespace_plan([{"name": "Bad", "slots": 1}])["problems"]
    assert [p.split(":")[1].split()[0] for p in problems] == ["unknown", "not"]
