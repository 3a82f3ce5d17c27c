# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: agent_base_paths
short_description: The directories and files the agent role puts in place on a host
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The config directory (root's, 0750 to the agent's group), the data directory and each
    instance's (and its C(shared/)), 0711 with a job user else 0750, launchd's log directory,
    the CA bundle (0644, or absent) and systemd's service environment file (0640).
    Files are described by the sha1 of their content, never the content.
positional: _input
options:
  _input:
    description: The present instances, each with its C(name).
    type: list
    required: true
  user:
    description: The agent's user.
    type: str
    required: true
  group:
    description: The agent's group.
    type: str
    required: true
  config_dir:
    description: C(workflow_agent_config_dir).
    type: str
    required: true
  data_dir:
    description: C(workflow_agent_data_dir).
    type: str
    required: true
  service_manager:
    description: V(systemd) or V(launchd).
    type: str
    required: true
  job_user:
    description: The process target's job user (empty for none).
    type: str
  log_dir:
    description: C(workflow_agent_log_dir) (launchd).
    type: str
  ca_bundle:
    description: C(workflow_agent_ca_bundle), PEM text (empty for none).
    type: str
  ca_path:
    description: Where the CA bundle goes.
    type: str
  root_group:
    description: Root's group on the host.
    type: str
  env_path:
    description: The service environment file (systemd).
    type: str
  env_text:
    description: That file's text.
    type: str
"""

EXAMPLES = r"""
- name: The paths of one instance
  ansible.builtin.debug:
    msg: >-
      {{ [{'name': '1'}] | selfhosted.workflow_agent.agent_base_paths(
           user='workflow-agent', group='workflow-agent', config_dir='/etc/workflow-agent',
           data_dir='/var/lib/workflow-agent', service_manager='systemd') }}
"""

RETURN = r"""
_value:
  description: One entry per path (C(path), C(state), C(owner), C(group), C(mode), C(sha1)).
  type: list
  elements: dict
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_host import (  # noqa: E402
    base_paths,
)


class FilterModule(object):
    def filters(self):
        return {"agent_base_paths": base_paths}
