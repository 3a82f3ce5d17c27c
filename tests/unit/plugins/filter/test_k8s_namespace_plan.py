"""The k8s_namespace_plan filter: registered under its name, and called as the role calls it."""

from __future__ import annotations

from ansible_collections.selfhosted.workflow_agent.plugins.filter.k8s_namespace_plan import (
    FilterModule,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_namespaces import (
    namespace_plan,
)


def test_registered_under_its_name():
    assert FilterModule().filters()["k8s_namespace_plan"] is namespace_plan


def test_the_roles_call_with_its_defaults():
    # roles/agent_k8s/defaults/main.yml: plan {}, pool_target null, cap 150, replicas 1,
    # slots 1, min_replicas null, autoscaling none.
    got = FilterModule().filters()["k8s_namespace_plan"](
        ["ns-a", {"name": "ns-b", "weight": 2}],
        state="present",
        plan={},
        pool_target=None,
        slots=1,
        cap=150,
        replicas=1,
        min_replicas=None,
        autoscaling="none",
    )
    assert got["replicas"] == {"ns-a": 1, "ns-b": 1}
    assert got["problems"] == []
