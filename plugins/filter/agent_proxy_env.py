# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: agent_proxy_env
short_description: The agent role's proxy environment (both spellings)
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - C(workflow_agent_proxy) (C(http), C(https), C(no_proxy)) as environment variables,
    each in upper and lower case (Python honours both, curl in jobs only lowercase).
positional: _input
options:
  _input:
    description: C(workflow_agent_proxy).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The environment of a host behind a proxy
  ansible.builtin.debug:
    msg: "{{ {'https': 'http://proxy:3128'} | selfhosted.workflow_agent.agent_proxy_env }}"
  # {"HTTPS_PROXY": "http://proxy:3128", "https_proxy": "http://proxy:3128"}
"""

RETURN = r"""
_value:
  description: Variable names and values.
  type: dict
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_host import (  # noqa: E402
    proxy_env,
)


class FilterModule(object):
    def filters(self):
        return {"agent_proxy_env": proxy_env}
