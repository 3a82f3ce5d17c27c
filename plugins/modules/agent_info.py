# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: agent_info
short_description: Health and activity of workflow agent instances
version_added: 0.1.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Reads each agent instance's C(/healthz) and C(/metrics) and returns, per instance, whether
    it is healthy, its last activity, its busy and configured slots, the jobs it ran by result,
    and whether it is draining or its circuit breaker is open.
  - Runs on the managed host by default, so C(http://127.0.0.1:<port>) reaches that host's
    instances; with C(delegate_to) it reads any reachable URL.
  - With O(retries), it asks again, O(delay) seconds apart, until every instance is healthy;
    with O(require_healthy=true) the task then fails naming those that are not. That makes it
    a health gate after a rollout.
options:
  url:
    description:
      - Base URL of each agent instance's HTTP server (its C(http_server_port)), for example
        V(http://127.0.0.1:8080). A trailing slash is ignored.
    type: list
    elements: str
    required: true
    aliases: [urls]
  retries:
    description:
      - How many more times to ask instances that are not healthy yet.
    type: int
    default: 0
  delay:
    description: Seconds between two attempts.
    type: float
    default: 2
  require_healthy:
    description:
      - Fail when an instance is still not healthy after the last attempt. The result then
        still lists every instance.
    type: bool
    default: false
  metrics:
    description:
      - Also read C(/metrics). Without it, only the C(/healthz) facts are returned.
    type: bool
    default: true
extends_documentation_fragment:
  - selfhosted.workflow_agent.http_options
  - ansible.builtin.action_common_attributes
  - selfhosted.workflow_agent.attributes
attributes:
  check_mode:
    support: full
    details:
      - The module only reads, so it runs the same in check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
  platform:
    platforms: posix
seealso:
  - module: selfhosted.workflow_agent.agent_config
  - module: selfhosted.workflow_agent.agent_pool
"""

EXAMPLES = r"""
- name: Wait until this host's three instances are healthy (a health gate)
  selfhosted.workflow_agent.agent_info:
    url:
      - http://127.0.0.1:8080
      - http://127.0.0.1:8081
      - http://127.0.0.1:8082
    retries: 15
    delay: 2
    require_healthy: true

- name: Read one instance
  selfhosted.workflow_agent.agent_info:
    url: http://127.0.0.1:8080
  register: agent

- name: Show what it is doing
  ansible.builtin.debug:
    msg: >-
      {{ agent.instances[0].instance }}: {{ agent.instances[0].busy_slots }} of
      {{ agent.instances[0].slots }} slots busy, {{ agent.instances[0].jobs_total }} jobs run
"""

RETURN = r"""
healthy:
  description: Whether every instance is healthy.
  returned: always
  type: bool
  sample: true
unhealthy:
  description: The URLs of the instances that are not healthy.
  returned: always
  type: list
  elements: str
  sample: []
slots:
  description: Configured slots of all instances together (those whose metrics were read).
  returned: always
  type: int
  sample: 6
busy_slots:
  description: Slots of all instances running a job right now.
  returned: always
  type: int
  sample: 2
instances:
  description: One entry per O(url), in the same order.
  returned: always
  type: list
  elements: dict
  contains:
    url:
      description: The base URL as given, without a trailing slash.
      type: str
      sample: http://127.0.0.1:8080
    healthy:
      description: C(/healthz) answered 200 with C(status=healthy).
      type: bool
      sample: true
    status:
      description:
        - C(healthy) or C(unhealthy) as C(/healthz) says, or C(unreachable) when no answer
          came, or C(invalid) when the answer was not the agent's.
      type: str
      sample: healthy
    status_code:
      description: The HTTP status of C(/healthz); null when unreachable.
      type: int
      sample: 200
    error:
      description: Why the instance is unreachable or its answers unreadable; null otherwise.
      type: str
      sample: null
    current_time:
      description: The agent's clock (RFC 3339) at the time of the answer.
      type: str
      sample: "2026-01-01T12:00:00Z"
    last_activity:
      description: When the agent last talked to the service successfully (RFC 3339).
      type: str
      sample: "2026-01-01T11:59:58Z"
    instance:
      description: The instance name the agent reports (its C(WORKFLOW_AGENT_INSTANCE)).
      type: str
      sample: a
    version:
      description: The agent's version.
      type: str
      sample: 0.1.0
    deploy_target:
      description: Where the agent runs jobs (docker, kubernetes or process).
      type: str
      sample: docker
    slots:
      description: The instance's configured slots.
      type: int
      sample: 2
    busy_slots:
      description: Slots running a job right now.
      type: int
      sample: 1
    busy_slots_by_type:
      description: Busy slots per workflow type.
      type: dict
      sample: {"deployment": 1, "insights_scan": 0, "policy_evaluation": 0}
    jobs:
      description: Finished jobs by result (succeeded, failed, canceled), all types together.
      type: dict
      sample: {"succeeded": 12, "failed": 1}
    jobs_total:
      description: All finished jobs.
      type: int
      sample: 13
    draining:
      description: The instance got SIGTERM and finishes its jobs without claiming new ones.
      type: bool
      sample: false
    circuit_breaker_open:
      description: The instance stopped calling the service after repeated failures.
      type: bool
      sample: false
    last_claim:
      description: Unix time of the instance's last claimed job; null before the first.
      type: float
      sample: 1767268800.0
    metrics_error:
      description:
        - Why C(/metrics) could not be read, when it could not; the metric facts are then null.
      type: str
      sample: null
"""

import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_metrics import (  # noqa: E402
    parse,
    summarize,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.args_common import (  # noqa: E402
    HTTP_ARG_SPEC,
    argspec,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.http_request import (  # noqa: E402
    request,
)

METRIC_FACTS = (
    "instance",
    "version",
    "deploy_target",
    "slots",
    "busy_slots",
    "busy_slots_by_type",
    "jobs",
    "jobs_total",
    "draining",
    "circuit_breaker_open",
    "last_claim",
)


def check_health(url, http):
    """The /healthz facts of one instance."""
    out = {
        "url": url,
        "healthy": False,
        "status": "unreachable",
        "status_code": None,
        "error": None,
        "current_time": None,
        "last_activity": None,
    }
    resp = request("GET", url + "/healthz", headers={"Accept": "application/json"}, **http)
    if resp.status is None:
        out["error"] = resp.error
        return out
    out["status_code"] = resp.status
    try:
        body = resp.json()
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise ValueError("no status field in %r" % resp.body[:80])
    except ValueError as exc:
        out["status"] = "invalid"
        out["error"] = "%s/healthz answered HTTP %d: %s" % (url, resp.status, exc)
        return out
    out["status"] = body["status"]
    out["current_time"] = body.get("currentTime")
    out["last_activity"] = body.get("lastActivity")
    out["healthy"] = resp.status == 200 and body["status"] == "healthy"
    return out


def read_metrics(url, http):
    """The /metrics facts of one instance (all null, with metrics_error, when unreadable)."""
    facts = dict((k, None) for k in METRIC_FACTS)
    facts["metrics_error"] = None
    resp = request("GET", url + "/metrics", headers={"Accept": "text/plain"}, **http)
    if resp.status != 200:
        facts["metrics_error"] = resp.error or "%s/metrics answered HTTP %d" % (url, resp.status)
        return facts
    try:
        facts.update(summarize(parse(resp.body.decode("utf-8"))))
    except (UnicodeDecodeError, ValueError) as exc:
        facts["metrics_error"] = "%s/metrics: %s" % (url, exc)
    return facts


def query(url, http, with_metrics):
    facts = check_health(url, http)
    if not with_metrics:
        return facts
    if facts["status_code"] is None:
        # Same keys for every instance: the metric facts are null when nothing answered.
        facts.update((k, None) for k in METRIC_FACTS)
        facts["metrics_error"] = facts["error"]
    else:
        facts.update(read_metrics(url, http))
    return facts


def gather(urls, http, with_metrics, retries, delay, sleep=time.sleep):
    """Facts for every URL; unhealthy ones are asked again up to `retries` times."""
    results = dict((url, query(url, http, with_metrics)) for url in urls)
    for _attempt in range(retries):
        waiting = [url for url in urls if not results[url]["healthy"]]
        if not waiting:
            break
        sleep(delay)
        for url in waiting:
            results[url] = query(url, http, with_metrics)
    return [results[url] for url in urls]


def main():
    spec = argspec(
        HTTP_ARG_SPEC,
        {
            "url": {"type": "list", "elements": "str", "required": True, "aliases": ["urls"]},
            "retries": {"type": "int", "default": 0},
            "delay": {"type": "float", "default": 2},
            "require_healthy": {"type": "bool", "default": False},
            "metrics": {"type": "bool", "default": True},
        },
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    urls = []
    for url in p["url"]:
        url = url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            module.fail_json(msg="url: %r is not an http(s) URL" % url)
        if url not in urls:
            urls.append(url)
    if p["retries"] < 0 or p["delay"] < 0:
        module.fail_json(msg="retries and delay must not be negative")
    http = {"timeout": p["timeout"], "validate_certs": p["validate_certs"], "ca_path": p["ca_path"]}

    instances = gather(urls, http, p["metrics"], p["retries"], p["delay"])
    unhealthy = [i["url"] for i in instances if not i["healthy"]]
    result = {
        "changed": False,
        "instances": instances,
        "healthy": not unhealthy,
        "unhealthy": unhealthy,
        "slots": sum(i.get("slots") or 0 for i in instances),
        "busy_slots": sum(i.get("busy_slots") or 0 for i in instances),
    }
    if unhealthy and p["require_healthy"]:
        reasons = []
        for i in instances:
            if not i["healthy"]:
                reasons.append("%s (%s)" % (i["url"], i["error"] or i["status"]))
        attempts = p["retries"] + 1
        module.fail_json(
            msg="%d of %d agent instances not healthy after %d attempt%s: %s"
            % (
                len(unhealthy),
                len(urls),
                attempts,
                "" if attempts == 1 else "s",
                "; ".join(reasons),
            ),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
