"""Role agent_k8s without a cluster: its manifests, rendered by real ansible-playbook through the
role's `render` entry point (the same templates `main` applies), validated against the
Kubernetes schemas with `kubernetes-validate --strict`, and checked for what they must say.

One playbook renders every case (block/rescue collects the expected failures), so the whole
module costs one ansible-playbook run. The ScaledObject and ServiceMonitor kinds come from
CRDs kubernetes-validate has no schema for; they are checked field by field instead.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_plugins_common import BIN, REPO, run_play

ROLE = REPO / "roles" / "agent_k8s"
TOKEN = "pul-" + "5a" * 20
CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
PROXY_PASSWORD = "s3cret-proxy-pw"  # noqa: S105 - a test value, checked to appear nowhere
PROXY = f"http://agent:{PROXY_PASSWORD}@proxy.example:3128"
CRD_KINDS = {"ScaledObject", "ServiceMonitor"}
NOTE_ERROR = "{{ errors | default({}) | combine({'CASE': ansible_failed_result.msg}) }}"


def kube_version() -> str:
    """The minor version of the test cluster (tests/k8s), as kubernetes-validate wants it."""
    gomod = REPO / "tests" / "k8s" / "kube" / "go.mod"
    found = (
        re.search(r"k8s\.io/kubernetes v1\.(\d+)\.", gomod.read_text()) if gomod.exists() else None
    )
    return f"1.{found.group(1) if found else 35}.0"


BASE = {
    "workflow_agent_k8s_token": "{{ pool_token }}",
    "workflow_agent_k8s_service_url": "http://10.96.0.10:8080/",
}
CASES = {
    "default": {
        **BASE,
        "workflow_agent_k8s_namespaces": ["ns-a", {"name": "ns-b", "weight": 2}],
        "workflow_agent_k8s_pool_target": 6,
        "workflow_agent_k8s_config": {"polling_interval": "5s", "pull_image": False},
        "workflow_agent_k8s_proxy": {"https": PROXY, "no_proxy": "example.com"},
        "workflow_agent_k8s_ca_bundle": CA,
        "workflow_agent_k8s_env": {"EXTRA": 1},
        "workflow_agent_k8s_worker_pod": {"spec": {"nodeSelector": {"pool": "jobs"}}},
        "workflow_agent_k8s_worker_cpu": "500m",
        "workflow_agent_k8s_worker_memory": "1Gi",
        "workflow_agent_k8s_worker_service_account_annotations": {
            "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/jobs"
        },
        "workflow_agent_k8s_worker_image_pull_secrets": ["jobs-registry"],
    },
    "existing": {
        "workflow_agent_k8s_existing_secret": "my-token",
        "workflow_agent_k8s_namespaces": [{"name": "ns-c", "replicas": 3}, "ns-d"],
        "workflow_agent_k8s_create_namespaces": False,
        "workflow_agent_k8s_pdb_max_unavailable": None,
        "workflow_agent_k8s_drain_timeout": "1h",
        "workflow_agent_k8s_name": "pool-two",
    },
    "hpa": {
        **BASE,
        "workflow_agent_k8s_namespaces": ["ns-a", "ns-b"],
        "workflow_agent_k8s_pool_target": 4,
        "workflow_agent_k8s_autoscaling": "hpa",
        "workflow_agent_k8s_max_replicas": 5,
    },
    "keda": {
        **BASE,
        "workflow_agent_k8s_namespaces": ["ns-a"],
        "workflow_agent_k8s_autoscaling": "keda",
        "workflow_agent_k8s_min_replicas": 0,
        "workflow_agent_k8s_max_replicas": 8,
        "workflow_agent_k8s_keda_triggers": [
            {
                "type": "prometheus",
                "metadata": {
                    "serverAddress": "http://prom:9090",
                    "threshold": "1",
                    "query": "sum(workflow_agent_busy_slots)",
                },
            }
        ],
        "workflow_agent_k8s_service_monitor": True,
        "workflow_agent_k8s_prometheus_pod_annotations": True,
    },  # fmt: skip
    "plan": {
        **BASE,
        "workflow_agent_k8s_namespaces": ["ns-a"],
        # A plan made over hosts and namespaces together (the rollout playbook's job).
        "workflow_agent_k8s_plan": {
            "host-1": {"instances": 2, "slots": 4},
            "ns-a": {"instances": 2, "slots": 3},
        },
        "workflow_agent_k8s_slots": 2,
        "workflow_agent_k8s_pool_target": 99,  # ignored: the plan wins
    },
    "zero": {
        **BASE,
        "workflow_agent_k8s_namespaces": ["ns-a", "ns-b"],
        "workflow_agent_k8s_pool_target": 0,
    },
    # OpenShift's restricted-v2 assigns the ids: the pods must not set them.
    "openshift": {
        **BASE,
        "workflow_agent_k8s_namespaces": ["ns-o"],
        "workflow_agent_k8s_pod_ids": False,
    },
}
BAD = {
    "token_in_config": {**CASES["plan"], "workflow_agent_k8s_config": {"token": "pul-x"}},
    "bad_duration": {
        **CASES["zero"],
        "workflow_agent_k8s_config": {"polling_interval": "5 minutes"},
    },
    # Seconds without a unit: the agent's drain_timeout form is a Go duration, as in the agent role.
    "bare_drain_timeout": {**CASES["zero"], "workflow_agent_k8s_drain_timeout": 300},
    "both_credentials": {**CASES["zero"], "workflow_agent_k8s_existing_secret": "my-token"},
    "no_credentials": {"workflow_agent_k8s_namespaces": ["ns-a"]},
    "no_namespaces": {**BASE},
    "duplicate_namespace": {**BASE, "workflow_agent_k8s_namespaces": ["ns-a", "ns-a"]},
    "bad_namespace": {**BASE, "workflow_agent_k8s_namespaces": ["Not_A_Label"]},
    "unknown_namespace_key": {**BASE, "workflow_agent_k8s_namespaces": [{"name": "a", "slots": 2}]},
    "plan_missing": {**CASES["plan"], "workflow_agent_k8s_namespaces": ["ns-a", "ns-z"]},
    "over_cap": {**CASES["zero"], "workflow_agent_k8s_pool_target": 151},
    "over_max": {
        **BASE,
        "workflow_agent_k8s_namespaces": [{"name": "a", "max": 1}, {"name": "b", "max": 1}],
        "workflow_agent_k8s_pool_target": 3,
    },
    "hpa_without_max": {**CASES["zero"], "workflow_agent_k8s_autoscaling": "hpa"},
    "managed_env": {**CASES["zero"], "workflow_agent_k8s_env": {"PULUMI_AGENT_TOKEN": "x"}},
    "bad_choice": {**CASES["zero"], "workflow_agent_k8s_autoscaling": "vpa"},
}


def render_task(case: str, variables: dict, out: Path) -> dict:
    return {
        "name": f"render {case}",
        "ansible.builtin.include_role": {
            "name": "selfhosted.workflow_agent.agent_k8s",
            "tasks_from": "render",
        },
        "vars": {**variables, "workflow_agent_k8s_render_dir": str(out / case)},
    }


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    base = tmp_path_factory.mktemp("agent_k8s")
    out = base / "out"
    tasks: list[dict] = []
    for case in CASES:
        (out / case).mkdir(parents=True)
        tasks.append(render_task(case, CASES[case], out))
    for case, variables in BAD.items():
        (out / case).mkdir(parents=True)
        tasks.append(
            {
                "name": f"bad {case}",
                "block": [render_task(case, variables, out)],
                "rescue": [
                    {
                        "name": f"note {case}",
                        "ansible.builtin.set_fact": {"errors": NOTE_ERROR.replace("CASE", case)},
                    }
                ],
            }
        )
    tasks.append(
        {
            "name": "errors",
            "ansible.builtin.copy": {
                "dest": str(base / "errors.json"),
                "content": "{{ errors | default({}) | to_json }}",
                "mode": "0600",
            },
        }
    )
    run = run_play(base / "play", tasks, variables={"pool_token": TOKEN})
    assert run.rc == 0, run.output[-4000:]
    docs = {}
    for case in CASES:
        docs[case] = [
            doc
            for path in sorted((out / case).glob("*.yaml"))
            if not path.name.endswith("-secret.yaml")
            for doc in yaml.safe_load_all(path.read_text())
            if doc
        ]
    return {
        "docs": docs,
        "out": out,
        "output": run.output,
        "errors": json.loads((base / "errors.json").read_text()),
    }


def find(docs: list[dict], kind: str, namespace: str | None = None) -> list[dict]:
    return [
        d for d in docs if d["kind"] == kind and namespace in (None, d["metadata"].get("namespace"))
    ]


def one(docs: list[dict], kind: str, namespace: str | None = None) -> dict:
    [doc] = find(docs, kind, namespace)
    return doc


def env_of(deployment: dict) -> dict:
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert len(names) == len(set(names)), names
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in env}


# --- schemas --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_manifest_passes_strict_schema_validation(rendered, case):
    files = sorted(str(p) for p in (rendered["out"] / case).glob("*.yaml"))
    assert files
    docs = [d for f in files for d in yaml.safe_load_all(Path(f).read_text()) if d]
    builtin = [d for d in docs if d["kind"] not in CRD_KINDS]
    assert builtin
    # The CLI, as a user would run it; files with a CRD kind go through the Python API below.
    plain = [f for f in files if not any(k in Path(f).read_text() for k in CRD_KINDS)]
    if plain:
        proc = subprocess.run(
            [str(BIN / "kubernetes-validate"), "--strict", "-k", kube_version(), *plain],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "ERROR" not in proc.stdout + proc.stderr
    import kubernetes_validate

    for doc in builtin:
        kubernetes_validate.validate(doc, kube_version(), strict=True)


def test_strict_validation_would_catch_a_mistake(rendered):
    """The validator is not a rubber stamp: a typo in a rendered Deployment fails it."""
    import kubernetes_validate

    deployment = json.loads(json.dumps(one(rendered["docs"]["default"], "Deployment", "ns-a")))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = (
        "/readyz"
    )
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, kube_version(), strict=True)


# --- what the default case says ---------------------------------------------------------------


def test_objects_per_namespace_and_replicas_from_the_pool_planner(rendered):
    docs = rendered["docs"]["default"]
    for ns in ("ns-a", "ns-b"):
        kinds = sorted(d["kind"] for d in docs if d["metadata"].get("namespace") == ns)
        assert kinds == sorted(
            [
                "ConfigMap",
                "Deployment",
                "PodDisruptionBudget",
                "Role",
                "RoleBinding",
                "Service",
                "ServiceAccount",
                "ServiceAccount",
            ]
        )
    assert sorted(d["metadata"]["name"] for d in find(docs, "Namespace")) == ["ns-a", "ns-b"]
    # Target 6 over weights 1 and 2, the same planner as for hosts.
    assert one(docs, "Deployment", "ns-a")["spec"]["replicas"] == 2
    assert one(docs, "Deployment", "ns-b")["spec"]["replicas"] == 4
    assert [d["spec"]["replicas"] for d in find(rendered["docs"]["zero"], "Deployment")] == [0, 0]
    assert one(rendered["docs"]["plan"], "Deployment")["spec"]["replicas"] == 2


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
    role = one(rendered["docs"]["default"], "Role", "ns-a")
    granted: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert rule["apiGroups"] == [""]
        assert "resourceNames" not in rule
        for resource in rule["resources"]:
            granted.setdefault(resource, set()).update(rule["verbs"])
    assert granted == kubernetes_target_rbac()
    assert "*" not in {v for verbs in granted.values() for v in verbs}
    binding = one(rendered["docs"]["default"], "RoleBinding", "ns-a")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "workflow-agent",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "workflow-agent", "namespace": "ns-a"}
    ]
    assert not find(rendered["docs"]["default"], "ClusterRole")


def test_deployment_pod_spec(rendered):
    deployment = one(rendered["docs"]["default"], "Deployment", "ns-b")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    # Graceful stop: Kubernetes waits at least the agent's drain timeout (default 300 s).
    assert pod["terminationGracePeriodSeconds"] == 330
    assert pod["serviceAccountName"] == "workflow-agent"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert (
        deployment["spec"]["selector"]["matchLabels"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    env = env_of(deployment)
    assert env["WORKFLOW_AGENT_INSTANCE"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["PULUMI_AGENT_TOKEN"] == {
        "secretKeyRef": {"name": "workflow-agent-token", "key": "PULUMI_AGENT_TOKEN"}
    }
    assert env["PULUMI_AGENT_CONFIG"] == "/etc/workflow-agent/pulumi-workflow-agent.yaml"
    assert env["PULUMI_AGENT_SERVICE_ACCOUNT_NAME"] == "workflow-agent-worker"
    assert env["PULUMI_AGENT_NUM_CPUS"] == "500m"
    assert env["PULUMI_AGENT_MEM_QUANTITY"] == "1Gi"
    for name in ("HTTPS_PROXY", "https_proxy"):  # credentials: from a Secret, never a value
        assert env[name] == {"secretKeyRef": {"name": "workflow-agent-proxy", "key": name}}
    assert env["NO_PROXY"].split(",")[:2] == ["example.com", "$(KUBERNETES_SERVICE_HOST)"]
    assert "HTTP_PROXY" not in env
    assert env["EXTRA"] == "1"


def test_configmap_holds_a_config_the_agent_accepts_and_no_secret(rendered, tmp_path):
    docs = rendered["docs"]["default"]
    data = one(docs, "ConfigMap", "ns-a")["data"]
    assert sorted(data) == ["ca-bundle.pem", "pulumi-workflow-agent.yaml", "worker-pod.json"]
    config = yaml.safe_load(data["pulumi-workflow-agent.yaml"])
    assert config == {
        "deploy_target": "kubernetes",
        "service_url": "http://10.96.0.10:8080/",
        "slots": 1,
        "drain_timeout": "5m",  # the role's default, as given
        "http_server_port": 8080,
        "polling_interval": "5s",
        "pull_image": False,
        "ca_bundle": "/etc/workflow-agent/ca-bundle.pem",
    }
    assert data["ca-bundle.pem"] == CA
    # The agent's own check accepts it, with the token from the environment as in the pod.
    path = tmp_path / "pulumi-workflow-agent.yaml"
    path.write_text(data["pulumi-workflow-agent.yaml"])
    script = BIN / "workflow-agent"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "workflow_agent"]
    proc = subprocess.run(
        [*cmd, "check", "--config", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PULUMI_AGENT_TOKEN": TOKEN},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["deploy_target"] == "kubernetes"
    # Nothing but the Secret carries the token, in any form.
    for doc in docs:
        text = json.dumps(doc)
        assert TOKEN not in text
        assert TOKEN.encode().hex() not in text


def test_worker_pod_patch_is_what_the_kubernetes_target_loads(rendered, tmp_path):
    """worker-pod.json goes through the target's own loader and pod renderer."""
    from workflow_agent.targets import _k8spod
    from workflow_agent.targets.base import JobSpec

    data = one(rendered["docs"]["default"], "ConfigMap", "ns-b")["data"]
    path = tmp_path / "worker-pod.json"
    path.write_text(data["worker-pod.json"])
    deployment = one(rendered["docs"]["default"], "Deployment", "ns-b")
    env = {k: v for k, v in env_of(deployment).items() if isinstance(v, str)}
    env["WORKFLOW_AGENT_WORKER_POD_PATCH"] = str(path)
    settings = _k8spod.Settings.from_env(env)
    pod = _k8spod.render_pod(
        JobSpec(job_id="job-1", run_id="run-1", image="job:1"),
        "agent-pod-1",
        settings,
        pull_image=False,
        grace=30,
    )
    assert pod["spec"]["nodeSelector"] == {"pool": "jobs"}
    assert pod["spec"]["serviceAccountName"] == "workflow-agent-worker"
    assert pod["metadata"]["labels"]["app.kubernetes.io/instance"] == "workflow-agent"
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"}
    }


