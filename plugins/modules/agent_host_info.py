# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin plugins/action/agent_host_info.py, which runs
# plugins/module_utils/agent_host_state.py on the host; this file only documents it.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: agent_host_info
short_description: Look at a workflow agent host in one round trip
version_added: 0.2.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Runs one look at the host with each interpreter in O(pythons) in turn, until one is a Python
    the agent runs on (3.10 or later), and reports what that interpreter found. It needs no
    Python that Ansible's interpreter discovery would pick, and it runs without a module
    wrapper, so it costs one round trip per candidate tried.
  - It reports the interpreter and the platform, what the host already has (the listings of
    O(lists), stat-like facts of O(files), the members of O(groups), the start of O(reads)),
    which of O(paths) and O(users) the host does not match, the O(systemd) units not in their
    wanted states, and the health of the local agent instances on the O(health) ports.
  - The C(agent) role runs it once in its preflight, then runs ordinary modules only for what
    differs, so a converge that changes nothing costs this one call. When in doubt an
    expectation counts as unmet, and the module that would make the change decides.
  - It never fails for what it finds. RV(problems) says why no candidate will do; the caller
    decides whether that is fatal.
  - With O(platform), it first looks at the platform with one shell command, which needs no
    Python at all (RV(platform)); with O(platform) alone that is all it does.
options:
  pythons:
    description:
      - Interpreters to try, in order, as paths or names on the host's C(PATH).
    type: list
    elements: str
    default: []
  platform:
    description:
      - Look at the platform first (OS, service manager, CPUs, memory), with one shell command.
    type: bool
    default: false
  role:
    description:
      - Internal to the C(selfhosted.workflow_agent.agent) role, whose variables it is; its
        shape follows the role and is not a stable interface. With it, what to ask the host
        and which Pythons to try come from the role's plan, the other options are ignored, and
        RV(plan) is returned. With the role's results after its configs and wheelhouse build
        in it, it returns the rest of the plan from the earlier look, without a new one.
    type: dict
  need_agent_python:
    description:
      - Whether a candidate must be a Python the agent runs on (3.10 or later). With V(false)
        (for example to remove the agent), any candidate that runs will do.
    type: bool
    default: true
  lists:
    description: Directories whose entries to list (an empty list for one that does not exist).
    type: list
    elements: path
    default: []
  files:
    description:
      - Paths to describe as M(ansible.builtin.stat) does with a sha1 checksum, following links
        (C(exists), C(isreg), C(isdir), C(mode), C(uid), C(gid), C(pw_name), C(gr_name),
        C(checksum)).
    type: list
    elements: path
    default: []
  reads:
    description:
      - Text files of which to return the first 4 KiB (V(null) for one that cannot be read).
    type: list
    elements: path
    default: []
  paths:
    description:
      - Wanted paths. A path counts as differing when its type, owner, group, mode, content or
        link target is not the wanted one (directories and files are followed through links).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The path.
        type: path
        required: true
      state:
        description: What it should be.
        type: str
        required: true
        choices: [directory, file, link, absent]
      owner:
        description: Its wanted owner (any, when not set).
        type: str
      group:
        description: Its wanted group (any, when not set).
        type: str
      mode:
        description: Its wanted mode, as an octal string such as V('0750') (any, when not set).
        type: str
      sha1:
        description: The sha1 of a file's wanted content (any, when not set).
        type: str
      src:
        description: Where a link should point (O(paths[].state=link)).
        type: path
  users:
    description: Wanted local users; one differs when missing or set otherwise.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The user's name.
        type: str
        required: true
      group:
        description: Its primary group.
        type: str
        required: true
      shell:
        description: Its shell.
        type: str
        required: true
      home:
        description: Its home directory.
        type: path
        required: true
      comment:
        description: Its GECOS comment.
        type: str
        required: true
  groups:
    description:
      - Groups whose supplementary members to report (V(null) for a group that does not exist).
    type: list
    elements: str
    default: []
  systemd:
    description: systemd units to list and to compare with their wanted states.
    type: dict
    suboptions:
      pattern:
        description: A C(systemctl list-units) pattern, such as V(workflow-agent@*).
        type: str
        required: true
      units:
        description:
          - Units and their wanted states. A unit differs when it is not active (or activating)
            while it should be started, not inactive (or failed) while it should be stopped, or
            not exactly enabled or disabled as wanted.
        type: list
        elements: dict
        default: []
        suboptions:
          name:
            description: The unit's full name.
            type: str
            required: true
          started:
            description: Whether it should be running.
            type: bool
            default: true
          enabled:
            description: Whether it should start at boot.
            type: bool
            default: true
  health:
    description:
      - Ports of local agent instances whose C(/healthz) and C(/metrics) to read on 127.0.0.1,
        never through a proxy.
    type: list
    elements: int
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
    details:
      - It only looks, so it runs in check mode too and reports the same.
  diff_mode:
    support: none
  idempotent:
    support: full
  platform:
    platforms: posix
