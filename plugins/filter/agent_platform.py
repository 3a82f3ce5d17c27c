# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: agent_platform
short_description: Read the agent role's look at a platform (KEY=value lines)
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The C(agent) role looks at a host with one raw shell command (no Python, no fact gathering)
    that prints C(SYSTEM), os-release's C(ID), C(ID_LIKE), C(VERSION_ID) and C(NAME) as
    C(OS_*), C(SERVICE_MGR), C(CPUS) and C(MEMORY_MB). This filter reads those lines.
  - The result is what the role publishes as C(workflow_agent_facts.platform).
positional: _input
options:
  _input:
    description: The command's output lines (other lines are ignored).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Read the platform
  ansible.builtin.debug:
    msg: >-
      {{ ['SYSTEM=Linux', 'OS_ID=debian', 'OS_VERSION_ID="12"', 'SERVICE_MGR=systemd']
         | selfhosted.workflow_agent.agent_platform }}
"""

RETURN = r"""
_value:
  description: The platform.
  type: dict
  contains:
    os_family:
      description: V(Debian), V(RedHat), V(Darwin), else the kernel's name.
      type: str
    distribution:
      description: os-release's C(NAME) (V(macOS) on macOS).
      type: str
    id:
      description: os-release's C(ID), lower case.
      type: str
    version:
      description: os-release's C(VERSION_ID), or the macOS version.
      type: str
    major_version:
      description: The part of O(_input)'s version before the first dot.
      type: str
    service_mgr:
      description: V(systemd) (PID 1's manager), V(launchd) (macOS) or V(unknown).
      type: str
    cpus:
      description: The CPUs processes may use.
      type: int
    memory_mb:
      description: The total memory in MiB (0 when unknown).
      type: int
    supported:
      description: Whether the agent role supports the platform.
      type: bool
    problem:
      description: Why the role does not support it, or an empty string.
      type: str
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_platform import (  # noqa: E402
    parse_platform,
)


class FilterModule(object):
    def filters(self):
        return {"agent_platform": parse_platform}
