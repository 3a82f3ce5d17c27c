"""The pool_plan filter: the contract the playbooks call, and errors as AnsibleFilterError."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible.template import Templar
from ansible_collections.selfhosted.workflow_agent.plugins.filter.pool_plan import (
    FilterModule,
    pool_plan,
)

try:  # ansible-core >= 2.19 only renders strings marked as trusted templates
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older ansible-core

    def trust_as_template(value):
        return value


def test_registered_under_its_name():
    assert FilterModule().filters()["pool_plan"] is pool_plan


def test_contract_call():
    plan = pool_plan(["a", "b", "c"], target=9, slots_per_instance=1, cap=150)
    assert plan == {n: {"instances": 3, "slots": 3} for n in "abc"}


def test_target_is_required():
    with pytest.raises(AnsibleFilterError, match=r"pool_plan: target is required"):
        pool_plan(["a"])


@pytest.mark.parametrize(
    ("hosts", "kwargs", "message"),
    [
        (["a"], {"target": 200}, "pool_plan: target 200 is above the cap of 150"),
        ([{"name": "a", "max": 1}], {"target": 2}, "above the hosts' total max of 1 slot"),
        (["a", "a"], {"target": 1}, "host 'a' is listed twice"),
    ],
)
def test_planning_errors_become_filter_errors(hosts, kwargs, message):
    with pytest.raises(AnsibleFilterError) as err:
        pool_plan(hosts, **kwargs)
    assert message in str(err.value)


def test_through_jinja_by_fqcn():
    """The filter as a playbook calls it, resolved by its FQCN through the template engine."""
    templar = Templar(loader=None, variables={"hosts": ["a", "b", "c", "d"]})
    plan = templar.template(
        trust_as_template("{{ hosts | selfhosted.workflow_agent.pool_plan(target=9) }}")
    )
    assert sorted(e["slots"] for e in plan.values()) == [2, 2, 2, 3]
    mapped = templar.template(
        trust_as_template(
            "{{ hosts | map('upper') | selfhosted.workflow_agent.pool_plan(target=2) }}"
        )
    )
    assert sum(e["slots"] for e in mapped.values()) == 2
