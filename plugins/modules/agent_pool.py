# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: agent_pool
short_description: Create, look up, delete and wait on a workflow agent pool
version_added: 0.1.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Manages an agent pool of an organization through the service's REST API
    (C(/api/orgs/<org>/agent-pools)), finding the pool by O(name).
  - Creating a pool returns its pool token, which the service shows only once. Write it
    straight to a file with O(token_dest), or register the result under C(no_log).
  - With O(wait_for_online), waits until at least that many agents of the pool report
    C(online), the fleet-level health gate after a rollout.
  - Usually run on the controller, with C(delegate_to=localhost) and C(run_once=true).
options:
  name:
    description: The pool's name, unique within the organization.
    type: str
    required: true
  description:
    description:
      - The pool's description. Set on creation, and updated when it differs.
      - Left as it is when not given.
    type: str
  state:
    description:
      - V(present) creates the pool when no pool has this name.
      - V(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  force:
    description:
      - With O(state=absent), delete the pool even while stacks use it or jobs are unfinished
        (the service cancels those jobs). Without it, such a pool is not deleted and the task
        fails with the service's reason.
    type: bool
    default: false
  token_dest:
    description:
      - Write the new pool's token to this file (mode 0600) instead of returning it.
      - When the pool already exists and this file does not, the task fails, since the service
        never shows a pool token again.
    type: path
  wait_for_online:
    description:
      - With O(state=present), wait until at least this many agents of the pool are C(online),
        then return. V(0) does not wait.
      - The service judges an agent online from its recent polls, so agents that stopped only
        just now may still count.
    type: int
    default: 0
  wait_timeout:
    description: Seconds to wait for O(wait_for_online) agents before failing.
    type: int
    default: 300
  wait_delay:
    description: Seconds between two looks at the pool while waiting.
    type: float
    default: 2
extends_documentation_fragment:
  - selfhosted.workflow_agent.service
  - selfhosted.workflow_agent.http_options
  - ansible.builtin.action_common_attributes
  - selfhosted.workflow_agent.attributes
attributes:
  check_mode:
    support: full
    details:
      - Predicts creation, update and deletion without making them; waits only for a pool
        that already exists.
  diff_mode:
    support: none
  idempotent:
    support: full
    details:
      - The pool token is returned only by the run that creates the pool.
  platform:
    platforms: posix
notes:
  - The access token is never logged or returned. The pool token is returned only on
    creation, and only when O(token_dest) is not set; put C(no_log=true) on such a task.
seealso:
  - module: selfhosted.workflow_agent.agent_info
"""

EXAMPLES = r"""
- name: Create the pool and keep its token in a 0600 file on the controller
  selfhosted.workflow_agent.agent_pool:
    service_url: https://api.pulumi.com
    access_token: "{{ vault_pulumi_access_token }}"
    organization: acme
    name: linux-builders
    description: Linux build hosts
    token_dest: "{{ playbook_dir }}/.secrets/linux-builders.token"
  delegate_to: localhost
  run_once: true
  register: pool

- name: Create the pool and use its token right away (hidden from the output)
  selfhosted.workflow_agent.agent_pool:
    access_token: "{{ vault_pulumi_access_token }}"
    organization: acme
    name: linux-builders
  delegate_to: localhost
  run_once: true
  register: new_pool
  no_log: true  # the result holds the pool token

- name: Gate the rollout on the fleet, as the service sees it
  selfhosted.workflow_agent.agent_pool:
    access_token: "{{ vault_pulumi_access_token }}"
    organization: acme
    name: linux-builders
    wait_for_online: 9
    wait_timeout: 600
  delegate_to: localhost
  run_once: true

- name: Delete the pool, even though stacks still use it
  selfhosted.workflow_agent.agent_pool:
    access_token: "{{ vault_pulumi_access_token }}"
    organization: acme
    name: linux-builders
    state: absent
    force: true
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
pool:
  description:
    - The pool as the service describes it (the REST API's C(AgentPoolDetail)); empty after
      deletion. In check mode, for a pool that does not exist yet, only C(name) and
      C(description).
  returned: always
  type: dict
  contains:
    id:
      description: The pool's ID (the agent's C(runner_pool_id)).
      type: str
      sample: 4b1c7a3e-2d7f-4c39-9d6e-0f4f0c8a2b11
    name:
      description: The pool's name.
      type: str
      sample: linux-builders
    description:
      description: The pool's description.
      type: str
      sample: Linux build hosts
    created:
      description: When the pool was created, in Unix epoch seconds.
      type: int
      sample: 1767225600
    agents:
      description: The agents the service has seen in this pool.
      type: list
      elements: dict
      contains:
        version:
          description: The agent's version.
          type: str
          sample: 0.1.0
        platform:
          description: The platform the agent runs on.
          type: str
          sample: linux/x86_64
        hostname:
          description: The host name the agent reported.
          type: str
          sample: build-03
        ip:
          description: The address the service saw the agent at.
          type: str
          sample: 10.0.4.17
        pid:
          description: The agent's process ID, as a string.
          type: str
          sample: "4242"
        lastSeen:
          description: When the service last heard from the agent, in Unix epoch seconds.
          type: int
          sample: 1767229200
        status:
          description: C(online) or C(offline).
          type: str
          sample: online
online:
  description: How many of the pool's agents are online.
  returned: success and O(state=present)
  type: int
  sample: 9
created:
  description: Whether this run created the pool.
  returned: always
  type: bool
  sample: false
token:
  description:
    - The new pool's token. The service never shows it again.
  returned: when the pool was created and O(token_dest) is not set
  type: str
  sample: pul-0123456789abcdef0123456789abcdef01234567
token_dest:
  description: The file the new pool's token was written to.
  returned: when the pool was created and O(token_dest) is set
  type: str
  sample: /home/ops/.secrets/linux-builders.token
"""

import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from urllib.parse import quote  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.args_common import (  # noqa: E402
    HTTP_ARG_SPEC,
    SERVICE_ARG_SPEC,
    argspec,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.http_request import (  # noqa: E402
    request,
)

# The REST API's media type for pool administration.
ACCEPT = "application/vnd.pulumi+8"


class PoolError(Exception):
    """A failure worth one clear message (the module fails with it)."""


class PoolClient(object):
    """The pool administration calls, each checked and turned into plain data."""

    def __init__(self, service_url, access_token, organization, http, send=None):
        self.base = "%s/api/orgs/%s/agent-pools" % (
            service_url.rstrip("/"),
            quote(organization, safe=""),
        )
        self.organization = organization
        self.headers = {"Authorization": "token " + access_token, "Accept": ACCEPT}
        self.http = http
        self.send = send or request

    def _call(self, method, path="", data=None, expect=(200,)):
        url = self.base + path
        resp = self.send(method, url, data=data, headers=self.headers, **self.http)
        if resp.status is None:
            raise PoolError(resp.error)
        if resp.status in expect:
            return resp
        if resp.status == 401:
            raise PoolError("%s %s: the access token was rejected (HTTP 401)" % (method, url))
        if resp.status == 403:
            raise PoolError(
                "%s %s: the access token may not manage pools of organization %s (HTTP 403): %s"
                % (method, url, self.organization, resp.error_text())
            )
        raise PoolError("%s %s: HTTP %d: %s" % (method, url, resp.status, resp.error_text()))

    def _json(self, resp, what):
        try:
            data = resp.json()
        except ValueError as exc:
            raise PoolError("%s: %s" % (what, exc)) from None
        if not isinstance(data, dict):
            raise PoolError("%s: expected a JSON object, got %r" % (what, data))
        return data

    def find(self, name):
        """The pool summary named `name`, or None."""
        data = self._json(self._call("GET"), "listing the pools of %s" % self.organization)
        pools = data.get("agentPools")
        if not isinstance(pools, list):
            raise PoolError("listing the pools of %s: no agentPools list" % self.organization)
        found = [p for p in pools if isinstance(p, dict) and p.get("name") == name]
        if len(found) > 1:
            raise PoolError(
                "organization %s has %d pools named %r (ids %s); delete the extra ones"
                % (self.organization, len(found), name, ", ".join(str(p.get("id")) for p in found))
            )
        return found[0] if found else None

    def get(self, pool_id):
        return self._json(self._call("GET", "/" + quote(pool_id, safe="")), "pool %s" % pool_id)

    def create(self, name, description):
        resp = self._call("POST", data={"name": name, "description": description or ""})
        data = self._json(resp, "creating pool %r" % name)
        if not data.get("id") or not isinstance(data.get("tokenValue"), str):
            raise PoolError("creating pool %r: the answer has no id and tokenValue" % name)
        return data["id"], data["tokenValue"]

    def update(self, pool_id, name, description):
        # The body is a CreateOrgAgentPoolRequest, whose name and description are both required.
        body = {"name": name, "description": description}
        return self._json(
            self._call("PATCH", "/" + quote(pool_id, safe=""), data=body), "pool %s" % pool_id
        )

    def delete(self, pool_id, force):
        path = "/%s?force=%s" % (quote(pool_id, safe=""), "true" if force else "false")
        try:
            self._call("DELETE", path, expect=(200, 204))
        except PoolError as exc:
            if not force and " HTTP 400: " in str(exc):
                raise PoolError("%s (set force: true to delete it anyway)" % exc) from None
            raise


def online_agents(pool):
    return [
        a for a in pool.get("agents") or [] if isinstance(a, dict) and a.get("status") == "online"
    ]


def write_token(path, token):
    """Write the token to `path`, mode 0600 from the first byte, atomically."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise PoolError("token_dest: directory %s does not exist" % directory)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".pool-token-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def wait_online(client, pool_id, count, timeout, delay, clock=time.monotonic, sleep=time.sleep):
    """Look at the pool until `count` agents are online; PoolError naming them on timeout."""
    deadline = clock() + timeout
    while True:
        pool = client.get(pool_id)
        online = online_agents(pool)
        if len(online) >= count:
            return pool
        if clock() >= deadline:
            names = sorted(
                "%s/%s" % (a.get("hostname") or "?", a.get("pid") or "?") for a in online
            )
            raise PoolError(
                "only %d of %d agents online in pool %r after %ss (online: %s)"
                % (len(online), count, pool.get("name"), timeout, ", ".join(names) or "none")
            )
        sleep(delay)


def ensure(client, params, check_mode):
    """Make the pool's state match params; the module's result (without `changed` logic)."""
    name = params["name"]
    found = client.find(name)
    result = {"changed": False, "created": False, "pool": {}}

    if params["state"] == "absent":
        if found:
            result["changed"] = True
            if not check_mode:
                client.delete(found["id"], params["force"])
        return result

    if found is None:
        result.update(changed=True, created=True)
        if check_mode:
            result["pool"] = {"name": name, "description": params["description"] or ""}
            result["online"] = 0
            return result
        pool_id, token = client.create(name, params["description"])
        if params["token_dest"]:
            write_token(params["token_dest"], token)
            result["token_dest"] = params["token_dest"]
        else:
            result["token"] = token
    else:
        pool_id = found["id"]
        if params["token_dest"] and not os.path.exists(params["token_dest"]):
            raise PoolError(
                "pool %r already exists and token_dest %s does not: the service shows a pool "
                "token only when it creates the pool. Put the token there yourself, or delete "
                "the pool (state: absent) to make a new one" % (name, params["token_dest"])
            )
        wanted = params["description"]
        if wanted is not None and wanted != found.get("description"):
            result["changed"] = True
            if not check_mode:
                client.update(pool_id, name, wanted)

    if params["wait_for_online"] > 0:
        pool = wait_online(
            client,
            pool_id,
            params["wait_for_online"],
            params["wait_timeout"],
            params["wait_delay"],
        )
    else:
        pool = client.get(pool_id)
    if check_mode and result["changed"] and params["description"] is not None:
        pool["description"] = params["description"]
    result["pool"] = pool
    result["online"] = len(online_agents(pool))
    return result


def main():
    spec = argspec(
        SERVICE_ARG_SPEC,
        HTTP_ARG_SPEC,
        {
            "name": {"type": "str", "required": True},
            "description": {"type": "str"},
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
            "force": {"type": "bool", "default": False},
            "token_dest": {"type": "path", "no_log": False},
            "wait_for_online": {"type": "int", "default": 0},
            "wait_timeout": {"type": "int", "default": 300},
            "wait_delay": {"type": "float", "default": 2},
        },
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    if not p["name"].strip():
        module.fail_json(msg="name must not be empty")
    if p["wait_for_online"] < 0 or p["wait_timeout"] < 0 or p["wait_delay"] < 0:
        module.fail_json(msg="wait_for_online, wait_timeout and wait_delay must not be negative")
    if not p["service_url"].startswith(("http://", "https://")):
        module.fail_json(msg="service_url: %r is not an http(s) URL" % p["service_url"])
    http = {"timeout": p["timeout"], "validate_certs": p["validate_certs"], "ca_path": p["ca_path"]}
    client = PoolClient(p["service_url"], p["access_token"], p["organization"], http)
    try:
        result = ensure(client, p, module.check_mode)
    except PoolError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg="token_dest %s: %s" % (p["token_dest"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
