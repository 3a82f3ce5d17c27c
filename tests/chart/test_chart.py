"""The workflow-agent chart without a cluster, through the real Helm CLI: `helm lint --strict`,
golden `helm template` cases (WFA_UPDATE_GOLDEN=1 rewrites tests/chart/golden/), what the
manifests must say (the same contract as the role's, tests/system/test_k8s_manifests.py), the
`restricted` Pod Security Standard, and bad values refused by values.schema.json with one
message naming the key. The API server's own checks are in test_chart_cluster.py."""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from chartlib import (
    BASE,
    CA,
    CASES,
    CHART,
    PROXY,
    PROXY_PASSWORD,
    REPO,
    TOKEN,
    agent_check,
    env_of,
    find,
    one,
    pod_specs,
    restricted_violations,
    write_values,
)

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("WFA_UPDATE_GOLDEN") == "1"
# The image tag a release of the chart uses by default: the agent's version.
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
GENERATOR = REPO / "scripts" / "chart-schema.py"


@pytest.fixture(scope="module")
def rendered(helm, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chart")
    out = {}
    for case, values in CASES.items():
        result = helm.template(values, tmp)
        assert result.rc == 0, f"{case}: {result.stderr}"
        out[case] = result
    return out


# --- the chart's identity and its generated files -------------------------------------------


def test_versions_follow_their_sources():
    """version: the collection's (galaxy.yml); appVersion: the agent's (and the image tag)."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    agent = (REPO / "agent/src/workflow_agent/__init__.py").read_text()
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "workflow-agent"
    assert chart["version"] == galaxy["version"]
    assert chart["appVersion"] == re.search(r'__version__ = "([^"]+)"', agent).group(1)


def test_generated_files_are_current():
    """values.schema.json and files/prometheus-rules.yml equal the generator's output."""
    proc = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_check_names_the_drifted_file(tmp_path):
    """--check on a copy of the tree whose schema was edited by hand: exit 1, naming it."""
    for rel in ("scripts/chart-schema.py", "extensions/prometheus/rules.yml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    shutil.copytree(CHART, tmp_path / "charts" / "workflow-agent")
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "src").symlink_to(REPO / "agent" / "src")
    schema = tmp_path / "charts/workflow-agent/values.schema.json"
    schema.write_text(schema.read_text().replace('"maximum": 150', '"maximum": 151'))
    run = [sys.executable, str(tmp_path / "scripts/chart-schema.py")]
    proc = subprocess.run([*run, "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "out of date: charts/workflow-agent/values.schema.json" in proc.stderr
    assert "prometheus-rules.yml" not in proc.stderr.splitlines()[-1]
    assert subprocess.run(run, capture_output=True, check=False).returncode == 0
    assert subprocess.run([*run, "--check"], capture_output=True, check=False).returncode == 0


def test_schema_config_keys_are_the_agents():
    """Under `config`: every agent key, none else; those the chart sets are refused."""
    from workflow_agent import config as agent

    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False
    assert set(config["properties"]) == set(agent.ALL_KEYS) | set(agent.IGNORED_KEYS)
    refused = {k for k, v in config["properties"].items() if v.get("not") == {}}
    assert refused == {
        "token", "deploy_target", "slots", "drain_timeout", "http_server_port", "ca_bundle"
    }  # fmt: skip


@pytest.mark.parametrize(
    "text", ["5m", "1h30m", "1.5h", ".5s", "300ms", "1us", "1µs", "2h45m10.5s", "0", "+5s", "0s",
             "5 minutes", "5", "-5s", "1d", "m", "5m ", "", "1.2.3s", "5mm"],
)  # fmt: skip
def test_schema_durations_agree_with_the_agent(text):
    """The schema's Go duration pattern takes what the agent's drain_timeout takes."""
    from workflow_agent import durations

    schema = json.loads((CHART / "values.schema.json").read_text())
    [pattern] = [
        a["pattern"] for a in schema["properties"]["drainTimeout"]["anyOf"] if "pattern" in a
    ]
    try:
        agent_ok = durations.parse(text).total_seconds() >= 0
    except ValueError:
        agent_ok = False
    assert bool(re.search(pattern, text)) == agent_ok


def test_lint_strict(helm, tmp_path):
    values = write_values(tmp_path, BASE)
    lint = helm.run("lint", "--strict", str(CHART), "-f", str(values))
    assert lint.rc == 0, lint.stdout + lint.stderr
    assert "0 chart(s) failed" in lint.stdout


# --- golden cases ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(rendered, case):
    path = GOLDEN / f"{case}.yaml"
    text = rendered[case].stdout
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"no {path.name}: run with WFA_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{case} renders differently: WFA_UPDATE_GOLDEN=1 to accept"


def test_objects_of_the_defaults(rendered):
    docs = rendered["defaults"].docs
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        ["ServiceAccount", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Secret",
         "Service", "Deployment", "PodDisruptionBudget", "Pod"]
    )  # fmt: skip
    assert {d["metadata"]["namespace"] for d in docs} == {"agents"}
    assert not find(docs, "Namespace")  # the namespace is the user's (or the role's)
    names = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert ("Secret", "workflow-agent-token") in names
    assert ("ConfigMap", "workflow-agent-config") in names
    assert ("ServiceAccount", "workflow-agent-worker") in names
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == "workflow-agent"


# --- restricted pod security ----------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_pods_meet_the_restricted_pod_security_standard(rendered, case):
    specs = pod_specs(rendered[case].docs)
    assert set(specs) == {"Deployment/workflow-agent", "Pod/workflow-agent-test-health"}
    for name, spec in specs.items():
        assert restricted_violations(spec) == [], name


def test_the_restricted_check_is_no_rubber_stamp(rendered):
    [spec] = [s for n, s in pod_specs(rendered["defaults"].docs).items() if "Deployment" in n]
    spec = json.loads(json.dumps(spec))
    spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    del spec["securityContext"]["seccompProfile"]
    spec["volumes"].append({"name": "h", "hostPath": {"path": "/"}})
    assert len(restricted_violations(spec)) == 3


def test_pod_security_context(rendered):
    deployment = one(rendered["defaults"].docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # podIds false (OpenShift's restricted-v2 assigns them): no ids on any pod.
    for spec in pod_specs(rendered["restricted"].docs).values():
        assert spec["securityContext"] == {
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        }


# --- what the manifests say (as the role's did) ---------------------------------------------


def kubernetes_target_rbac() -> dict[str, set[str]]:
    """The verbs the kubernetes target's docstring lists (its RBAC contract), by resource."""
    from workflow_agent.targets import kubernetes as target

    doc = target.__doc__
    section = doc[doc.index("**RBAC**") :]
    rules = {}
    for resource, verbs in re.findall(r"^\s{4}([a-z/]+):\s+([a-z]+(?:, [a-z]+)*)", section, re.M):
        rules[resource] = set(verbs.split(", "))
    assert rules, "no RBAC list found in the kubernetes target's docstring"
    return rules


def test_role_grants_exactly_what_the_kubernetes_target_uses(rendered):
    docs = rendered["defaults"].docs
    role = one(docs, "Role")
    granted: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert rule["apiGroups"] == [""]
        assert "resourceNames" not in rule
        for resource in rule["resources"]:
            granted.setdefault(resource, set()).update(rule["verbs"])
    assert granted == kubernetes_target_rbac()
    binding = one(docs, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "workflow-agent",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "workflow-agent", "namespace": "agents"}
    ]
    assert not find(docs, "ClusterRole") and not find(docs, "ClusterRoleBinding")


def test_deployment(rendered):
    deployment = one(rendered["defaults"].docs, "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0},
    }
    assert pod["terminationGracePeriodSeconds"] == 330  # 5m and the 30 s margin
    assert pod["serviceAccountName"] == "workflow-agent"
    assert container["image"] == "registry.example.com/team/workflow-agent:" + APP_VERSION
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    selector = spec["selector"]["matchLabels"]
    assert selector == {
        "app.kubernetes.io/name": "workflow-agent",
        "app.kubernetes.io/instance": "workflow-agent",
    }
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()
    # Spread over nodes by default; a user's constraints replace it.
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
        }
    ]
    env = env_of(deployment)
    assert list(env) == [
        "PULUMI_AGENT_CONFIG", "PULUMI_AGENT_TOKEN", "WORKFLOW_AGENT_INSTANCE",
        "WORKFLOW_AGENT_WORKER_POD_PATCH", "PULUMI_AGENT_SERVICE_ACCOUNT_NAME",
    ]  # fmt: skip
    assert env["PULUMI_AGENT_TOKEN"] == {
        "secretKeyRef": {"name": "workflow-agent-token", "key": "PULUMI_AGENT_TOKEN"}
    }
    assert env["WORKFLOW_AGENT_INSTANCE"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["PULUMI_AGENT_CONFIG"] == "/etc/workflow-agent/pulumi-workflow-agent.yaml"
    assert env["PULUMI_AGENT_SERVICE_ACCOUNT_NAME"] == "workflow-agent-worker"


def test_env_with_everything_set(rendered):
    """The order the role's manifests had (before the chart): the chart's own, worker settings,
    the proxy (URLs from the Secret, NO_PROXY with the in-cluster names), then `env`."""
    env = env_of(one(rendered["restricted"].docs, "Deployment"))
    assert list(env) == [
        "PULUMI_AGENT_CONFIG", "PULUMI_AGENT_TOKEN", "WORKFLOW_AGENT_INSTANCE",
        "WORKFLOW_AGENT_WORKER_POD_PATCH", "PULUMI_AGENT_SERVICE_ACCOUNT_NAME",
        "PULUMI_AGENT_NUM_CPUS", "PULUMI_AGENT_MEM_QUANTITY",
        "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "EXTRA",
    ]  # fmt: skip
    assert env["PULUMI_AGENT_NUM_CPUS"] == "500m"
    assert env["PULUMI_AGENT_MEM_QUANTITY"] == "1Gi"
    for name in ("HTTPS_PROXY", "https_proxy"):  # credentials: from a Secret, never a value
        assert env[name] == {"secretKeyRef": {"name": "workflow-agent-proxy", "key": name}}
    assert env["NO_PROXY"] == (
        "example.com,$(KUBERNETES_SERVICE_HOST),.svc,.cluster.local,127.0.0.1,localhost"
    )
    assert env["EXTRA"] == "1"


def test_env_names_the_schema_reserves_are_those_the_chart_sets(helm, tmp_path):
    values = {
        **CASES["restricted"],
        "proxy": {"http": PROXY, "https": PROXY},
        "worker": {"cpu": "1", "memory": "1Gi", "imagePullPolicy": "Never"},
        "env": {},
    }
    env = env_of(one(helm.template(values, tmp_path).docs, "Deployment"))
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(schema["properties"]["env"]["properties"]) == set(env)


def test_proxy_from_an_existing_secret(rendered):
    docs = rendered["proxy-secret"].docs
    env = env_of(one(docs, "Deployment"))
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        assert env[name] == {
            "secretKeyRef": {"name": "corp-proxy", "key": name.upper(), "optional": True}
        }
    assert env["NO_PROXY"].startswith("example.com,$(KUBERNETES_SERVICE_HOST),")
    assert [s["metadata"]["name"] for s in find(docs, "Secret")] == ["workflow-agent-token"]


def test_proxy_credentials_only_in_the_proxy_secret(rendered):
    docs = rendered["restricted"].docs
    [proxy] = [s for s in find(docs, "Secret") if s["metadata"]["name"] == "workflow-agent-proxy"]
    data = {k: base64.b64decode(v).decode() for k, v in proxy["data"].items()}
    assert data == {"HTTPS_PROXY": PROXY, "https_proxy": PROXY}  # NO_PROXY holds no secret
    for doc in docs:
        if doc["kind"] != "Secret":
            assert PROXY_PASSWORD not in json.dumps(doc)


def test_token_only_in_its_secret(rendered):
    for case, result in rendered.items():
        for doc in result.docs:
            if doc["kind"] == "Secret" and doc["metadata"]["name"] == "workflow-agent-token":
                assert base64.b64decode(doc["data"]["PULUMI_AGENT_TOKEN"]).decode() == TOKEN
                continue
            text = json.dumps(doc)
            assert TOKEN not in text and TOKEN.encode().hex() not in text, (case, doc["kind"])
            assert base64.b64encode(TOKEN.encode()).decode() not in text, (case, doc["kind"])


def test_configmap_holds_a_config_the_agent_accepts_and_no_secret(rendered, tmp_path):
    for case in ("defaults", "restricted", "proxy-secret"):
        data = one(rendered[case].docs, "ConfigMap")["data"]
        config = yaml.safe_load(data["pulumi-workflow-agent.yaml"])
        assert "token" not in config
        checked = agent_check(data["pulumi-workflow-agent.yaml"], tmp_path / f"{case}.yaml")
        assert checked["deploy_target"] == "kubernetes"
    data = one(rendered["restricted"].docs, "ConfigMap")["data"]
    assert sorted(data) == ["pulumi-workflow-agent.yaml", "worker-pod.json"]
    assert yaml.safe_load(data["pulumi-workflow-agent.yaml"]) == {
        "deploy_target": "kubernetes",
        "slots": 1,
        "drain_timeout": "5m",
        "http_server_port": 8080,
        "polling_interval": "5s",
        "job_security_profile": "restricted",
    }
    data = one(rendered["proxy-secret"].docs, "ConfigMap")["data"]
    assert data["ca-bundle.pem"] == CA
    config = yaml.safe_load(data["pulumi-workflow-agent.yaml"])
    assert config["ca_bundle"] == "/etc/workflow-agent/ca-bundle.pem"


def test_worker_pod_patch_is_what_the_kubernetes_target_loads(rendered, tmp_path):
    """worker-pod.json through the target's own loader and pod renderer: the user's patch, the
    pool's instance label, and (podIds false) no ids on the job pods either."""
    from workflow_agent.targets import _k8spod
    from workflow_agent.targets.base import JobSpec

    docs = rendered["restricted"].docs
    path = tmp_path / "worker-pod.json"
    path.write_text(one(docs, "ConfigMap")["data"]["worker-pod.json"])
    env = {k: v for k, v in env_of(one(docs, "Deployment")).items() if isinstance(v, str)}
    env["WORKFLOW_AGENT_WORKER_POD_PATCH"] = str(path)
    pod = _k8spod.render_pod(
        JobSpec(job_id="job-1", run_id="run-1", image="job:1"),
        "agent-pod-1",
        _k8spod.Settings.from_env(env),
        pull_image=False,
        grace=30,
        profile="restricted",
    )
    assert pod["spec"]["nodeSelector"] == {"pool": "jobs"}
    assert pod["spec"]["serviceAccountName"] == "workflow-agent-worker"
    assert pod["metadata"]["labels"]["app.kubernetes.io/instance"] == "workflow-agent"
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"}
    }
    context = pod["spec"]["securityContext"]
    assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(context), context
    assert context["runAsNonRoot"] is True


