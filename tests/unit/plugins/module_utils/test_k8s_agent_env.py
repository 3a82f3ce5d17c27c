"""The agent_k8s role's agent container env (module_utils/k8s_agent_env.py)."""

from __future__ import annotations

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_agent_env import (
    ROLE_NAMES,
    agent_env,
    proxy_env,
)

ARGS = {
    "config_dir": "/etc/workflow-agent",
    "config_file": "pulumi-workflow-agent.yaml",
    "token_secret": "wfa-token",
    "token_key": "token",
    "worker_service_account": "wfa-worker",
    "proxy_secret": "wfa-proxy",
}


def test_the_roles_names_first_and_in_order():
    got = agent_env(**ARGS)
    assert got["env"] == [
        {"name": "PULUMI_AGENT_CONFIG", "value": "/etc/workflow-agent/pulumi-workflow-agent.yaml"},
        {
            "name": "PULUMI_AGENT_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "wfa-token", "key": "token"}},
        },
        {
            "name": "WORKFLOW_AGENT_INSTANCE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
        },
        {"name": "WORKFLOW_AGENT_WORKER_POD_PATCH", "value": "/etc/workflow-agent/worker-pod.json"},
        {"name": "PULUMI_AGENT_SERVICE_ACCOUNT_NAME", "value": "wfa-worker"},
    ]
    assert got["proxy_env"] == got["proxy_secret_data"] == {}
    assert got["managed"] == list(ROLE_NAMES)


def test_worker_resources_when_set_and_extras_last_by_name():
    got = agent_env(
        **ARGS, worker_cpu=2, worker_memory="4Gi", worker_pull_policy="", extra={"Z": 1, "A": True}
    )
    names = [e["name"] for e in got["env"]]
    assert names[5:] == ["PULUMI_AGENT_NUM_CPUS", "PULUMI_AGENT_MEM_QUANTITY", "A", "Z"]
    assert got["env"][5]["value"] == "2" and got["env"][-1]["value"] == "1"


def test_proxy_urls_come_from_the_secret_and_no_proxy_keeps_in_cluster_names():
    proxy = {"https": "http://u:pw@proxy:3128", "no_proxy": "example.com"}
    got = agent_env(**ARGS, proxy=proxy)
    assert got["proxy_secret_data"] == {
        "HTTPS_PROXY": "http://u:pw@proxy:3128",
        "https_proxy": "http://u:pw@proxy:3128",
    }
    tail = got["env"][5:]
    assert tail[0] == {
        "name": "HTTPS_PROXY",
        "valueFrom": {"secretKeyRef": {"name": "wfa-proxy", "key": "HTTPS_PROXY"}},
    }
    no_proxy = "example.com,$(KUBERNETES_SERVICE_HOST),.svc,.cluster.local,127.0.0.1,localhost"
    assert {"name": "NO_PROXY", "value": no_proxy} in tail
    assert {"name": "no_proxy", "value": no_proxy} in tail
    assert "pw" not in str([e.get("value", "") for e in got["env"]])  # the URL only by reference
    assert got["managed"] == [*ROLE_NAMES, "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"]


def test_no_proxy_alone_sets_nothing():
    assert proxy_env({"no_proxy": "example.com"}) == {}
    assert proxy_env(None) == {}
