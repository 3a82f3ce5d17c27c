# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: k8s_adoption
short_description: What the agent_k8s role takes over from upstream's Kubernetes install
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - The logic of the C(agent_k8s) role's C(workflow_agent_k8s_adopt), in one tested place
    (module_utils/k8s_adopt.py). Upstream's install is the Deployment C(workflow-agent-pool), the
    Secret C(agent-secret), the ConfigMap C(agent-config) and the workers' service account that
    pulumi/customer-managed-workflow-agent's component makes.
  - O(step=installs) takes the k8s_info results of C(workflow-agent-pool) per namespace and
    returns the installs found (C(namespace), C(worker_sa)).
  - O(step=reads) takes those installs and returns the objects to read (O(namespaces), O(name)).
  - O(step=settings) takes the k8s_info results of those reads and returns the distinct
    C(tokens), C(urls) and C(annotations) found, plus C(problem), one message naming the
    variable to set when the installs disagree (O(given)), or empty.
positional: _input
options:
  _input:
    description: k8s_info results (O(step=installs), O(step=settings)) or installs (O(step=reads)).
    type: list
    elements: dict
    required: true
  step:
    description: Which step.
    type: str
    choices: [installs, reads, settings]
    required: true
  namespaces:
    description: The planned namespaces (O(step=reads)).
    type: list
    elements: str
  name:
    description: The role's C(workflow_agent_k8s_name), whose objects keep what an adoption took.
    type: str
    default: workflow-agent
  token_key:
    description: The key of the token in this role's Secret.
    type: str
    default: PULUMI_AGENT_TOKEN
  upstream:
    description: The installs (O(step=settings)).
    type: list
    elements: dict
  given:
    description: What the play sets itself, C(token), C(service_url), C(worker_annotations).
    type: dict
"""

EXAMPLES = r"""
- name: The namespaces holding upstream's install
  ansible.builtin.debug:
    msg: "{{ found.results | selfhosted.workflow_agent.k8s_adoption(step='installs') }}"
"""

RETURN = r"""
_value:
  description: The installs, the reads, or the settings with C(problem), as O(step) says.
  type: raw
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import (  # noqa: E402
    k8s_adopt,
)


def adoption(
    data,
    step,
    namespaces=None,
    name="workflow-agent",
    token_key="PULUMI_AGENT_TOKEN",  # noqa: S107 - a key's name
    upstream=None,
    given=None,
):
    if step == "installs":
        return k8s_adopt.installs(data)
    if step == "reads":
        return k8s_adopt.reads(data, namespaces or [], name)
    if step == "settings":
        found = k8s_adopt.settings(data, name, token_key)
        found["problem"] = k8s_adopt.disagreements(upstream or [], found, given or {})
        return found
    raise AnsibleFilterError(
        "k8s_adoption: step must be installs, reads or settings, not %r" % step
    )


class FilterModule(object):
    def filters(self):
        return {"k8s_adoption": adoption}