def test_worker_service_account(rendered):
    docs = rendered["restricted"].docs
    agent_sa = one(docs, "ServiceAccount", "workflow-agent")
    worker_sa = one(docs, "ServiceAccount", "workflow-agent-worker")
    assert agent_sa["automountServiceAccountToken"] is True
    assert worker_sa["automountServiceAccountToken"] is False
    assert worker_sa["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/jobs"
    }
    assert worker_sa["imagePullSecrets"] == [{"name": "jobs-registry"}]


def test_service_and_disruption_budget(rendered):
    docs = rendered["defaults"].docs
    service = one(docs, "Service")
    assert service["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
    selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert one(docs, "PodDisruptionBudget")["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": selector},
    }
    assert not find(rendered["existing-secret"].docs, "PodDisruptionBudget")


def test_existing_secret(rendered):
    docs = rendered["existing-secret"].docs
    assert not find(docs, "Secret")
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert env_of(deployment)["PULUMI_AGENT_TOKEN"] == {
        "secretKeyRef": {"name": "my-token", "key": "PULUMI_AGENT_TOKEN"}
    }
    pod = deployment["spec"]["template"]
    assert pod["spec"]["terminationGracePeriodSeconds"] == 3630
    # helm template cannot look the Secret up: no hash of it (the role passes a checksum).
    assert "workflow-agent/token-hash" not in pod["metadata"]["annotations"]


