# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: k8s_agent_env
short_description: The agent_k8s role's agent container environment
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The env list of the C(agent_k8s) role's agent container, in order. The role's own variables
    come first (the config file, the pool token from its Secret, the pod's name as the instance,
    the worker pod patch, the workers' service account, and the workers' CPU, memory and pull
    policy when set).
  - The proxy follows. HTTP(S)_PROXY go in both spellings, read from the proxy Secret since the
    URLs may carry credentials. NO_PROXY is a plain value with the API server and the in-cluster
    names added.
  - O(extra) comes last, by name.
positional: _input
options:
  _input:
    description: The directory the role mounts its ConfigMap at.
    type: str
    required: true
  config_file:
    description: The agent config's file name in that directory.
    type: str
    required: true
  token_secret:
    description: The Secret holding the pool token.
    type: str
    required: true
  token_key:
    description: The token's key in that Secret.
    type: str
    required: true
  worker_service_account:
    description: The service account of the job pods.
    type: str
    required: true
  proxy_secret:
    description: The Secret the proxy URLs go to.
    type: str
    required: true
  proxy:
    description: C(workflow_agent_k8s_proxy), with the keys C(http), C(https) and C(no_proxy).
    type: dict
  worker_cpu:
    description: C(workflow_agent_k8s_worker_cpu).
    type: raw
  worker_memory:
    description: C(workflow_agent_k8s_worker_memory).
    type: raw
  worker_pull_policy:
    description: C(workflow_agent_k8s_worker_image_pull_policy).
    type: str
  extra:
    description: C(workflow_agent_k8s_env), more variables (none of the role's names).
    type: dict
"""

EXAMPLES = r"""
- name: The env of an agent container behind a proxy
  ansible.builtin.debug:
    msg: >-
      {{ '/etc/workflow-agent' | selfhosted.workflow_agent.k8s_agent_env(
           config_file='pulumi-workflow-agent.yaml', token_secret='workflow-agent-token',
           token_key='token', worker_service_account='workflow-agent-worker',
           proxy_secret='workflow-agent-proxy', proxy={'https': 'http://proxy:3128'}) }}
"""

RETURN = r"""
_value:
  description: The env and what it is made of.
  type: dict
  contains:
    env:
      description: The container's env list (C(name) with C(value) or C(valueFrom)).
      type: list
      elements: dict
    proxy_env:
      description: The proxy variables and their values.
      type: dict
    proxy_secret_data:
      description: The proxy variables kept in the proxy Secret (those with URLs).
      type: dict
    managed:
      description: Every name the role sets, which O(extra) may not.
      type: list
      elements: str
"""

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_agent_env import (  # noqa: E402
    agent_env,
)


class FilterModule(object):
    def filters(self):
        return {"k8s_agent_env": agent_env}