notes:
  - Runs with the task's C(become) settings; describing other users' files and reading
    systemd state usually needs root.
seealso:
  - module: selfhosted.workflow_agent.agent_info
"""

EXAMPLES = r"""
- name: Look at the agent's directories and units
  selfhosted.workflow_agent.agent_host_info:
    pythons: [/usr/bin/python3.12, /usr/bin/python3]
    lists: [/etc/workflow-agent]
    files: [/etc/workflow-agent/a.yaml]
    paths:
      - {path: /var/lib/workflow-agent, state: directory, owner: workflow-agent, mode: "0750"}
    users:
      - {name: workflow-agent, group: workflow-agent, shell: /usr/sbin/nologin,
         home: /var/lib/workflow-agent, comment: Workflow agent}
    systemd:
      pattern: workflow-agent@*
      units:
        - {name: workflow-agent@a.service, started: true, enabled: true}
    health: [8080]
  become: true
  register: look

- name: Stop when the host has no Python the agent runs on
  ansible.builtin.assert:
    that: look.problems | length == 0
    fail_msg: "{{ look.problems | join('; ') }}"
"""

RETURN = r"""
platform:
  description:
    - With O(platform), the platform; with O(role), the one the role passed or this look found.
  returned: when O(platform) or O(role) is set
  type: dict
  contains:
    os_family:
      description: V(Debian), V(Darwin), V(RedHat) or what C(uname -s) says.
      type: str
      sample: Debian
    distribution:
      description: os-release's C(NAME), or V(macOS).
      type: str
      sample: Debian GNU/Linux
    id:
      description: os-release's C(ID).
      type: str
      sample: debian
    version:
      description: The OS version.
      type: str
      sample: "12"
    major_version:
      description: Its first part.
      type: str
      sample: "12"
    service_mgr:
      description: V(systemd) when it is PID 1's manager, V(launchd) on macOS, else V(unknown).
      type: str
      sample: systemd
    cpus:
      description: The CPUs processes may use.
      type: int
      sample: 2
    memory_mb:
      description: Memory in MiB.
      type: int
      sample: 4096
    supported:
      description: Whether the C(agent) role supports this platform.
      type: bool
      sample: true
    problem:
      description: Why the role does not support it, or empty.
      type: str
      sample: ""
plan:
  description:
    - With O(role), the role's plan for this host (internal to the role; not a stable
      interface).
  returned: when O(role) is set
  type: dict
host:
  description:
    - The first candidate that is a Python the agent runs on, and the platform it reports.
      Empty when there is none.
  returned: always
  type: dict
  contains:
    python:
      description: Its version (major.minor).
      type: str
      sample: "3.11"
    ok:
      description: Whether the agent runs on it.
      type: bool
      sample: true
    executable:
      description: Its path as the interpreter reports it.
      type: str
      sample: /usr/bin/python3
    system:
      description: Its C(sys.platform).
      type: str
      sample: linux
    machine:
      description: The machine type.
      type: str
      sample: x86_64
    libc:
      description: The glibc version (empty elsewhere).
      type: str
      sample: "2.36"
    macos:
      description: The macOS version (empty elsewhere).
      type: str
      sample: ""
state:
  description:
    - What the host has and what differs, as the chosen candidate (or, when none is usable, the
      first that ran) found it. Empty when no candidate ran.
  returned: always
  type: dict
  contains:
    lists:
      description: The entries of each of O(lists), sorted.
      type: dict
      sample: {/etc/workflow-agent: [a.yaml]}
    files:
      description: The stat-like facts of each of O(files).
      type: dict
    reads:
      description: The first 4 KiB of each of O(reads), or V(null).
      type: dict
    paths_differ:
      description: The O(paths) the host does not match.
      type: list
      elements: str
      sample: [/var/lib/workflow-agent]
    users_differ:
      description: The names of the O(users) that are missing or set otherwise.
      type: list
      elements: str
      sample: [workflow-agent-job]
    groups:
      description: The supplementary members of each of O(groups), or V(null).
      type: dict
      sample: {docker: [workflow-agent]}
    systemd:
      description: With O(systemd), the units C(listed) by its pattern and those that C(differ).
      type: dict
      sample: {listed: [workflow-agent@a.service], differ: []}
    health:
      description:
        - For each of O(health), C(url), C(healthy), C(status), C(instance) (its name in its
          metrics), C(slots) and C(error). Anything unexpected counts as not healthy.
      type: list
      elements: dict
tried:
  description: Each candidate tried, in order, with C(path), C(ran), C(version), C(ok) and C(error).
  returned: always
  type: list
  elements: dict
  sample: [{path: /usr/bin/python3, ran: true, version: "3.11", ok: true, error: null}]
problems:
  description:
    - Why no candidate will do, one message each; empty when one will. No candidate runs at all,
      or (with O(need_agent_python)) none is 3.10 or later.
  returned: always
  type: list
  elements: str
"""
