# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pool_plan
short_description: Spread a pool's target concurrency over hosts by weight
version_added: 0.1.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Plans how many agent instances and slots each host runs so that the slots of all hosts add
    up to exactly O(target).
  - Each host's exact share is O(target) times its weight divided by the total weight, clamped
    to its O(_input[].min) and O(_input[].max). Every host gets the whole part of its share;
    the few slots left over go to hosts with a fractional share, highest Sainte-Lague priority
    (weight / (slots + 1/2)) first, ties to the alphabetically first name.
  - The plan does not depend on the order of the hosts. Every host is within one slot of its
    exact share, and adding or removing a host moves (almost always exactly) the slots the new
    host gets or the old host had; with equal weights, exactly.
  - A host runs as many instances as its slots need, C(slots / slots_per_instance) rounded up;
    its last instance may carry fewer slots than O(slots_per_instance).
  - O(target=0) drains every host, whatever its O(_input[].min).
positional: _input, target
options:
  _input:
    description:
      - The hosts. Each item is a host name, or a dictionary with the keys below.
    type: list
    elements: raw
    required: true
    suboptions:
      name:
        description: The host's name (a key of the result).
        type: str
        required: true
      weight:
        description:
          - The host's capacity relative to the others, for example its vCPU count.
        type: float
        default: 1
      min:
        description:
          - The fewest instances this host runs while O(target) is above 0. It gets at least
            C(min * slots_per_instance) slots.
        type: int
        default: 0
      max:
        description:
          - The most instances this host runs; it gets at most C(max * slots_per_instance)
            slots. Unlimited when not set.
        type: int
  target:
    description:
      - The pool's total concurrency (slots) to place. V(0) drains everything.
    type: int
    required: true
  slots_per_instance:
    description:
      - Slots (concurrent jobs) per agent instance, the agent's C(slots) setting.
    type: int
    default: 1
  cap:
    description:
      - The highest O(target) accepted. Pulumi caps an organisation at 150 concurrent
        workflows.
    type: int
    default: 150
notes:
  - Errors (a target above O(cap) or above the hosts' total O(_input[].max), below their total
    O(_input[].min), a bad host entry) fail the task with a message naming the numbers.
"""

EXAMPLES = r"""
- name: Three equal hosts, nine slots
  ansible.builtin.debug:
    msg: "{{ ['a', 'b', 'c'] | selfhosted.workflow_agent.pool_plan(target=9) }}"
  # {"a": {"instances": 3, "slots": 3}, "b": {...same}, "c": {...same}}

- name: Weight each host by its vCPUs (gathered facts)
  ansible.builtin.set_fact:
    pool_hosts: >-
      {{ pool_hosts | default([])
         + [{'name': item, 'weight': hostvars[item].ansible_facts.processor_vcpus}] }}
  loop: "{{ ansible_play_hosts }}"
  run_once: true

- name: Plan 24 slots, 4 per agent instance
  ansible.builtin.set_fact:
    workflow_agent_plan: >-
      {{ pool_hosts | selfhosted.workflow_agent.pool_plan(target=24, slots_per_instance=4) }}
  run_once: true

- name: A small host capped at one instance, a big one kept at two or more
  ansible.builtin.debug:
    msg: >-
      {{ [{'name': 'small', 'max': 1}, {'name': 'big', 'weight': 4, 'min': 2}, 'other']
         | selfhosted.workflow_agent.pool_plan(target=12) }}
"""

RETURN = r"""
_value:
  description:
    - The plan, one entry per host name. The slots of all hosts add up to O(target).
  type: dict
  contains:
    instances:
      description: The number of agent instances to run on the host.
      type: int
    slots:
      description: The slots (concurrent jobs) those instances carry together.
      type: int
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.pool_plan import (  # noqa: E402
    DEFAULT_CAP,
    DEFAULT_SLOTS_PER_INSTANCE,
    PoolPlanError,
    plan_pool,
)


def pool_plan(hosts, target=None, slots_per_instance=DEFAULT_SLOTS_PER_INSTANCE, cap=DEFAULT_CAP):
    if target is None:
        raise AnsibleFilterError("pool_plan: target is required, e.g. pool_plan(target=9)")
    try:
        return plan_pool(hosts, target, slots_per_instance=slots_per_instance, cap=cap)
    except PoolPlanError as exc:
        raise AnsibleFilterError("pool_plan: %s" % exc) from None


class FilterModule(object):
    def filters(self):
        return {"pool_plan": pool_plan}
