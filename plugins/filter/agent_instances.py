# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: agent_instances
short_description: The agent role's instances, their ports, and what is wrong with them
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The logic of the C(agent) role's C(workflow_agent_instances), in one tested place.
  - A count N gives the instances C(1) .. C(N); a list gives one instance per name or dict
    (C(name), C(state), C(deploy_target), C(slots), C(http_server_port),
    C(env_forward_allowlist), C(enabled_workflow_types), C(config)).
  - The instance at position I(i) (from 0, absent ones counted) listens on O(port_base) + I(i)
    unless it names its C(http_server_port).
  - Problems are returned (one message each, naming the variable), not raised, so the role can
    fail once with all of them before it changes anything.
positional: _input
options:
  _input:
    description: C(workflow_agent_instances), a count from 0 to 64 or a list.
    type: raw
    required: true
  port_base:
    description: C(workflow_agent_http_port_base).
    type: int
    default: 8080
  config:
    description: C(workflow_agent_config), checked for keys the role sets itself.
    type: dict
  version:
    description: C(workflow_agent_version), checked to be a version string (empty is fine).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Three instances, the second one removed
  ansible.builtin.debug:
    msg: >-
      {{ ['a', {'name': 'b', 'state': 'absent'}, 'c'] | selfhosted.workflow_agent.agent_instances }}
  # present: [{"name": "a", "port": 8080}, {"name": "c", "port": 8082}]
"""

RETURN = r"""
_value:
  description: The instances and the problems found.
  type: dict
  contains:
    instances:
      description: Every instance as a dict with a string C(name), in the given order.
      type: list
      elements: dict
    present:
      description: The present instances, each with its C(name) and C(port).
      type: list
      elements: dict
    problems:
      description: One message per problem; empty when all is well.
      type: list
      elements: str
    managed_keys:
      description: The agent keys the role sets per instance itself (never from a user's config).
      type: list
      elements: str
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_instances import (  # noqa: E402
    instance_plan,
)


class FilterModule(object):
    def filters(self):
        return {"agent_instances": instance_plan}