def test_worker_service_account(rendered):
    [agent_sa, worker_sa] = sorted(
        find(rendered["docs"]["default"], "ServiceAccount", "ns-a"),
        key=lambda d: d["metadata"]["name"],
    )
    assert agent_sa["metadata"]["name"] == "workflow-agent"
    assert agent_sa["automountServiceAccountToken"] is True
    assert worker_sa["metadata"]["name"] == "workflow-agent-worker"
    assert worker_sa["automountServiceAccountToken"] is False
    assert worker_sa["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/jobs"
    }
    assert worker_sa["imagePullSecrets"] == [{"name": "jobs-registry"}]


def test_service_and_disruption_budget(rendered):
    docs = rendered["docs"]["default"]
    service = one(docs, "Service", "ns-a")
    assert service["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
    selector = one(docs, "Deployment", "ns-a")["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    pdb = one(docs, "PodDisruptionBudget", "ns-a")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}


def test_token_only_in_a_0600_secret_file_and_never_in_ansible_output(rendered):
    assert TOKEN not in rendered["output"]
    for ns in ("ns-a", "ns-b"):
        path = rendered["out"] / "default" / f"{ns}-secret.yaml"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        secrets = {d["metadata"]["name"]: d for d in yaml.safe_load_all(path.read_text()) if d}
        assert sorted(secrets) == ["workflow-agent-proxy", "workflow-agent-token"]
        secret = secrets["workflow-agent-token"]
        assert secret["kind"] == "Secret"
        assert secret["metadata"]["namespace"] == ns
        assert base64.b64decode(secret["data"]["PULUMI_AGENT_TOKEN"]).decode() == TOKEN
        assert stat.S_IMODE((rendered["out"] / "default" / f"{ns}.yaml").stat().st_mode) == 0o644
    deployment = one(rendered["docs"]["default"], "Deployment", "ns-a")
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert re.fullmatch(r"[0-9a-f]{16}", annotations["workflow-agent/token-hash"])


def test_proxy_credentials_only_in_the_0600_proxy_secret(rendered):
    assert PROXY_PASSWORD not in rendered["output"]
    for doc in rendered["docs"]["default"]:  # every manifest but the Secrets
        assert PROXY_PASSWORD not in json.dumps(doc)
    path = rendered["out"] / "default" / "ns-a-secret.yaml"
    [proxy] = [
        d for d in yaml.safe_load_all(path.read_text()) if d and "proxy" in d["metadata"]["name"]
    ]
    data = {k: base64.b64decode(v).decode() for k, v in proxy["data"].items()}
    assert data == {"HTTPS_PROXY": PROXY, "https_proxy": PROXY}  # NO_PROXY holds no secret
    deployment = one(rendered["docs"]["default"], "Deployment", "ns-a")
    # Switching the proxy off later deletes the Secret the role made (like the other optional
    # objects: the Deployment lists them).
    optional = deployment["metadata"]["annotations"]["workflow-agent/optional-objects"]
    assert "ProxySecret" in optional.split(",")


def test_pod_ids_left_to_the_platform(rendered, tmp_path):
    """workflow_agent_k8s_pod_ids false: neither the agent pods nor the job pods set ids."""
    from workflow_agent.targets import _k8spod
    from workflow_agent.targets.base import JobSpec

    docs = rendered["docs"]["openshift"]
    deployment = one(docs, "Deployment", "ns-o")
    assert deployment["spec"]["template"]["spec"]["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    path = tmp_path / "worker-pod.json"
    path.write_text(one(docs, "ConfigMap", "ns-o")["data"]["worker-pod.json"])
    env = {k: v for k, v in env_of(deployment).items() if isinstance(v, str)}
    env["WORKFLOW_AGENT_WORKER_POD_PATCH"] = str(path)
    pod = _k8spod.render_pod(
        JobSpec(job_id="job-1", run_id="run-1", image="job:1"),
        "agent-pod-1",
        _k8spod.Settings.from_env(env),
        pull_image=False,
        grace=30,
        profile="restricted",  # what OpenShift's restricted-v2 SCC admits
    )
    context = pod["spec"]["securityContext"]
    assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(context), context
    assert context["runAsNonRoot"] is True


# --- the other cases ------------------------------------------------------------------------


def test_existing_secret_fixed_replicas_no_namespace_no_pdb(rendered):
    docs = rendered["docs"]["existing"]
    assert not find(docs, "Secret")
    assert not find(docs, "Namespace")
    assert not find(docs, "PodDisruptionBudget")
    assert not list((rendered["out"] / "existing").glob("*-secret.yaml"))
    c = one(docs, "Deployment", "ns-c")
    assert c["metadata"]["name"] == "pool-two"
    assert c["spec"]["replicas"] == 3
    assert one(docs, "Deployment", "ns-d")["spec"]["replicas"] == 1
    assert env_of(c)["PULUMI_AGENT_TOKEN"] == {
        "secretKeyRef": {"name": "my-token", "key": "PULUMI_AGENT_TOKEN"}
    }
    assert env_of(c)["PULUMI_AGENT_SERVICE_ACCOUNT_NAME"] == "pool-two-worker"
    assert c["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 3630
    assert c["metadata"]["annotations"]["workflow-agent/optional-objects"] == ""
    assert "workflow-agent/token-hash" not in c["spec"]["template"]["metadata"]["annotations"]
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == "pool-two"


def test_hpa_owns_the_replicas(rendered):
    docs = rendered["docs"]["hpa"]
    for ns in ("ns-a", "ns-b"):
        assert "replicas" not in one(docs, "Deployment", ns)["spec"]
        hpa = one(docs, "HorizontalPodAutoscaler", ns)
        assert hpa["spec"]["minReplicas"] == 2  # the planned replicas
        assert hpa["spec"]["maxReplicas"] == 5
        assert hpa["spec"]["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "workflow-agent",
        }
    annotation = one(docs, "Deployment", "ns-a")["metadata"]["annotations"]
    assert annotation["workflow-agent/optional-objects"] == (
        "HorizontalPodAutoscaler,PodDisruptionBudget,Secret"
    )


def test_keda_scaledobject_and_servicemonitor(rendered):
    """CRD kinds: no schema in kubernetes-validate, so their fields are checked here."""
    docs = rendered["docs"]["keda"]
    assert "replicas" not in one(docs, "Deployment")["spec"]
    scaled = one(docs, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"] == {"name": "workflow-agent"}
    assert scaled["spec"]["minReplicaCount"] == 0
    assert scaled["spec"]["maxReplicaCount"] == 8
    assert scaled["spec"]["triggers"][0]["type"] == "prometheus"
    monitor = one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics"}]
    assert monitor["spec"]["selector"]["matchLabels"] == one(docs, "Service")["spec"]["selector"]
    # Pod annotations for annotation-based pod discovery, on request only.
    prom = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
    pod = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert pod.items() >= prom.items()
    default_pod = one(rendered["docs"]["default"], "Deployment", "ns-a")["spec"]["template"][
        "metadata"
    ]
    assert not set(prom) & set(default_pod["annotations"])


# --- bad input: one clear message each --------------------------------------------------------


@pytest.mark.parametrize(
    "case, pattern",
    [
        ("token_in_config", r"^workflow_agent_k8s_config: token is set by the role itself"),
        ("bad_duration", r"config\.polling_interval: .*5 minutes.* not a duration"),
        ("bare_drain_timeout", r"config\.drain_timeout: 300 is not a duration: add a unit"),
        ("both_credentials", r"exactly one of workflow_agent_k8s_token .* and .*_existing_secret"),
        ("no_credentials", r"Set exactly one of workflow_agent_k8s_token"),
        ("no_namespaces", r"^workflow_agent_k8s_namespaces must list at least one namespace$"),
        ("duplicate_namespace", r"^workflow_agent_k8s_namespaces: listed twice: ns-a$"),
        ("bad_namespace", r"^\w+_namespaces: not a lowercase RFC 1123 .*: Not_A_Label$"),
        ("unknown_namespace_key", r"^workflow_agent_k8s_namespaces: unknown key\(s\) slots;"),
        ("plan_missing", r"workflow_agent_k8s_plan has no entry .* ns-z"),
        ("over_cap", r"pool_plan: target 151 is above the cap of 150"),
        ("over_max", r"pool_plan: target 3 is above the hosts' total max of 2"),
        ("hpa_without_max", r"^workflow_agent_k8s_autoscaling=hpa needs \w+_max_replicas$"),
        ("managed_env", r"^workflow_agent_k8s_env: PULUMI_AGENT_TOKEN is set by the role itself"),
        ("bad_choice", r"workflow_agent_k8s_autoscaling.*vpa"),
    ],
)  # fmt: skip
def test_bad_input_fails_with_a_message_naming_it(rendered, case, pattern):
    message = rendered["errors"].get(case)
    assert message, f"{case} did not fail"
    assert re.search(pattern, " ".join(message.split()), re.S), message
    assert "Traceback" not in message
    assert TOKEN not in message
    # A failed case writes nothing.
    assert not list((rendered["out"] / case).iterdir())


# --- the role's own documentation -------------------------------------------------------------


def test_argument_specs_document_exactly_the_defaults():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    assert set(specs) == {"main", "render"}
    options = specs["main"]["options"]
    assert specs["render"]["options"] == options
    assert set(options) == set(defaults)
    for name, spec in options.items():
        assert name.startswith("workflow_agent_k8s_"), name
        assert spec.get("description"), name
        assert spec.get("default") == defaults[name], name


def test_the_scenario_and_the_docs_agree_on_the_image():
    """The role's default image is the one scripts/build-agent-image.sh tags for this version."""
    version = (REPO / "agent/src/workflow_agent/__init__.py").read_text()
    version = re.search(r'__version__ = "([^"]+)"', version).group(1)
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["workflow_agent_k8s_image"] == f"local/workflow-agent:{version}"
    assert os.access(REPO / "scripts" / "build-agent-image.sh", os.X_OK)
