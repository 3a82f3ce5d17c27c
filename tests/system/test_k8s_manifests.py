"""Role agent_k8s without a cluster: what the role hands the workflow-agent chart, through its
`render` entry point (real ansible-playbook, the real Helm CLI's `helm template` of the chart
shipped in the collection, the same values `main` installs).

The chart's own manifests are tested by tests/chart/. These tests are about the role: the
values it works out per namespace (replicas from the pool planner, its variables mapped onto
the chart's), the Namespaces and Secrets it makes itself, the render entry point's outputs (the
fact, 0644 and 0600 files), the token and proxy credentials never in Ansible's output, and bad
variables failing with one message each before anything is written.

One playbook renders every case (block/rescue collects the expected failures), so the module
costs one ansible-playbook run (and one more with -vvv --diff for the output check).
"""

from __future__ import annotations

import base64
import json
import re
import stat
from pathlib import Path

import pytest
import yaml
from chartlib import agent_check, env_of, helm_path
from test_plugins_common import REPO, run_play

ROLE = REPO / "roles" / "agent_k8s"
TOKEN = "pul-" + "5a" * 20
CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
PROXY_PASSWORD = "s3cret-proxy-pw"  # noqa: S105 - a test value, checked to appear nowhere
PROXY = f"http://agent:{PROXY_PASSWORD}@proxy.example:3128"
IMAGE = "registry.example.com:5000/team/workflow-agent"
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
    "workflow_agent_k8s_image": IMAGE + ":1.2.3",
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
        "workflow_agent_k8s_namespace_labels": {"pod-security.kubernetes.io/enforce": "restricted"},
        "workflow_agent_k8s_chart_values": {"networkPolicy": {"enabled": True}},
    },
    "existing": {
        "workflow_agent_k8s_existing_secret": "my-token",
        "workflow_agent_k8s_image": IMAGE,  # no tag: the chart's appVersion
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
    "no_credentials": {
        "workflow_agent_k8s_namespaces": ["ns-a"],
        "workflow_agent_k8s_image": IMAGE,
    },
    "no_image": {**CASES["zero"], "workflow_agent_k8s_image": None},
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
    # The chart's schema knows the names it sets: the role passes its message on.
    "managed_env": {**CASES["zero"], "workflow_agent_k8s_env": {"PULUMI_AGENT_TOKEN": "x"}},
    "bad_choice": {**CASES["zero"], "workflow_agent_k8s_autoscaling": "vpa"},
    "chart_values_taken": {
        **CASES["zero"],
        "workflow_agent_k8s_chart_values": {"token": "pul-sneaky", "replicas": 3},
    },
    "chart_values_bad": {
        **CASES["zero"],
        "workflow_agent_k8s_chart_values": {"networkPolicy": {"enabled": "yes"}},
    },
    "no_helm": {**CASES["zero"], "workflow_agent_k8s_helm_binary": "/nonexistent/helm"},
}


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_path()