def test_hpa_owns_the_replicas(rendered):
    docs = rendered["hpa"].docs
    assert "replicas" not in one(docs, "Deployment")["spec"]
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["minReplicas"] == 2  # `replicas`, without autoscaling.minReplicas
    assert hpa["spec"]["maxReplicas"] == 5
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "workflow-agent",
    }
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"


def test_keda_servicemonitor_and_prometheusrule(rendered):
    docs = rendered["keda"].docs
    assert "replicas" not in one(docs, "Deployment")["spec"]
    assert not find(docs, "HorizontalPodAutoscaler")
    scaled = one(docs, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"] == {"name": "workflow-agent"}
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (0, 8)
    assert scaled["spec"]["triggers"] == CASES["keda"]["autoscaling"]["kedaTriggers"]
    monitor = one(docs, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == one(docs, "Service")["spec"]["selector"]
    # The job label is workflow-agent whatever the release's name: the rules expect it.
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/name"
    assert one(docs, "Service")["metadata"]["labels"]["app.kubernetes.io/name"] == "workflow-agent"
    [endpoint] = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == ("http", "/metrics", "30s")
    rules = yaml.safe_load((REPO / "extensions/prometheus/rules.yml").read_text())
    assert one(docs, "PrometheusRule")["spec"]["groups"] == rules["groups"]
    prom = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
    pod = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert pod.items() >= prom.items()
    default_pod = one(rendered["defaults"].docs, "Deployment")["spec"]["template"]["metadata"]
    assert not set(prom) & set(default_pod["annotations"])


def test_network_policy(rendered):
    policy = one(rendered["restricted"].docs, "NetworkPolicy")
    selector = one(rendered["restricted"].docs, "Deployment")["spec"]["selector"]
    assert policy["spec"]["podSelector"] == selector
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {"ports": [{"port": "http", "protocol": "TCP"}], "from": [{"podSelector": {}}]}
    ]
    assert not find(rendered["defaults"].docs, "NetworkPolicy")


def test_helm_test_pod(rendered):
    pod = one(rendered["defaults"].docs, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    [container] = pod["spec"]["containers"]
    assert container["image"] == "registry.example.com/team/workflow-agent:" + APP_VERSION
    assert container["command"][:2] == ["python3", "-c"]
    script = container["command"][2]
    assert "WORKFLOW_AGENT_SERVICE_HOST" in script and "/readyz" in script
    compile(script, "test-health", "exec")  # valid Python


# --- values that change the pods ------------------------------------------------------------


@pytest.mark.parametrize(
    "duration",
    ["5m", "1h30m2.5s", "90s", "1.5m", "0", "0s", "300ms", "2h45m", "1.2m", ".5s", "1µs"],
)
def test_termination_grace_is_the_drain_timeout_rounded_up_plus_the_margin(
    helm, tmp_path, duration
):
    from workflow_agent import durations

    docs = helm.template(
        {**BASE, "drainTimeout": duration, "terminationGraceMargin": 7}, tmp_path
    ).docs
    grace = one(docs, "Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace == math.ceil(durations.parse(duration).total_seconds()) + 7


def annotations(helm, tmp_path, values: dict) -> dict:
    docs = helm.template(values, tmp_path).docs
    return one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]


def test_a_changed_config_or_token_rolls_the_pods(helm, tmp_path):
    base = annotations(helm, tmp_path, BASE)
    assert re.fullmatch(r"[0-9a-f]{16}", base["workflow-agent/config-hash"])
    assert re.fullmatch(r"[0-9a-f]{16}", base["workflow-agent/token-hash"])
    config = annotations(helm, tmp_path, {**BASE, "config": {"log_level": "debug"}})
    assert config["workflow-agent/config-hash"] != base["workflow-agent/config-hash"]
    assert config["workflow-agent/token-hash"] == base["workflow-agent/token-hash"]
    token = annotations(helm, tmp_path, {**BASE, "token": TOKEN + "0"})
    assert token["workflow-agent/token-hash"] != base["workflow-agent/token-hash"]
    assert token["workflow-agent/config-hash"] == base["workflow-agent/config-hash"]
    proxy = annotations(helm, tmp_path, {**BASE, "proxy": {"https": PROXY}})
    assert proxy["workflow-agent/token-hash"] != base["workflow-agent/token-hash"]
    existing = {"image": BASE["image"], "existingSecret": "my-token"}
    one_sum = annotations(helm, tmp_path, {**existing, "existingSecretChecksum": "digest-1"})
    two_sum = annotations(helm, tmp_path, {**existing, "existingSecretChecksum": "digest-2"})
    assert one_sum["workflow-agent/token-hash"] != two_sum["workflow-agent/token-hash"]


def test_user_topology_spread_replaces_the_default(helm, tmp_path):
    mine = [
        {
            "maxSkew": 2,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"a": "b"}},
        }
    ]
    docs = helm.template({**BASE, "topologySpreadConstraints": mine}, tmp_path).docs
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["topologySpreadConstraints"] == mine


