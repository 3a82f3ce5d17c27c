# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: k8s_namespace_plan
short_description: Check the agent_k8s namespaces and plan the replicas of each
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The logic of the C(agent_k8s) role's namespaces, in one tested place. Checks the entries of
    C(workflow_agent_k8s_namespaces) (names or dicts with C(name), C(weight), C(min), C(max),
    C(replicas); RFC 1123 labels, each listed once).
  - With O(state=present), works out each namespace's replicas, the first that applies
    O(plan) (which must cover every namespace), the pool planner over the namespaces when
    O(pool_target) is set (the P(selfhosted.workflow_agent.pool_plan#filter) of hosts, with the
    namespaces' weights and bounds), else the entry's C(replicas), else O(replicas); and each
    autoscaler's lower bound (O(min_replicas), else the replicas; at least 1 for C(hpa)).
  - Problems are returned (one message each, naming the variable), not raised, so a role can
    fail once with all of them before it changes anything.
positional: _input
options:
  _input:
    description: C(workflow_agent_k8s_namespaces).
    type: raw
    required: true
  state:
    description: The role's C(workflow_agent_k8s_state); replicas are planned for V(present) only.
    type: str
    default: present
  plan:
    description: C(workflow_agent_k8s_plan), a plan made elsewhere (namespace -> C(instances)).
    type: dict
  pool_target:
    description: C(workflow_agent_k8s_pool_target), the pool's slots to spread over the namespaces.
    type: int
  slots:
    description: C(workflow_agent_k8s_slots), the slots per replica.
    type: int
    default: 1
  cap:
    description: C(workflow_agent_k8s_pool_cap), the pool planner's cap.
    type: int
    default: 150
  replicas:
    description: C(workflow_agent_k8s_replicas), replicas per namespace when nothing else says.
    type: int
    default: 1
  min_replicas:
    description: C(workflow_agent_k8s_min_replicas), the autoscalers' lower bound.
    type: int
  autoscaling:
    description: C(workflow_agent_k8s_autoscaling) (V(none), V(hpa) or V(keda)).
    type: str
    default: none
"""

EXAMPLES = r"""
- name: Plan 6 slots over two namespaces, the second weighted 2
  ansible.builtin.debug:
    msg: >-
      {{ ['ns-a', {'name': 'ns-b', 'weight': 2}]
         | selfhosted.workflow_agent.k8s_namespace_plan(pool_target=6) }}
  # replicas: {"ns-a": 2, "ns-b": 4}
"""

RETURN = r"""
_value:
  description: The checked namespaces and their plan.
  type: dict
  contains:
    namespaces:
      description: The entries as dicts, each with a C(name).
      type: list
      elements: dict
    names:
      description: The namespace names, in the given order.
      type: list
      elements: str
    replicas:
      description: Replicas per namespace (empty unless O(state=present) and no problem).
      type: dict
    min_replicas:
      description: The autoscalers' lower bound per namespace.
      type: dict
    problems:
      description: One message per problem; empty when all is well.
      type: list
      elements: str
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_namespaces import (  # noqa: E402
    namespace_plan,
)


class FilterModule(object):
    def filters(self):
        return {"k8s_namespace_plan": namespace_plan}
