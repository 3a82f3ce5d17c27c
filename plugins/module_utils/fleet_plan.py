# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan playbook's plan: host weights, the pool plan, instance names and the summary.

Pure functions with no Ansible imports (the ``fleet_plan`` filter reads the hosts' variables
and calls ``fleet_plan``), around the pool planner of ``pool_plan.py``:

- A host's weight is its ``workflow_agent_weight``, else its capacity from the facts the agent
  role's platform look found: ``max(1, min(cpus, memory_mb // weight_memory_mb))`` (CPUs
  alone when the memory is unknown).
- A host with N instances names them ``1`` .. ``N`` (so scaling down removes the highest); each
  carries ``slots_per_instance`` slots but the last, which takes what is left.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.pool_plan import (
    DEFAULT_CAP,
    DEFAULT_SLOTS_PER_INSTANCE,
    PoolPlanError,
    plan_pool,
)

__metaclass__ = type

DEFAULT_WEIGHT_MEMORY_MB = 2048


def capacity(cpus, memory_mb, weight_memory_mb=DEFAULT_WEIGHT_MEMORY_MB):
    """A host's weight from its CPUs and memory (MiB); unknown (0 or None) counts as absent."""
    try:
        cpus = int(cpus or 1)
        memory_mb = int(memory_mb or 0)
        per = int(weight_memory_mb)
    except (TypeError, ValueError) as exc:
        raise PoolPlanError(
            "host capacity: CPUs and memory must be whole numbers (%s)" % exc
        ) from None
    if per < 1:
        raise PoolPlanError("workflow_agent_weight_memory_mb must be at least 1, got %d" % per)
    by_memory = memory_mb // per if memory_mb > 0 else cpus
    return max(1, min(cpus, by_memory))


def instances(share, slots_per_instance=DEFAULT_SLOTS_PER_INSTANCE):
    """A host's share of the plan as its instance list: ``[{"name": "1", "slots": n}, ...]``."""
    per = int(slots_per_instance)
    return [
        {"name": str(i + 1), "slots": min(per, share["slots"] - i * per)}
        for i in range(share["instances"])
    ]


def fleet_plan(hosts, target, slots_per_instance=DEFAULT_SLOTS_PER_INSTANCE, cap=DEFAULT_CAP):
    """Plan ``target`` over ``hosts`` (each ``{"name", "weight"[, "min"][, "max"]}``).

    Returns ``{"plan": {host: {"instances", "slots"}}, "weights": {host: weight},
    "instances": {host: [...]}, "lines": [...]}`` (the lines the plan playbook shows).
    Raises PoolPlanError when the plan cannot be made.
    """
    plan = plan_pool(hosts, target, slots_per_instance=slots_per_instance, cap=cap)
    weights = dict((host["name"], host["weight"]) for host in hosts)
    per = int(slots_per_instance)
    lines = [
        "%s: %d instance(s), %d slot(s) (weight %s)"
        % (name, plan[name]["instances"], plan[name]["slots"], weights[name])
        for name in sorted(plan)
    ]
    lines.append(
        "total: %d slot(s) over %d host(s), %d per instance (target %s, cap %s)"
        % (sum(s["slots"] for s in plan.values()), len(plan), per, target, cap)
    )
    return {
        "plan": plan,
        "weights": weights,
        "instances": dict((name, instances(share, per)) for name, share in plan.items()),
        "lines": lines,
    }


def summary(plan, results, pool=None, online=None):
    """The lines rollout and scale end with: planned and actual concurrency per host.

    ``results``: each host's ``workflow_agent_result`` (playbooks/tasks/apply.yml), None where
    the host did not converge. ``online``: the fleet gate's count of agents the service sees.
    """
    rows = []
    total_instances = total_slots = 0
    for name in sorted(plan):
        share, result = plan[name], results.get(name)
        if result is None:
            actual = "not converged (failed or not reached)"
        elif not result.get("checked"):
            actual = "nothing to run" if share["instances"] == 0 else "not checked (check mode)"
        else:
            instances, slots = int(result.get("instances", 0)), int(result.get("slots", 0))
            actual = "%d instance(s), %d slot(s)" % (instances, slots)
            total_instances += instances
            total_slots += slots
        change = []
        if result is not None and result.get("added"):
            change.append("added " + ",".join(result["added"]))
        if result is not None and result.get("removed"):
            change.append("removed " + ",".join(result["removed"]))
        rows.append(
            "%s: planned %d instance(s), %d slot(s); actual %s%s"
            % (name, share["instances"], share["slots"], actual, "".join("; " + c for c in change))
        )
    rows.append(
        "total: planned %d slot(s); actual %d slot(s) in %d healthy instance(s)"
        % (sum(s["slots"] for s in plan.values()), total_slots, total_instances)
    )
    if online is not None:
        rows.append("pool %s: %d agent(s) online" % (pool, int(online)))
    return rows
