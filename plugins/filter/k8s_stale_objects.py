# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: k8s_stale_objects
short_description: The agent_k8s role's optional objects that a changed setting leaves behind
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The agent Deployment lists in an annotation the optional kinds it was applied with (an HPA,
    a ScaledObject, a ServiceMonitor, a PodDisruptionBudget, the role's token and proxy
    Secrets). Given what each namespace's Deployment said before this run, this filter returns
    the C([namespace, kind]) pairs made before and switched off now, for the role to delete.
positional: _input, annotation, made, kinds
options:
  _input:
    description:
      - The registered results of reading each namespace's Deployment (C(item), C(resources)).
    type: list
    elements: dict
    required: true
  annotation:
    description: The annotation that lists the kinds.
    type: str
    required: true
  made:
    description: The kinds this run makes.
    type: list
    elements: str
    required: true
  kinds:
    description: The known optional kinds (others in the annotation are ignored).
    type: raw
    required: true
  keep_secret:
    description:
      - Never delete the token Secret (it is now one the user manages under the role's name).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Which optional objects to delete
  ansible.builtin.debug:
    msg: >-
      {{ deployments.results | selfhosted.workflow_agent.k8s_stale_objects(
           'workflow-agent/optional-objects', ['Secret'], ['HorizontalPodAutoscaler', 'Secret']) }}
"""

RETURN = r"""
_value:
  description: C([namespace, kind]) pairs, in the order found.
  type: list
  elements: list
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_status import (  # noqa: E402
    stale_objects,
)


class FilterModule(object):
    def filters(self):
        return {"k8s_stale_objects": stale_objects}
