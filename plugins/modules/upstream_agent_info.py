# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# This module looks at the host; its action plugin (plugins/action/upstream_agent_info.py)
# picks each install's config by the agent's discovery order and validates it with the
# agent's schema on the controller.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: upstream_agent_info
short_description: Find installs of Pulumi's customer-managed agent and the settings they run with
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Finds the systemd units whose C(ExecStart) runs C(customer-managed-workflow-agent) (2.x) or
    C(customer-managed-deployment-agent) (1.x), as upstream's AMI unit
    C(deployment_agent.service_ubuntu) does, in C(/etc/systemd/system), C(/run/systemd/system)
    and the package unit directories (the first file of a name wins, as in systemd).
  - For each, finds the config file that agent reads, by the agent's own discovery order
    (C(workflow_agent.config.candidate_paths)) - the unit's C(WorkingDirectory) (C(/) without
    one), the home of its C(User) (root without one), C(/etc), then the binary's directory;
    C(pulumi-workflow-agent.yaml) in any of them before the legacy
    C(pulumi-deployment-agent.yaml) - or the file of a C(--config) argument. C(PULUMI_AGENT_*)
    variables of the unit's C(Environment=) overlay the file, as in the agent.
  - Validates the result with the agent's own config schema on the controller (the one
    M(selfhosted.workflow_agent.agent_config) uses). A file the agent would refuse fails the
    task with the agent's message, naming the file and the key.
  - Only looks; it never changes the host. The role C(selfhosted.workflow_agent.agent) uses it
    for C(workflow_agent_adopt).
options:
  exclude:
    description:
      - Keys never returned in RV(settings), because the caller sets them itself (the role
        passes the keys it manages per instance, such as C(http_server_port)). They are listed
        in RV(installs[].not_adopted).
    type: list
    elements: str
    default: []
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
    details: The module never changes the host, so it runs and reports the same in check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
  platform:
    platforms: posix
notes:
  - The result holds the pool token in RV(settings), so the task's result is marked C(no_log)
    whenever a token was found; RV(installs) shows it as C(***). Show RV(installs) in a
    following task to see what was found.
  - C(EnvironmentFile=) of upstream units and systemd drop-ins are not read.
seealso:
  - module: selfhosted.workflow_agent.agent_config
"""

EXAMPLES = r"""
- name: Find upstream agent installs
  selfhosted.workflow_agent.upstream_agent_info:
  register: upstream

- name: Show them (the token is masked)
  ansible.builtin.debug:
    var: upstream.installs
"""

RETURN = r"""
installs:
  description: One entry per upstream unit found, in unit name order. Secrets are C(***).
  returned: success
  type: list
  elements: dict
  contains:
    unit:
      description: The unit's name.
      type: str
      sample: workflow_agent.service
    unit_path:
      description: The unit file.
      type: str
      sample: /etc/systemd/system/workflow_agent.service
    command:
      description: The upstream command the unit runs.
      type: str
      sample: customer-managed-workflow-agent
    executable:
      description: The binary C(ExecStart) runs.
      type: str
      sample: /root/.pulumi/bin/customer-managed-workflow-agent/customer-managed-workflow-agent
    user:
      description: The user the unit runs as.
      type: str
      sample: root
    working_directory:
      description: The unit's current directory.
      type: str
      sample: /root/.pulumi/bin
    kill_mode:
      description: The unit's C(KillMode) (upstream's AMI unit has C(process)).
      type: str
      sample: process
    active:
      description: Whether the unit is active (or activating, reloading or deactivating).
      type: bool
    enabled:
      description: Whether the unit starts at boot (C(enabled), C(enabled-runtime) or C(linked)).
      type: bool
    config_file:
      description: The config file the agent in this unit reads, or V(null) when it reads none.
      type: str
      sample: /root/.pulumi/bin/customer-managed-workflow-agent/pulumi-workflow-agent.yaml
    searched:
      description: Where the agent looks for its config, in order.
      type: list
      elements: str
    notices:
      description: What the agent would report about the config, such as a legacy file that loses.
      type: list
      elements: str
    settings:
      description: The settings adopted from the file and the unit's environment, token C(***).
      type: dict
      sample: {token: "***", service_url: https://api.pulumi.com}
    not_adopted:
      description: Keys given upstream that are not adopted, with the reason.
      type: dict
      sample: {workflow_runners_directory: has no effect in this agent}
    http_server_port:
      description: The port the upstream agent's HTTP server listens on.
      type: int
      sample: 8080
    files:
      description: The upstream install's files (the unit, the binary's directory and the config).
      type: list
      elements: str
settings:
  description:
    - The adopted settings of all installs found (they must agree), with the real token, for a
      config of this collection's agent. Empty when nothing was found.
  returned: success
  type: dict
  sample: {token: pul-..., service_url: https://api.pulumi.com}
"""

import os  # noqa: E402
import pwd  # noqa: E402
import stat  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.upstream_agent import (  # noqa: E402
    UNIT_DIRS,
    UnitError,
    candidate_files,
    describe,
)

MAX_CONFIG_BYTES = 1024 * 1024


def home_of(user):
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return "/root" if user == "root" else "/"


def unit_files():
    """{unit name: path} of every .service file, the first directory of UNIT_DIRS winning."""
    found = {}
    for d in UNIT_DIRS:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if not name.endswith(".service") or name in found:
                continue
            path = os.path.join(d, name)
            # A masked unit is a link to /dev/null: it is found (and so shadows) but runs nothing.
            found[name] = path
    return found


def read_text(path, limit=MAX_CONFIG_BYTES):
    """(text, None), or (None, why) for a file that cannot be read as UTF-8 text."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_size > limit:
            return None, "larger than %d bytes" % limit
        with open(path, "rb") as fh:
            raw = fh.read()
    except (IOError, OSError) as exc:
        return None, "cannot read: %s" % (exc.strerror or exc)
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, "not valid UTF-8 (byte offset %d)" % exc.start


def unit_state(module, name):
    rc, out, _err = module.run_command(
        ["systemctl", "show", "--property=ActiveState,UnitFileState", "--", name]
    )
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line) if rc == 0 else {}
    active = props.get("ActiveState", "unknown")
    enabled = props.get("UnitFileState", "unknown")
    return {
        "active_state": active,
        "unit_file_state": enabled,
        "active": active in ("active", "activating", "reloading", "deactivating"),
        "enabled": enabled in ("enabled", "enabled-runtime", "linked", "linked-runtime"),
    }


def main():
    module = AnsibleModule(
        argument_spec={"exclude": {"type": "list", "elements": "str", "default": []}},
        supports_check_mode=True,
    )
    installs = []
    for name, path in sorted(unit_files().items()):
        if os.path.realpath(path) == "/dev/null":
            continue
        text, why = read_text(path)
        if text is None:
            continue  # not ours to judge: a unit systemd itself could not load either
        try:
            install = describe(name, path, text, home_of, os.path.exists)
        except UnitError as exc:
            module.fail_json(msg="%s: %s" % (path, exc))
        if install is None:
            continue
        install.update(unit_state(module, name))
        install["candidates"] = {}
        for candidate in candidate_files(install):
            if os.path.lexists(candidate):
                content, why = read_text(candidate)
                install["candidates"][candidate] = {"text": content, "error": why}
        installs.append(install)
    # The action plugin validates the candidates and strips their text from the result.
    module.exit_json(changed=False, installs=installs)


if __name__ == "__main__":
    main()
