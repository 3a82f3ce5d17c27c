# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: agent_probe_problems
short_description: What the agent role's look at a host says is missing (a usable Python)
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The C(agent) role looks at a host by running its host-state script with each candidate
    Python. This filter turns those runs into problems, one message each. None of the candidates
    ran, or (O(state=present)) none of those that ran is Python 3.10 or later.
positional: _input, probed
options:
  _input:
    description:
      - The registered results of the probe loop, each with its C(item) (the Python) and C(stderr).
    type: list
    elements: dict
    required: true
  probed:
    description:
      - The reports of the probes that ran, each with C(ok) (a usable Python) and C(python).
    type: list
    elements: dict
    required: true
  state:
    description: C(workflow_agent_state); a missing usable Python matters for V(present) only.
    type: str
    default: present
"""

EXAMPLES = r"""
- name: Fail when no candidate Python can run the agent
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | join('; ') }}"
  vars:
    _problems: "{{ probes.results | selfhosted.workflow_agent.agent_probe_problems(probed) }}"
"""

RETURN = r"""
_value:
  description: One message per problem; empty when a usable Python was found.
  type: list
  elements: str
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_instances import (  # noqa: E402
    probe_problems,
)


class FilterModule(object):
    def filters(self):
        return {"agent_probe_problems": probe_problems}
