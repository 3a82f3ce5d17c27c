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


def test_reads_our_objects_everywhere_and_upstreams_where_installed():
    upstream = [{"namespace": "a", "worker_sa": "w-1"}, {"namespace": "c", "worker_sa": ""}]
    got = k8s_adopt.reads(upstream, ["a", "b"], "pool")
    ours = [
        {"kind": "ConfigMap", "name": "pool-config"},
        {"kind": "Secret", "name": "pool-token"},
        {"kind": "ServiceAccount", "name": "pool-worker"},
    ]
    assert got == [dict(o, namespace=ns) for ns in ("a", "b") for o in ours] + [
        {"kind": "Secret", "name": "agent-secret", "namespace": "a"},
        {"kind": "ConfigMap", "name": "agent-config", "namespace": "a"},
        {"kind": "ServiceAccount", "name": "w-1", "namespace": "a"},
        {"kind": "Secret", "name": "agent-secret", "namespace": "c"},
        {"kind": "ConfigMap", "name": "agent-config", "namespace": "c"},
    ]


def read(kind: str, name: str, obj: dict | None) -> dict:
    return {"item": {"kind": kind, "name": name}, "resources": [obj] if obj else []}


def test_settings_prefer_upstreams_and_collect_distinct_values():
    token = {"data": {"PULUMI_AGENT_TOKEN": b64("pul-up")}}
    got = k8s_adopt.settings(
        [
            read("Secret", "pool-token", {"data": {"PULUMI_AGENT_TOKEN": b64("pul-ours")}}),
            read("Secret", "agent-secret", token),
            read("Secret", "agent-secret", token),
            read("ConfigMap", "agent-config", {"data": {"PULUMI_AGENT_SERVICE_URL": "https://x"}}),
            read("ServiceAccount", "w-1", {"metadata": {"annotations": {"k": "v"}}}),
        ],
        "pool",
        "PULUMI_AGENT_TOKEN",
    )
    assert got == {"tokens": ["pul-up"], "urls": ["https://x"], "annotations": [{"k": "v"}]}


def test_after_an_adoption_later_runs_find_what_it_took_in_our_objects():
    config = "# header\nservice_url: https://api.example\nslots: 2\n"
    helm = {"meta.helm.sh/release-name": "pool", "eks.amazonaws.com/role-arn": "arn"}
    got = k8s_adopt.settings(
        [
            read("Secret", "pool-token", {"data": {"TOKEN": b64("pul-ours")}}),
            read("ConfigMap", "pool-config", {"data": {"pulumi-workflow-agent.yaml": config}}),
            read("ServiceAccount", "pool-worker", {"metadata": {"annotations": helm}}),
            read("Secret", "agent-secret", None),
        ],
        "pool",
        "TOKEN",
    )
    assert got == {
        "tokens": ["pul-ours"],
        "urls": ["https://api.example"],
        "annotations": [{"eks.amazonaws.com/role-arn": "arn"}],
    }
    empty = {"tokens": [], "urls": [], "annotations": []}
    assert k8s_adopt.settings([], "pool", "TOKEN") == empty
    # Our objects without a URL or annotations, or with a config that is no YAML mapping: none.
    bare = [
        read("ConfigMap", "pool-config", {"data": {"pulumi-workflow-agent.yaml": "[1"}}),
        read("ServiceAccount", "pool-worker", {"metadata": {}}),
    ]
    assert k8s_adopt.settings(bare, "pool", "TOKEN") == empty


def test_a_disagreement_names_the_variable_and_never_a_token():
    upstream = [{"namespace": "a", "worker_sa": ""}, {"namespace": "b", "worker_sa": ""}]
    found = {"tokens": ["pul-1", "pul-2"], "urls": ["https://x"], "annotations": [{}, {"k": "v"}]}
    message = k8s_adopt.disagreements(upstream, found, {})
    assert message == (
        "workflow_agent_k8s_adopt: the upstream installs in a, b differ in their pool token "
        "(agent-secret): set workflow_agent_k8s_token, or adopt them in separate runs; their "
        "workers' service account annotations: set "
        "workflow_agent_k8s_worker_service_account_annotations"
    )
    assert "pul-" not in message
    # What the play sets settles it.
    given = {"token": "t", "worker_annotations": {"k": 1}}
    assert k8s_adopt.disagreements(upstream, found, given) == ""
