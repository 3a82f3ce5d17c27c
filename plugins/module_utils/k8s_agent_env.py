# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent_k8s role's agent container environment, in order.

A pure function with no Ansible imports (the ``k8s_agent_env`` filter is its face):

- The role's own variables first: the config path, the pool token (from its Secret), the pod's
  name as the instance, the worker pod patch, the workers' service account, and the workers'
  CPU, memory and pull policy when set.
- The proxy: HTTP(S)_PROXY in both spellings (Python honours both, tools in jobs often only
  lowercase), from the proxy Secret (the URLs may carry credentials); NO_PROXY as a value, with
  the API server and in-cluster names added, since ``$(KUBERNETES_SERVICE_HOST)`` must expand.
- The user's ``workflow_agent_k8s_env`` last, by name; none of the role's names (``managed``).
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_host import (
    proxy_env as host_proxy_env,
)

__metaclass__ = type

# The names the role sets, whether or not a run sets each.
ROLE_NAMES = (
    "PULUMI_AGENT_CONFIG",
    "PULUMI_AGENT_TOKEN",
    "WORKFLOW_AGENT_INSTANCE",
    "WORKFLOW_AGENT_WORKER_POD_PATCH",
    "PULUMI_AGENT_SERVICE_ACCOUNT_NAME",
    "PULUMI_AGENT_NUM_CPUS",
    "PULUMI_AGENT_MEM_QUANTITY",
    "WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY",
)
# Never through the proxy: the API server and in-cluster names.
IN_CLUSTER = ("$(KUBERNETES_SERVICE_HOST)", ".svc", ".cluster.local", "127.0.0.1", "localhost")


def proxy_env(proxy):
    """``workflow_agent_k8s_proxy`` ({http, https, no_proxy}) -> env names and values: the
    agent role's both spellings of the proxy URLs, and NO_PROXY only with a proxy to bypass."""
    env = host_proxy_env(dict((k, v) for k, v in (proxy or {}).items() if k != "no_proxy"))
    if env:
        no_proxy = ",".join(
            x for x in [(proxy or {}).get("no_proxy") or ""] + list(IN_CLUSTER) if x
        )
        env["NO_PROXY"] = no_proxy
        env["no_proxy"] = no_proxy
    return env


def agent_env(
    config_dir,
    config_file,
    token_secret,
    token_key,
    worker_service_account,
    proxy_secret,
    proxy=None,
    worker_cpu="",
    worker_memory="",
    worker_pull_policy="",
    extra=None,
):
    """The agent container's env; its config and the worker pod patch are in ``config_dir``
    (the ConfigMap's mount).

    Returns ``{"env": [...], "proxy_env": {...}, "proxy_secret_data": {...}, "managed": [...]}``:
    the container's env list, the proxy variables, those of them kept in the proxy Secret, and
    every name the role sets (which ``extra`` may not)."""
    env = [
        {"name": "PULUMI_AGENT_CONFIG", "value": config_dir + "/" + config_file},
        {
            "name": "PULUMI_AGENT_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": token_secret, "key": token_key}},
        },
        {
            "name": "WORKFLOW_AGENT_INSTANCE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
        },
        {"name": "WORKFLOW_AGENT_WORKER_POD_PATCH", "value": config_dir + "/worker-pod.json"},
        {"name": "PULUMI_AGENT_SERVICE_ACCOUNT_NAME", "value": worker_service_account},
    ]
    for name, value in (
        ("PULUMI_AGENT_NUM_CPUS", worker_cpu),
        ("PULUMI_AGENT_MEM_QUANTITY", worker_memory),
        ("WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY", worker_pull_policy),
    ):
        if value is not None and str(value) != "":
            env.append({"name": name, "value": str(value)})
    managed = list(ROLE_NAMES)
    proxies = proxy_env(proxy)
    secret_data = dict((k, v) for k, v in proxies.items() if k not in ("NO_PROXY", "no_proxy"))
    for name, value in proxies.items():
        if name in secret_data:
            env.append(
                {"name": name, "valueFrom": {"secretKeyRef": {"name": proxy_secret, "key": name}}}
            )
        else:
            env.append({"name": name, "value": value})
    managed += list(proxies)
    for name in sorted(extra or {}):
        env.append({"name": name, "value": str(extra[name])})
    return {"env": env, "proxy_env": proxies, "proxy_secret_data": secret_data, "managed": managed}
