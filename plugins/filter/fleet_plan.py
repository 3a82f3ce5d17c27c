# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_plan
short_description: The plan playbook's plan of a pool over the hosts of a play
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Weighs each host and plans the pool over them with the
    P(selfhosted.workflow_agent.pool_plan#filter) planner, as the C(plan) playbook (and so
    C(rollout) and C(scale)) does.
  - A host's weight is its C(workflow_agent_weight), else
    C(max(1, min(cpus, memory_mb // workflow_agent_weight_memory_mb))) from the
    C(workflow_agent_facts.platform) that the C(agent) role's C(platform) entry point publishes
    (C(workflow_agent_weight_memory_mb) default 2048).
    C(workflow_agent_min_instances) and C(workflow_agent_max_instances) bound its instances.
  - A host with N instances names them C(1) .. C(N), so scaling down removes the highest.
positional: _input, hostvars
options:
  _input:
    description: The hosts, by inventory name (planned in sorted order).
    type: list
    elements: str
    required: true
  hostvars:
    description: The C(hostvars) magic variable.
    type: raw
    required: true
  target:
    description: C(workflow_agent_pool_target), the pool's slots.
    type: int
    required: true
  slots_per_instance:
    description: C(workflow_agent_slots_per_instance).
    type: int
    default: 1
  cap:
    description: C(workflow_agent_pool_cap).
    type: int
    default: 150
"""

EXAMPLES = r"""
- name: Plan 6 slots over the play's hosts
  ansible.builtin.set_fact:
    fleet: "{{ ansible_play_hosts | selfhosted.workflow_agent.fleet_plan(hostvars, target=6) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The plan and what the playbooks show and apply of it.
  type: dict
  contains:
    plan:
      description:
        - The P(selfhosted.workflow_agent.pool_plan#filter) answer, C(instances) and C(slots)
          per host.
      type: dict
    weights:
      description: Each host's weight.
      type: dict
    instances:
      description: Each host's instance list for the agent role, C([{name, slots}, ...]).
      type: dict
    lines:
      description: One line per host and a total, as the plan playbook shows them.
      type: list
      elements: str
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.fleet_plan import (  # noqa: E402
    DEFAULT_WEIGHT_MEMORY_MB,
    capacity,
    fleet_plan,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.host_vars import (  # noqa: E402
    host_var,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.pool_plan import (  # noqa: E402
    DEFAULT_CAP,
    DEFAULT_SLOTS_PER_INSTANCE,
    PoolPlanError,
)


def _host(name, hv):
    host = {"name": name}
    weight = host_var(hv, "workflow_agent_weight")
    if weight is None:
        # The agent role's platform entry point publishes it (roles/agent/README.md).
        facts = host_var(hv, "workflow_agent_facts", {}).get("platform") or {}
        weight = capacity(
            facts.get("cpus"),
            facts.get("memory_mb"),
            host_var(hv, "workflow_agent_weight_memory_mb", DEFAULT_WEIGHT_MEMORY_MB),
        )
    host["weight"] = weight
    for key, var in (
        ("min", "workflow_agent_min_instances"),
        ("max", "workflow_agent_max_instances"),
    ):
        value = host_var(hv, var)
        if value is not None:
            host[key] = value
    return host


def fleet_plan_filter(
    hosts,
    hostvars=None,
    target=None,
    slots_per_instance=DEFAULT_SLOTS_PER_INSTANCE,
    cap=DEFAULT_CAP,
):
    if hostvars is None or target is None:
        raise AnsibleFilterError("fleet_plan: hostvars and target are required")
    try:
        specs = [_host(name, hostvars[name]) for name in sorted(hosts)]
        return fleet_plan(specs, target, slots_per_instance=slots_per_instance, cap=cap)
    except PoolPlanError as exc:
        raise AnsibleFilterError("pool_plan: %s" % exc) from None


class FilterModule(object):
    def filters(self):
        return {"fleet_plan": fleet_plan_filter}
