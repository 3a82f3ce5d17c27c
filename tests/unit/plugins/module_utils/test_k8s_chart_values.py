"""The agent_k8s role's variables as chart values (module_utils/k8s_chart_values.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_chart_values import (
    chart_values,
    split_image,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_namespaces import (
    namespace_plan,
)

COLLECTION = Path(__file__).resolve().parents[4]
DEFAULTS = yaml.safe_load((COLLECTION / "roles/agent_k8s/defaults/main.yml").read_text())
CHART_VALUES = COLLECTION / "charts/workflow-agent/values.yaml"


def settings(**overrides):
    """The role's defaults, as the role passes them (the token left out), with overrides."""
    out = {k: v for k, v in DEFAULTS.items() if k != "workflow_agent_k8s_token"}
    out["workflow_agent_k8s_image"] = "registry.example/wa:1.2.3"
    out.update(("workflow_agent_k8s_" + k, v) for k, v in overrides.items())
    return out


def plan(namespaces=("ns-a", "ns-b"), **kwargs):
    return namespace_plan(list(namespaces), **kwargs)


def test_defaults_map_to_the_chart_values():
    got = chart_values(settings(), plan(), digests={"ns-a": "abc", "ns-b": "def"})
    assert got["problems"] == []
    a = got["values"]["ns-a"]
    assert a["image"] == {
        "repository": "registry.example/wa",
        "tag": "1.2.3",
        "pullPolicy": "IfNotPresent",
        "pullSecrets": [],
    }
    # The token is never a value: the role's Secret is named, with a digest of its data.
    assert a["existingSecret"] == "workflow-agent-token"
    assert a["existingSecretChecksum"] == "abc"
    assert got["values"]["ns-b"]["existingSecretChecksum"] == "def"
    assert "token" not in a
    assert a["proxy"] == {"noProxy": "", "existingSecret": ""}
    assert a["replicas"] == 1
    assert a["pdb"] == {"maxUnavailable": 1}
    assert a["drainTimeout"] == "5m"
    assert a["autoscaling"]["mode"] == "none"
    assert "minReplicas" not in a["autoscaling"]


def test_every_value_is_a_key_of_the_chart():
    """A typo here would be a value the chart ignores (its schema refuses unknown keys too)."""
    chart = yaml.safe_load(CHART_VALUES.read_text())
    values = chart_values(settings(), plan(["ns-a"]))["values"]["ns-a"]

    def walk(ours, theirs, path):
        for key, value in ours.items():
            assert key in theirs, ".".join(path + [key])
            if isinstance(value, dict) and value and isinstance(theirs[key], dict) and theirs[key]:
                walk(value, theirs[key], path + [key])

    walk(values, chart, [])


def test_replicas_per_namespace_and_the_autoscalers_minimum():
    made = plan(["ns-a", {"name": "ns-b", "weight": 2}], pool_target=6, autoscaling="hpa")
    got = chart_values(settings(autoscaling="hpa", max_replicas=9), made)["values"]
    assert [got[ns]["replicas"] for ns in ("ns-a", "ns-b")] == [2, 4]
    assert [got[ns]["autoscaling"]["minReplicas"] for ns in ("ns-a", "ns-b")] == [2, 4]
    assert got["ns-a"]["autoscaling"]["maxReplicas"] == 9


def test_existing_secret_and_proxy_secret_are_named_not_filled():
    got = chart_values(
        settings(
            existing_secret="my-token",
            proxy={"https": "http://u:pw@proxy:3128", "no_proxy": "example.com"},
        ),
        plan(["ns-a"]),
    )["values"]["ns-a"]
    assert got["existingSecret"] == "my-token"
    assert got["existingSecretChecksum"] == ""  # unknown: no roll on a rotation
    assert got["proxy"] == {"noProxy": "example.com", "existingSecret": "workflow-agent-proxy"}
    assert "pw" not in repr(got)


def test_env_values_become_strings():
    got = chart_values(settings(env={"A": 1, "B": True}), plan(["ns-a"]))["values"]["ns-a"]
    assert got["env"] == {"A": "1", "B": "True"}


@pytest.mark.parametrize(
    "ref, expected",
    [
        ("registry.example/wa:1.2.3", ("registry.example/wa", "1.2.3")),
        ("registry.example:5000/team/wa:1", ("registry.example:5000/team/wa", "1")),
        ("registry.example:5000/team/wa", ("registry.example:5000/team/wa", "")),
        ("wa@sha256:abc", ("wa", "@sha256:abc")),
    ],
)
def test_split_image(ref, expected):
    assert split_image(ref) == expected


def test_the_image_is_required():
    got = chart_values(settings(image=None), plan(["ns-a"]))
    assert got["values"] == {}
    assert got["problems"] == [
        "workflow_agent_k8s_image is required: the agent image in a registry your cluster can "
        "pull from, e.g. registry.example.com/workflow-agent:0.1.0 (the README's 'Build and push "
        "the agent image' makes one)"
    ]


def test_chart_values_reach_what_the_role_has_no_variable_for():
    extra = {"networkPolicy": {"enabled": True}, "serviceMonitor": {"interval": "10s"}}
    got = chart_values(settings(chart_values=extra, service_monitor=True), plan(["ns-a"]))
    values = got["values"]["ns-a"]
    assert values["networkPolicy"] == {"enabled": True}
    assert values["serviceMonitor"] == {"enabled": True, "interval": "10s"}


def test_chart_values_may_not_set_what_the_role_sets():
    extra = {
        "token": "pul-x",
        "replicas": 3,
        "config": {"polling_interval": "1s"},
        "serviceMonitor": {"enabled": False},
        "proxy": {"https": "http://p"},
    }
    got = chart_values(settings(chart_values=extra), plan(["ns-a"]))
    assert got["values"] == {}
    [problem] = got["problems"]
    assert problem.startswith(
        "workflow_agent_k8s_chart_values: config, proxy.https, replicas, "
        "serviceMonitor.enabled, token set by the role from its own variables"
    )
    assert "pul-x" not in problem


def test_the_objects_the_role_applies_itself():
    got = chart_values(
        settings(proxy={"http": "http://p:3128"}, labels={"team": "x"}), plan(["ns-a", "ns-b"])
    )
    assert got["namespaces"] == [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"pod-security.kubernetes.io/enforce": "baseline"}},
        }
        for ns in ("ns-a", "ns-b")
    ]
    token, proxy = got["secrets"]["token"], got["secrets"]["proxy"]
    assert [(s["metadata"]["namespace"], s["metadata"]["name"]) for s in token + proxy] == [
        ("ns-a", "workflow-agent-token"),
        ("ns-b", "workflow-agent-token"),
        ("ns-a", "workflow-agent-proxy"),
        ("ns-b", "workflow-agent-proxy"),
    ]
    assert all("data" not in s for s in token + proxy)  # the role adds it, under no_log
    assert token[0]["metadata"]["labels"] == {
        "team": "x",
        "app.kubernetes.io/name": "workflow-agent",
        "app.kubernetes.io/instance": "workflow-agent",
        "app.kubernetes.io/component": "agent",
        "app.kubernetes.io/managed-by": "selfhosted.workflow_agent",
    }


def test_no_namespace_objects_or_token_secret_when_the_user_has_them():
    got = chart_values(settings(create_namespaces=False, existing_secret="mine"), plan(["ns-a"]))
    assert got["namespaces"] == []
    assert got["secrets"] == {"token": [], "proxy": []}
