# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: prometheus_file_sd
short_description: Prometheus file_sd scrape targets of a pool's planned agent instances
version_added: 0.1.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Builds the content of a Prometheus C(file_sd) file, one target group per agent instance,
    with the instance's C(/metrics) address (C(address:port)) and the labels C(host),
    C(instance) (C(<host>/<name>)), C(deploy_target) and C(pool).
  - Reads each host's variables from O(hostvars), as the rollout and scale playbooks leave
    them; the result only depends on them, so the same plan always gives the same file.
  - The instance I(i) (from 0) of a host listens on its C(workflow_agent_http_port_base) + I(i)
    unless it names its C(http_server_port), as in the agent role.
positional: _input, hostvars
options:
  _input:
    description:
      - The hosts, by inventory name (a list, or the plan dict whose keys are the names). A host
        with no instances adds no target.
    type: raw
    required: true
  hostvars:
    description:
      - The C(hostvars) magic variable. Per host, the filter reads
        C(workflow_agent_planned_instances) (else C(workflow_agent_instances) when it is a list),
        C(workflow_agent_prometheus_address) (else C(ansible_host), else the inventory name),
        C(workflow_agent_http_port_base) (default V(8080)) and C(workflow_agent_deploy_target)
        (default V(docker), the agent's).
    type: raw
    required: true
  pool:
    description: The value of the C(pool) label of every target; none when not set.
    type: str
"""

EXAMPLES = r"""
- name: Write the scrape targets of the planned instances
  ansible.builtin.copy:
    dest: /etc/prometheus/file_sd/workflow_agents.json
    content: >-
      {{ workflow_agent_plan
         | selfhosted.workflow_agent.prometheus_file_sd(hostvars, pool='default')
         | to_nice_json }}
    mode: "0644"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
_value:
  description:
    - The file_sd document, sorted by host then instance.
  type: list
  elements: dict
  contains:
    targets:
      description: One C(address:port).
      type: list
      elements: str
    labels:
      description: C(host), C(instance), and C(deploy_target) and C(pool) when known.
      type: dict
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.host_vars import (  # noqa: E402
    host_var,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.prometheus_file_sd import (  # noqa: E402
    DEFAULT_PORT_BASE,
    FileSdError,
    file_sd_targets,
)


def prometheus_file_sd(hosts, hostvars=None, pool=None):
    if hostvars is None:
        raise AnsibleFilterError(
            "prometheus_file_sd: hostvars is required, e.g. prometheus_file_sd(hostvars)"
        )
    names = sorted(hosts.keys() if isinstance(hosts, dict) else hosts)
    entries = []
    for name in names:
        try:
            hv = hostvars[name]
        except KeyError:
            raise AnsibleFilterError(
                "prometheus_file_sd: %r is not a host of the inventory" % name
            ) from None
        instances = host_var(hv, "workflow_agent_planned_instances")
        if instances is None:
            instances = host_var(hv, "workflow_agent_instances", [])
            if not isinstance(instances, list):  # a count N: instances 1..N
                instances = [str(i) for i in range(1, int(instances) + 1)]
        entries.append(
            {
                "host": name,
                "address": host_var(hv, "workflow_agent_prometheus_address")
                or host_var(hv, "ansible_host")
                or name,
                "instances": list(instances),
                "port_base": host_var(hv, "workflow_agent_http_port_base", DEFAULT_PORT_BASE),
                # Unset, the agent runs jobs on its default target, docker.
                "deploy_target": host_var(hv, "workflow_agent_deploy_target") or "docker",
            }
        )
    try:
        return file_sd_targets(entries, pool=pool)
    except FileSdError as exc:
        raise AnsibleFilterError("prometheus_file_sd: %s" % exc) from None


class FilterModule(object):
    def filters(self):
        return {"prometheus_file_sd": prometheus_file_sd}
