# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: k8s_chart_values
short_description: The agent_k8s role's variables as the workflow-agent chart's values
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The one place where a variable of the C(agent_k8s) role becomes a value of the
    C(workflow-agent) Helm chart (C(charts/workflow-agent/values.yaml) documents them).
  - The pool token is never a value. The role applies its Secret (or reads the user's) and the
    values name it (C(existingSecret)) with a digest of its data (C(existingSecretChecksum)),
    which rolls the pods when it changes. Proxy URLs go the same way (C(proxy.existingSecret)).
  - Problems are returned (one message each, naming the variable), not raised.
positional: _input
options:
  _input:
    description:
      - The role's variables by name (C(workflow_agent_k8s_*)), without the token.
    type: dict
    required: true
  plan:
    description: The result of P(selfhosted.workflow_agent.k8s_namespace_plan#filter).
    type: dict
    required: true
  digests:
    description:
      - Namespace to a digest of its token (and proxy) Secret data; missing or empty means
        unknown (no roll on a rotation).
    type: dict
"""

EXAMPLES = r"""
- name: The values of each namespace's release
  ansible.builtin.set_fact:
    values: >-
      {{ {'workflow_agent_k8s_name': 'workflow-agent', 'workflow_agent_k8s_image': 'r.example/wa:1'}
         | selfhosted.workflow_agent.k8s_chart_values(plan=namespace_plan) }}
"""

RETURN = r"""
_value:
  description: The values of each namespace, and the problems found.
  type: dict
  contains:
    values:
      description: Namespace name to its release's values (empty with problems).
      type: dict
    problems:
      description: One message per problem; empty when all is well.
      type: list
      elements: str
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_chart_values import (  # noqa: E402
    chart_values,
)


class FilterModule(object):
    def filters(self):
        return {"k8s_chart_values": chart_values}
