# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: agent_host_expected
short_description: What the agent role's look at a host is asked
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The request for the role's look at the host (M(selfhosted.workflow_agent.agent_host_info)),
    that is the directories to list and the units to find, and with O(_input=present) the
    wanted paths, user, groups, files, health ports and unit states.
positional: _input
options:
  _input:
    description: C(workflow_agent_state).
    type: str
    required: true
  service_manager:
    description: V(systemd) or V(launchd).
    type: str
    required: true
  config_dir:
    description: C(workflow_agent_config_dir).
    type: str
    required: true
  install_dir:
    description: C(workflow_agent_install_dir).
    type: str
    required: true
  venv:
    description: The version's virtualenv.
    type: str
    required: true
  unit:
    description: The unit's name (without C(@.service)).
    type: str
    required: true
  unit_path:
    description: The template unit's path.
    type: str
    required: true
  paths:
    description: P(selfhosted.workflow_agent.agent_base_paths#filter)'s answer.
    type: list
    required: true
  present:
    description: The present instances, each with its C(name) and C(port).
    type: list
    required: true
  user_spec:
    description: The agent's user (C(name), C(group), C(shell), C(home), C(comment)).
    type: dict
    required: true
  job_user_spec:
    description:
      - The process target's job user (C(name), C(group), C(shell), C(home), C(comment)), if
        any; its home is looked at too (a directory of its own, 0700).
    type: dict
  launchd_dir:
    description: The LaunchDaemons directory (launchd).
    type: str
  health:
    description: Whether to read each instance's C(/healthz).
    type: bool
  started:
    description: Whether the units should run.
    type: bool
  enabled:
    description: Whether the units should start at boot.
    type: bool
"""

EXAMPLES = r"""
- name: What to ask a systemd host with nothing to install
  ansible.builtin.debug:
    msg: >-
      {{ 'absent' | selfhosted.workflow_agent.agent_host_expected(
           service_manager='systemd', config_dir='/etc/workflow-agent',
           install_dir='/opt/workflow-agent', venv='/opt/workflow-agent/0.2.0',
           unit='workflow-agent', unit_path='/etc/systemd/system/workflow-agent@.service',
           paths=[], present=[], user_spec={}) }}
"""

RETURN = r"""
_value:
  description:
    - The request, C(lists) and C(systemd), and with state present C(paths), C(users), C(groups),
      C(reads), C(health) and C(files).
  type: dict
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_host import (  # noqa: E402
    expected,
)


class FilterModule(object):
    def filters(self):
        return {"agent_host_expected": expected}
