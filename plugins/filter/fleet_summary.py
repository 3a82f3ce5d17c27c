# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_summary
short_description: The lines rollout and scale end with, planned against actual per host
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - One line per host of the plan, its planned instances and slots, what it runs now (from the
    host's C(workflow_agent_result), which the playbooks' apply step sets) and the instances
    added and removed. A total line follows, and the pool's online agents when the fleet gate ran.
positional: _input, hostvars
options:
  _input:
    description: C(workflow_agent_plan), C(instances) and C(slots) per host.
    type: dict
    required: true
  hostvars:
    description: The C(hostvars) magic variable.
    type: raw
    required: true
  pool:
    description: The pool's name (for the online line).
    type: str
  online:
    description:
      - The agents the service sees online (the fleet gate's answer); none when it did not run.
    type: int
"""

EXAMPLES = r"""
- name: Show planned and actual concurrency per host
  ansible.builtin.debug:
    msg: "{{ workflow_agent_plan | selfhosted.workflow_agent.fleet_summary(hostvars) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The lines, hosts sorted by name.
  type: list
  elements: str
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.fleet_plan import (  # noqa: E402
    summary,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.host_vars import (  # noqa: E402
    host_var,
)


def fleet_summary(plan, hostvars, pool=None, online=None):
    results = dict((name, host_var(hostvars[name], "workflow_agent_result")) for name in plan)
    return summary(plan, results, pool=pool, online=online)


class FilterModule(object):
    def filters(self):
        return {"fleet_summary": fleet_summary}