def render_task(case: str, variables: dict, out: Path, helm: str) -> dict:
    return {
        "name": f"render {case}",
        "ansible.builtin.include_role": {
            "name": "selfhosted.workflow_agent.agent_k8s",
            "tasks_from": "render",
        },
        "vars": {
            "workflow_agent_k8s_helm_binary": helm,
            **variables,
            "workflow_agent_k8s_render_dir": str(out / case),
        },
    }


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, helm):
    base = tmp_path_factory.mktemp("agent_k8s")
    out = base / "out"
    tasks: list[dict] = []
    for case in CASES:
        (out / case).mkdir(parents=True)
        tasks.append(render_task(case, CASES[case], out, helm))
        tasks.append(
            {
                "name": f"keep the fact of {case}",
                "ansible.builtin.copy": {
                    "dest": str(base / f"{case}-fact.json"),
                    "content": "{{ workflow_agent_k8s_manifests | to_json }}",
                    "mode": "0600",
                },
            }
        )
    for case, variables in BAD.items():
        (out / case).mkdir(parents=True)
        tasks.append(
            {
                "name": f"bad {case}",
                "block": [render_task(case, variables, out, helm)],
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
    docs, facts = {}, {}
    for case in CASES:
        docs[case] = [
            doc
            for path in sorted((out / case).glob("*.yaml"))
            if not path.name.endswith("-secret.yaml")
            for doc in yaml.safe_load_all(path.read_text())
            if doc
        ]
        facts[case] = json.loads((base / f"{case}-fact.json").read_text())
    return {
        "docs": docs,
        "facts": facts,
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


def pod_of(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]


# --- the render entry point's outputs ---------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_fact_and_the_files_hold_the_same_manifests(rendered, case):
    """workflow_agent_k8s_manifests is what <namespace>.yaml holds: the role's Namespaces and
    the chart's objects (no Secret, no helm test hook), each in its namespace."""
    fact, docs = rendered["facts"][case], rendered["docs"][case]
    key = lambda d: (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])  # noqa: E731
    assert sorted(map(key, fact)) == sorted(map(key, docs))
    assert not find(docs, "Secret")
    for doc in docs:
        annotations = doc["metadata"].get("annotations") or {}
        assert "helm.sh/hook" not in annotations, doc["metadata"]["name"]
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"], doc["metadata"]["name"]
    for path in (rendered["out"] / case).glob("*.yaml"):
        mode = 0o600 if path.name.endswith("-secret.yaml") else 0o644
        assert stat.S_IMODE(path.stat().st_mode) == mode, path.name


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_manifest_passes_strict_schema_validation(rendered, case):
    import kubernetes_validate

    crd_kinds = {"ScaledObject", "ServiceMonitor"}  # no schema in kubernetes-validate
    builtin = [d for d in rendered["docs"][case] if d["kind"] not in crd_kinds]
    assert builtin
    for doc in builtin:
        kubernetes_validate.validate(doc, kube_version(), strict=True)


# --- the values the role works out ------------------------------------------------------------


def test_objects_per_namespace_and_replicas_from_the_pool_planner(rendered):
    docs = rendered["docs"]["default"]
    for ns in ("ns-a", "ns-b"):
        kinds = sorted(d["kind"] for d in docs if d["metadata"].get("namespace") == ns)
        assert kinds == sorted(
            [
                "ConfigMap",
                "Deployment",
                "NetworkPolicy",  # from workflow_agent_k8s_chart_values
                "PodDisruptionBudget",
                "Role",
                "RoleBinding",
                "Service",
                "ServiceAccount",
                "ServiceAccount",
            ]
        )
    # The role's Namespaces, with its Pod Security labels (the chart makes none).
    namespaces = find(docs, "Namespace")
    assert sorted(d["metadata"]["name"] for d in namespaces) == ["ns-a", "ns-b"]
    for namespace in namespaces:
        assert namespace["metadata"]["labels"] == {
            "pod-security.kubernetes.io/enforce": "restricted"
        }
    # Target 6 over weights 1 and 2, the same planner as for hosts.
    assert one(docs, "Deployment", "ns-a")["spec"]["replicas"] == 2
    assert one(docs, "Deployment", "ns-b")["spec"]["replicas"] == 4
    assert [d["spec"]["replicas"] for d in find(rendered["docs"]["zero"], "Deployment")] == [0, 0]
    assert one(rendered["docs"]["plan"], "Deployment")["spec"]["replicas"] == 2


def test_the_role_variables_reach_the_pods(rendered):
    deployment = one(rendered["docs"]["default"], "Deployment", "ns-b")
    pod = pod_of(deployment)
    [container] = pod["containers"]
    assert container["image"] == IMAGE + ":1.2.3"
    # Graceful stop: Kubernetes waits the agent's drain timeout (default 5m) and the margin.
    assert pod["terminationGracePeriodSeconds"] == 330
    env = env_of(deployment)
    # The token from the Secret the role applies, never a value.
    assert env["PULUMI_AGENT_TOKEN"] == {
        "secretKeyRef": {"name": "workflow-agent-token", "key": "PULUMI_AGENT_TOKEN"}
    }
    assert env["PULUMI_AGENT_NUM_CPUS"] == "500m"
    assert env["PULUMI_AGENT_MEM_QUANTITY"] == "1Gi"
    for name in ("HTTPS_PROXY", "https_proxy"):  # credentials: from the role's Secret
        assert env[name]["secretKeyRef"]["name"] == "workflow-agent-proxy"
        assert env[name]["secretKeyRef"]["key"] == "HTTPS_PROXY"
    assert env["NO_PROXY"].split(",")[:2] == ["example.com", "$(KUBERNETES_SERVICE_HOST)"]
    assert env["EXTRA"] == "1"
    [worker_sa] = [
        d
        for d in find(rendered["docs"]["default"], "ServiceAccount", "ns-a")
        if d["metadata"]["name"] == "workflow-agent-worker"
    ]
    assert worker_sa["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/jobs"
    }
    assert worker_sa["imagePullSecrets"] == [{"name": "jobs-registry"}]


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
    assert json.loads(data["worker-pod.json"])["spec"] == {"nodeSelector": {"pool": "jobs"}}
    # The agent's own check accepts it, with the token from the environment as in the pod.
    checked = agent_check(data["pulumi-workflow-agent.yaml"], tmp_path / "agent.yaml", TOKEN)
    assert checked["deploy_target"] == "kubernetes"


def test_pod_ids_left_to_the_platform(rendered):
    pod = pod_of(one(rendered["docs"]["openshift"], "Deployment", "ns-o"))
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_existing_secret_fixed_replicas_no_namespace_no_pdb(rendered):
    docs = rendered["docs"]["existing"]
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
    assert pod_of(c)["terminationGracePeriodSeconds"] == 3630
    # Without a tag: the chart's appVersion, which is the agent's version.
    version = re.search(
        r'__version__ = "([^"]+)"', (REPO / "agent/src/workflow_agent/__init__.py").read_text()
    ).group(1)
    assert pod_of(c)["containers"][0]["image"] == f"{IMAGE}:{version}"
    # render cannot read the user's Secret: no digest, so no roll on a rotation.
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


def test_keda_and_the_service_monitor(rendered):
    docs = rendered["docs"]["keda"]
    assert "replicas" not in one(docs, "Deployment")["spec"]
    scaled = one(docs, "ScaledObject")
    assert scaled["spec"]["minReplicaCount"] == 0
    assert scaled["spec"]["maxReplicaCount"] == 8
    assert scaled["spec"]["triggers"][0]["type"] == "prometheus"
    assert one(docs, "ServiceMonitor")["spec"]["endpoints"][0]["path"] == "/metrics"
    pod = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert pod["prometheus.io/scrape"] == "true"


# --- secrets ------------------------------------------------------------------------------


def test_token_only_in_the_0600_secret_file(rendered):
    for ns in ("ns-a", "ns-b"):
        path = rendered["out"] / "default" / f"{ns}-secret.yaml"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        secrets = {d["metadata"]["name"]: d for d in yaml.safe_load_all(path.read_text()) if d}
        assert sorted(secrets) == ["workflow-agent-proxy", "workflow-agent-token"]
        token = secrets["workflow-agent-token"]
        assert token["metadata"]["namespace"] == ns
        # The role's own label: state=absent and a switched-off setting find them by it.
        assert token["metadata"]["labels"]["app.kubernetes.io/managed-by"] == (
            "selfhosted.workflow_agent"
        )
        assert base64.b64decode(token["data"]["PULUMI_AGENT_TOKEN"]).decode() == TOKEN
        proxy = {
            k: base64.b64decode(v).decode()
            for k, v in secrets["workflow-agent-proxy"]["data"].items()
        }
        assert proxy == {"HTTPS_PROXY": PROXY}  # NO_PROXY holds no secret
    for case in CASES:
        for doc in rendered["docs"][case] + rendered["facts"][case]:
            text = json.dumps(doc)
            for secret in (TOKEN, PROXY_PASSWORD):
                assert secret not in text
                assert base64.b64encode(secret.encode()).decode() not in text
    # The pods roll when the token changes: they carry a digest of it, which the role passes.
    annotations = one(rendered["docs"]["default"], "Deployment", "ns-a")["spec"]["template"][
        "metadata"
    ]["annotations"]
    assert re.fullmatch(r"[0-9a-f]{16}", annotations["workflow-agent/token-hash"])


def test_no_secret_in_ansible_output(rendered):
    assert TOKEN not in rendered["output"]
    assert PROXY_PASSWORD not in rendered["output"]


def test_no_secret_in_verbose_diff_output(tmp_path, helm):
    """-vvv --diff shows every module's arguments and results, helm_template's values too."""
    out = tmp_path / "out"
    (out / "default").mkdir(parents=True)
    run = run_play(
        tmp_path / "play",
        [render_task("default", CASES["default"], out, helm)],
        variables={"pool_token": TOKEN},
        diff=True,
        verbose=3,
    )
    assert run.rc == 0, run.output[-4000:]
    assert "existingSecretChecksum" in run.output  # the values are shown: the check can fail
    for secret in (TOKEN, PROXY_PASSWORD):
        assert secret not in run.output
        assert base64.b64encode(secret.encode()).decode() not in run.output


# --- bad input: one clear message each --------------------------------------------------------


@pytest.mark.parametrize(
    "case, pattern",
    [
        ("token_in_config", r"^workflow_agent_k8s_config: token is set by the role itself"),
        ("bad_duration", r"config\.polling_interval: .*5 minutes.* not a duration"),
        ("bare_drain_timeout", r"config\.drain_timeout: 300 is not a duration: add a unit"),
        ("both_credentials", r"exactly one of workflow_agent_k8s_token .* and .*_existing_secret"),
        ("no_credentials", r"Set exactly one of workflow_agent_k8s_token"),
        ("no_image", r"^workflow_agent_k8s_image is required: the agent image in a registry"),
        ("no_namespaces", r"^workflow_agent_k8s_namespaces must list at least one namespace$"),
        ("duplicate_namespace", r"^workflow_agent_k8s_namespaces: listed twice: ns-a$"),
        ("bad_namespace", r"^\w+_namespaces: not a lowercase RFC 1123 .*: Not_A_Label$"),
        ("unknown_namespace_key", r"^workflow_agent_k8s_namespaces: unknown key\(s\) slots;"),
        ("plan_missing", r"workflow_agent_k8s_plan has no entry .* ns-z"),
        ("over_cap", r"pool_plan: target 151 is above the cap of 150"),
        ("over_max", r"pool_plan: target 3 is above the hosts' total max of 2"),
        ("hpa_without_max", r"^workflow_agent_k8s_autoscaling=hpa needs \w+_max_replicas$"),
        ("managed_env", r"ns-b: - at '/env/PULUMI_AGENT_TOKEN': .*sets env.PULUMI_AGENT_TOKEN"),
        ("bad_choice", r"workflow_agent_k8s_autoscaling.*vpa"),
        ("chart_values_taken", r"^workflow_agent_k8s_chart_values: replicas, token set by the"),
        ("chart_values_bad", r"refuses the values of .* '/networkPolicy/enabled': got string"),
        ("no_helm", r"^The Helm CLI is required on localhost .* /nonexistent/helm .*_helm_binary"),
    ],
)  # fmt: skip
def test_bad_input_fails_with_a_message_naming_it(rendered, case, pattern):
    message = rendered["errors"].get(case)
    assert message, f"{case} did not fail"
    assert re.search(pattern, " ".join(message.split()), re.S), message
    assert "Traceback" not in message
    assert TOKEN not in message
    assert "pul-sneaky" not in message
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


def test_no_manifest_template_is_left_in_the_role():
    """The chart is the one source of the Kubernetes manifests (issue 25)."""
    assert not (ROLE / "templates").exists()
    assert not list(ROLE.rglob("*.j2"))


def test_the_image_has_no_default_a_cluster_cannot_pull():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["workflow_agent_k8s_image"] is None
