# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin plugins/action/k8s_plan.py on the controller; this file
# only documents it.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_plan
short_description: The agent_k8s role's internal planning steps
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Internal to the C(selfhosted.workflow_agent.agent_k8s) role. Its options and its RV(plan)
    follow the role and are not a stable interface; call the role instead.
  - Runs one step of the role's logic on the controller, and never contacts the host. Each step
    is a pure function of the collection's C(plugins/module_utils) (C(k8s_namespaces.py),
    C(k8s_chart_values.py), C(k8s_status.py), C(k8s_adopt.py)), and RV(plan) is what it returns.
  - Problems with the role's variables are returned in RV(plan) (one message each, naming the
    variable), not raised, so that the role fails once with all of them before it changes
    anything.
options:
  step:
    description:
      - V(namespaces) checks O(namespaces) (C(workflow_agent_k8s_namespaces)) and plans each
        namespace's replicas and autoscaler lower bound.
      - V(chart_values) works out each namespace's chart values and the Namespaces and Secrets
        (without data) the role applies itself, from O(settings) and O(namespace_plan).
      - V(pod_problems) says why agent pods are not ready, one line per pod, from O(results).
      - V(adoption_installs) finds upstream's installs in O(results) (the Deployment
        C(workflow-agent-pool) looked up in each namespace).
      - V(adoption_reads) lists the objects to read for O(upstream) in O(namespaces).
      - V(adoption_settings) takes the distinct pool tokens, service URLs and workers' service
        account annotations from O(results) (those reads), and the problem when the installs
        disagree; it returns tokens, so its task must set C(no_log).
    type: str
    required: true
    choices: [adoption_installs, adoption_reads, adoption_settings, chart_values, namespaces,
              pod_problems]
  namespaces:
    description:
      - O(step=namespaces), C(workflow_agent_k8s_namespaces) (names, or dicts with C(name),
        C(weight), C(min), C(max), C(replicas)).
      - O(step=adoption_reads), the planned namespace names.
    type: raw
  state:
    description: O(step=namespaces), C(workflow_agent_k8s_state); replicas are planned for
      V(present) only.
    type: str
    default: present
  plan:
    description: O(step=namespaces), C(workflow_agent_k8s_plan), a plan made elsewhere.
    type: dict
  pool_target:
    description: O(step=namespaces), C(workflow_agent_k8s_pool_target).
    type: int
  slots:
    description: O(step=namespaces), C(workflow_agent_k8s_slots).
    type: int
    default: 1
  cap:
    description: O(step=namespaces), C(workflow_agent_k8s_pool_cap).
    type: int
    default: 150
  replicas:
    description: O(step=namespaces), C(workflow_agent_k8s_replicas).
    type: int
    default: 1
  min_replicas:
    description: O(step=namespaces), C(workflow_agent_k8s_min_replicas).
    type: int
  autoscaling:
    description: O(step=namespaces), C(workflow_agent_k8s_autoscaling).
    type: str
    default: none
  settings:
    description: O(step=chart_values), the role's variables by name, without the token.
    type: dict
  namespace_plan:
    description: O(step=chart_values), the RV(plan) of O(step=namespaces).
    type: dict
  digests:
    description:
      - O(step=chart_values), namespace to a digest of its token (and proxy) Secret data;
        missing or empty means unknown.
    type: dict
  results:
    description:
      - The registered results of a C(kubernetes.core.k8s_info) loop (each with its C(item)
        and C(resources)), for O(step=pod_problems), O(step=adoption_installs) and
        O(step=adoption_settings).
    type: list
    elements: dict
  upstream:
    description: O(step=adoption_reads) and O(step=adoption_settings), the RV(plan) of
      O(step=adoption_installs).
    type: list
    elements: dict
  name:
    description: C(workflow_agent_k8s_name), whose objects keep what an adoption took.
    type: str
    default: workflow-agent
  token_key:
    description: C(workflow_agent_k8s_token_secret_key), the key of the token in the role's Secret.
    type: str
    default: PULUMI_AGENT_TOKEN
  given:
    description:
      - O(step=adoption_settings), what the play sets itself (C(token), C(service_url),
        C(worker_annotations)); only whether each is set matters.
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - selfhosted.workflow_agent.attributes
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details:
      - It only computes, so it runs in check mode too and returns the same.
  diff_mode:
    support: none
  idempotent:
    support: full
  platform:
    platforms: all
seealso:
  - module: selfhosted.workflow_agent.agent_host_info
"""

EXAMPLES = r"""
# Internal to the agent_k8s role: its preflight plans the namespaces like this.
- name: Check the namespaces and plan their replicas
  selfhosted.workflow_agent.k8s_plan:
    step: namespaces
    namespaces: [ns-a, {name: ns-b, weight: 2}]
    pool_target: 6
  register: namespace_plan
  # namespace_plan.plan.replicas: {"ns-a": 2, "ns-b": 4}
"""

RETURN = r"""
plan:
  description:
    - What the step's function returns (internal to the role; not a stable interface).
      V(namespaces) and V(chart_values) return a dict with C(problems), V(pod_problems) a list
      of C(namespace/pod why) lines, V(adoption_installs) and V(adoption_reads) lists of dicts,
      V(adoption_settings) a dict with C(tokens), C(urls), C(annotations) and C(problem).
  returned: success
  type: raw
  sample: {"namespaces": [{"name": "ns-a"}], "names": ["ns-a"], "replicas": {"ns-a": 1},
           "min_replicas": {"ns-a": 1}, "problems": []}
"""