# --- bad values: one message naming the key, before anything renders ------------------------

MANAGED = ["token", "deploy_target", "slots", "drain_timeout", "http_server_port", "ca_bundle"]
BAD = {
    "unknown value": (
        {**BASE, "replica": 2},
        [r"at '': additional properties 'replica' not allowed"],
    ),
    "unknown agent key": (
        {**BASE, "config": {"pollinginterval": "5s"}},
        [r"at '/config': additional properties 'pollinginterval' not allowed"],
    ),
    "bad agent duration": (
        {**BASE, "config": {"polling_interval": "5 minutes"}},
        [r"at '/config/polling_interval': value must be 'a Go duration longer than 0s"],
    ),
    "zero polling interval": (
        {**BASE, "config": {"polling_interval": "0s"}},
        [r"at '/config/polling_interval': value must be 'a Go duration longer than 0s"],
    ),
    "bare drainTimeout": (
        {**BASE, "drainTimeout": 300},
        [r"at '/drainTimeout': got number, want string",
         r"at '/drainTimeout': value must be 'a Go duration such as 30s"],
    ),
    "bad drainTimeout": (
        {**BASE, "drainTimeout": "5 minutes"},
        [r"at '/drainTimeout': value must be 'a Go duration such as 30s, 1m or 1h30m'"],
    ),
    "no token": (
        {"image": BASE["image"]},
        [r"'oneOf' failed, none matched", r"at '/token': minLength: got 0, want 1",
         r"at '/existingSecret': minLength: got 0, want 1"],
    ),
    "token and existingSecret": (
        {**BASE, "existingSecret": "my-token"},
        [r"'oneOf' failed, none matched", r"at '/token': maxLength: got \d+, want 0",
         r"at '/existingSecret': maxLength: got 8, want 0"],
    ),
    "hpa without maxReplicas": (
        {**BASE, "autoscaling": {"mode": "hpa"}},
        [r"at '/autoscaling/maxReplicas': value must be 'a number: required with "
         r"autoscaling.mode hpa or keda'"],
    ),
    "keda without maxReplicas or triggers": (
        {**BASE, "autoscaling": {"mode": "keda"}},
        [r"at '/autoscaling/maxReplicas': value must be 'a number: required with",
         r"at '/autoscaling/kedaTriggers': value must be 'at least one trigger: required with "
         r"autoscaling.mode keda'"],
    ),
    "keda without triggers": (
        {**BASE, "autoscaling": {"mode": "keda", "maxReplicas": 3}},
        [r"at '/autoscaling/kedaTriggers': value must be 'at least one trigger"],
    ),
    "no image": (
        {"token": TOKEN},
        [r"at '/image/repository': value must be 'required: the repository of the agent image"],
    ),
    "env the chart sets": (
        {**BASE, "env": {"PULUMI_AGENT_TOKEN": "x"}},
        [r"at '/env/PULUMI_AGENT_TOKEN': value must be 'unset: the chart sets "
         r"env.PULUMI_AGENT_TOKEN itself \(use the value token or existingSecret\)'"],
    ),
    "bad choice": (
        {**BASE, "autoscaling": {"mode": "vpa", "maxReplicas": 3}},
        [r"at '/autoscaling/mode': value must be one of 'none', 'hpa', 'keda'"],
    ),
    **{
        f"config.{key}": (
            {**BASE, "config": {key: "x"}},
            [rf"at '/config/{key}': value must be 'unset: the chart sets config.{key} itself"],
        )
        for key in MANAGED
    },
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_values_fail_with_a_message_naming_the_key(helm, tmp_path, case):
    values, patterns = BAD[case]
    result = helm.template(values, tmp_path)
    assert result.rc != 0, f"{case} rendered"
    assert result.stdout == ""  # nothing rendered, so nothing to apply
    message = result.stderr
    assert message.startswith("Error: values don't meet the specifications of the schema(s)")
    for pattern in patterns:
        assert re.search(pattern, message), message
    assert TOKEN not in message
    assert "panic" not in message and "goroutine" not in message


def test_release_name_that_cannot_name_the_objects(helm, tmp_path):
    result = helm.run("template", "a" * 41, str(CHART), "-f", str(write_values(tmp_path, BASE)))
    assert result.rc != 0
    assert re.search(r"release name \"a{41}\": .* at most 40 characters", result.stderr), (
        result.stderr
    )
