# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: k8s_pod_problems
short_description: Why the agent_k8s role's agent pods are not ready, one line per pod
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - For each agent pod that is not ready (pods being deleted left out), its namespace and
    name and why. That is each container's waiting or terminated reason and message with its
    restarts, or the pod's phase and condition messages when no container has started.
positional: _input
options:
  _input:
    description:
      - The registered results of listing each namespace's agent pods (C(item), C(resources)).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Fail with what keeps the agent pods from being ready
  ansible.builtin.fail:
    msg: "{{ pods.results | selfhosted.workflow_agent.k8s_pod_problems | join('; ') }}"
"""

RETURN = r"""
_value:
  description: C(namespace/pod why) lines.
  type: list
  elements: str
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_status import (  # noqa: E402
    pod_problems,
)


class FilterModule(object):
    def filters(self):
        return {"k8s_pod_problems": pod_problems}
