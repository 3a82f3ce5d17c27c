"""What agent_k8s takes over from upstream's Kubernetes install (module_utils/k8s_adopt.py)."""

from __future__ import annotations

import base64

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import k8s_adopt


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def deployment(worker_sa: str | None) -> dict:
    env = [{"name": "PULUMI_AGENT_DEPLOY_TARGET", "value": "kubernetes"}]
    # agent.ts leaves the value out when no worker service account is given.
    env.append(
        {"name": "PULUMI_AGENT_SERVICE_ACCOUNT_NAME", **({"value": worker_sa} if worker_sa else {})}
    )
    return {"spec": {"template": {"spec": {"containers": [{"name": "agent", "env": env}]}}}}


def test_installs_are_the_namespaces_with_workflow_agent_pool():
    found = [
        {"item": "a", "resources": [deployment("workflow-agent-1a2b3c4")]},
        {"item": "b", "resources": []},
        {"item": "c", "resources": [deployment(None)]},
    ]
    assert k8s_adopt.installs(found) == [
        {"namespace": "a", "worker_sa": "workflow-agent-1a2b3c4"},
        {"namespace": "c", "worker_sa": ""},
    ]


def test_reads_our_secret_everywhere_and_upstreams_objects_where_installed():
    upstream = [{"namespace": "a", "worker_sa": "w-1"}, {"namespace": "c", "worker_sa": ""}]
    got = k8s_adopt.reads(upstream, ["a", "b", "c"], "workflow-agent-token")
    assert got == [
        {"kind": "Secret", "name": "workflow-agent-token", "namespace": "a"},
        {"kind": "Secret", "name": "workflow-agent-token", "namespace": "b"},
        {"kind": "Secret", "name": "workflow-agent-token", "namespace": "c"},
        {"kind": "Secret", "name": "agent-secret", "namespace": "a"},
        {"kind": "ConfigMap", "name": "agent-config", "namespace": "a"},
        {"kind": "ServiceAccount", "name": "w-1", "namespace": "a"},
        {"kind": "Secret", "name": "agent-secret", "namespace": "c"},
        {"kind": "ConfigMap", "name": "agent-config", "namespace": "c"},
    ]


def read(kind: str, name: str, obj: dict | None) -> dict:
    return {"item": {"kind": kind, "name": name}, "resources": [obj] if obj else []}


def test_settings_prefer_upstreams_token_and_collect_distinct_values():
    got = k8s_adopt.settings(
        [
            read(
                "Secret", "workflow-agent-token", {"data": {"PULUMI_AGENT_TOKEN": b64("pul-ours")}}
            ),
            read("Secret", "agent-secret", {"data": {"PULUMI_AGENT_TOKEN": b64("pul-up")}}),
            read("Secret", "agent-secret", {"data": {"PULUMI_AGENT_TOKEN": b64("pul-up")}}),
            read("ConfigMap", "agent-config", {"data": {"PULUMI_AGENT_SERVICE_URL": "https://x"}}),
            read("ServiceAccount", "w-1", {"metadata": {"annotations": {"k": "v"}}}),
        ],
        "workflow-agent-token",
        "PULUMI_AGENT_TOKEN",
    )
    assert got == {"tokens": ["pul-up"], "urls": ["https://x"], "annotations": [{"k": "v"}]}


def test_after_an_adoption_the_token_comes_from_our_own_secret():
    got = k8s_adopt.settings(
        [
            read("Secret", "pool-token", {"data": {"TOKEN": b64("pul-ours")}}),
            read("Secret", "agent-secret", None),
        ],
        "pool-token",
        "TOKEN",
    )
    assert got["tokens"] == ["pul-ours"]
    assert k8s_adopt.settings([], "pool-token", "TOKEN") == {
        "tokens": [],
        "urls": [],
        "annotations": [],
    }


def test_a_disagreement_names_the_variable_and_never_a_token():
    upstream = [{"namespace": "a", "worker_sa": ""}, {"namespace": "b", "worker_sa": ""}]
    found = {
        "tokens": ["pul-one", "pul-two"],
        "urls": ["https://x"],
        "annotations": [{}, {"k": "v"}],
    }
    message = k8s_adopt.disagreements(upstream, found, {})
    assert message == (
        "workflow_agent_k8s_adopt: the upstream installs in a, b differ in their pool token "
        "(agent-secret): set workflow_agent_k8s_token, or adopt them in separate runs; their "
        "workers' service account annotations: set "
        "workflow_agent_k8s_worker_service_account_annotations"
    )
    assert "pul-" not in message
    # What the play sets settles it.
    assert (
        k8s_adopt.disagreements(upstream, found, {"token": "t", "worker_annotations": {"k": 1}})
        == ""
    )
