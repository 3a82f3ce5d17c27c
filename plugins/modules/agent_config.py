# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin plugins/action/agent_config.py on the controller; this
# file only documents it.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: agent_config
short_description: Validate and write a workflow agent's config file, secrets masked
version_added: 0.1.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Validates O(config) with the agent's own config schema (C(workflow_agent.config), vendored in
    this collection under C(agent/src); one source of truth, never a copy), then writes it as
    YAML to O(dest) on the host, atomically, with O(owner), O(group) and O(mode).
  - Validation and rendering run on the controller, so the host needs nothing but Python. The
    controller needs pydantic and PyYAML; install them with
    C(pip install -r <collection path>/requirements.txt).
  - The file holds the keys given in O(config), normalized (durations as Go duration strings
    such as C(1m30s), URLs without a trailing slash), in the schema's order, under a header
    comment.
  - Secrets (C(config.token)) never appear in the task result, the diff or the logs; they are
    shown as C(***).
  - A file that is already as wanted costs one M(ansible.builtin.stat) on the host (none with
    O(current)); only a file that differs is read (for the diff) and written.
options:
  dest:
    description:
      - Path of the config file on the host, for example
        C(/etc/workflow-agent/<instance>/pulumi-workflow-agent.yaml). Its directory must exist.
    type: path
    required: true
  config:
    description:
      - The agent's settings, keyed by the agent's config keys (C(token), C(service_url),
        C(deploy_target), C(slots), C(polling_interval), ...). The agent's README documents
        each key.
      - Keys set to V(null) are left out of the file. A bad key or value fails the task with a
        message naming the key, for example C(config.polling_interval).
      - Either C(token), or C(oidc_token_file) with C(organization_name) and C(runner_pool_id),
        is required.
    type: dict
    required: true
  owner:
    description: Name of the user that should own the file. Default is the connection user.
    type: str
  group:
    description: Name of the group that should own the file.
    type: str
  mode:
    description:
      - Permissions of the file, as a quoted octal string such as V('0600').
      - The file holds the pool token, so it should stay readable only by its owner.
    type: raw
    default: '0600'
  backup:
    description:
      - Keep a timestamped copy of the previous file next to it when the file changes. The
        copy holds the previous token, with the previous file's permissions.
    type: bool
    default: false
  current:
    description:
      - What the caller already knows of O(dest) on the host, in the shape of
        M(ansible.builtin.stat)'s C(stat) result with a sha1 C(checksum) (C(exists), C(isreg),
        C(checksum), C(mode), C(pw_name), C(gr_name)), for example from a look at the host
        earlier in the play.
      - When it shows the file with the rendered content, O(mode), O(owner) and O(group), the
        module does not contact the host at all. Otherwise, or without it, the module looks at
        the host itself (one M(ansible.builtin.stat)), and writes only when the file differs.
      - Pass only what is current; an outdated C(stat) that matches the rendered file hides a
        change made on the host since.
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
      - Predicts the change without writing. On a host where O(dest) does not exist yet, it
        predicts a new file without checking O(owner) and O(group), which may not exist yet.
  diff_mode:
    support: full
    details:
      - Secrets are shown as C(***); a changed token shows as C(*** changed).
  idempotent:
    support: full
  platform:
    platforms: posix
notes:
  - Set C(no_log) on the task too, as defence in depth. Ansible itself can print task
    arguments (for example with C(ANSIBLE_DISPLAY_ARGS_TO_STDOUT)), and the module cannot
    hide those.
seealso:
  - module: selfhosted.workflow_agent.agent_info
"""

EXAMPLES = r"""
- name: Write the config of agent instance "a"
  selfhosted.workflow_agent.agent_config:
    dest: /etc/workflow-agent/a/pulumi-workflow-agent.yaml
    owner: workflow-agent
    group: workflow-agent
    mode: "0600"
    config:
      token: "{{ vault_pool_token }}"
      service_url: https://api.pulumi.com
      deploy_target: docker
      env_forward_allowlist: [AWS_REGION]
      polling_interval: 30s
      http_server_port: 8081
      slots: 2
  no_log: true
  notify: Restart workflow agents

- name: OIDC instead of a static token
  selfhosted.workflow_agent.agent_config:
    dest: /etc/workflow-agent/b/pulumi-workflow-agent.yaml
    config:
      oidc_token_file: /var/run/secrets/oidc/token
      organization_name: acme
      runner_pool_id: 0f1e2d3c
"""

RETURN = r"""
dest:
  description: The path of the config file.
  returned: always
  type: str
  sample: /etc/workflow-agent/a/pulumi-workflow-agent.yaml
drain_timeout_seconds:
  description:
    - The config's C(drain_timeout) (default 5m) in whole seconds, rounded up, as the agent reads
      it; for a service manager's stop timeout or a pod's C(terminationGracePeriodSeconds).
  returned: success
  type: int
  sample: 300
config:
  description:
    - The effective configuration the agent will run with, every key including defaults,
      durations as Go duration strings. Secrets are C(***).
  returned: success
  type: dict
  sample:
    token: "***"
    service_url: https://api.pulumi.com
    deploy_target: docker
    polling_interval: 30s
    slots: 2
backup_file:
  description: The backup of the previous file, when O(backup=true) and the file changed.
  returned: changed and O(backup=true)
  type: str
  sample: /etc/workflow-agent/a/pulumi-workflow-agent.yaml.2384.2026-01-01@12:00:00~
"""
