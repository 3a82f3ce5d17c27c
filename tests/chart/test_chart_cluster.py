"""The workflow-agent chart on the test cluster (tests/k8s; a skip names why there is none):

- every golden case's manifests through the API server's own validation (`kubectl apply
  --dry-run=server`, strict field validation) in a namespace that enforces the `restricted`
  Pod Security level (and warns on the Deployment's pod template);
- bad values: `helm install` fails on the schema and nothing reaches the cluster;
- a plain `helm install` of an agent polling the emulator, `helm test`, a job running across
  `helm upgrade` (the old pod drains it to success), `helm rollback` to revision 1's values,
  and `helm uninstall`;
- a rotated existingSecret rolls the pods on `helm upgrade` (the chart looks it up).

Namespaces are wfa-chart-<what>-<random>, deleted at the end. ServiceMonitor, PrometheusRule
and ScaledObject have no CRDs on the test cluster: tests/chart/crds.yaml holds minimal ones
(written from the published CRDs' fields for the fields the chart sets), applied only for the
dry run when missing and deleted afterwards. The agent image is local/workflow-agent:<version>
(scripts/build-agent-image.sh), imported into the cluster's containerd with
tests/k8s/import-image.sh as a labelled copy of these tests' own (pullPolicy IfNotPresent).
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from agent_harness import Emulator, wait_for
from chartlib import BASE, CASES, CHART, REPO, TOKEN, write_values

HERE = Path(__file__).resolve().parent
RELEASE = "wfa"
LONG_STEP = 60  # seconds the job sleeps: it must outlast the upgrade's roll


def agent_version() -> str:
    text = (REPO / "agent/src/workflow_agent/__init__.py").read_text()
    return re.search(r'__version__ = "([^"]+)"', text).group(1)


def kube(kubectl, *args: str, input: str | None = None, check: bool = True, timeout=300):
    proc = subprocess.run(
        [*kubectl, *args], input=input, capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc


def kube_json(kubectl, *args: str) -> dict:
    return json.loads(kube(kubectl, *args, "-o", "json").stdout)


@pytest.fixture
def namespace(kubectl):
    """A factory of scratch namespaces enforcing `restricted` (what the role can label)."""
    made = []

    def make(what: str) -> str:
        name = f"wfa-chart-{what}-{secrets.token_hex(3)}"
        manifest = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": {
                    f"pod-security.kubernetes.io/{mode}": "restricted"
                    for mode in ("enforce", "warn", "audit")
                },
            },
        }
        kube(kubectl, "apply", "-f", "-", input=json.dumps(manifest))
        made.append(name)
        return name

    yield make
    for name in made:
        kube(kubectl, "delete", "namespace", name, "--wait=true", "--timeout=180s", check=False)


@pytest.fixture(scope="module")
def crds(kubectl):
    """The three CRD kinds, for the dry run: tests/chart/crds.yaml's, only where none exists."""
    docs = [d for d in yaml.safe_load_all((HERE / "crds.yaml").read_text()) if d]
    missing = [
        d
        for d in docs
        if kube(kubectl, "get", "crd", d["metadata"]["name"], check=False).returncode != 0
    ]
    for doc in missing:
        kube(kubectl, "apply", "-f", "-", input=json.dumps(doc))
    for doc in missing:
        kube(
            kubectl, "wait", "--for=condition=Established", "--timeout=60s",
            f"crd/{doc['metadata']['name']}",
        )  # fmt: skip
    yield
    for doc in missing:
        kube(kubectl, "delete", "crd", doc["metadata"]["name"], "--wait=false", check=False)


@pytest.fixture(scope="module")
def images(kubectl) -> dict[str, str]:
    """The agent and job images in the cluster's containerd (no registry yet), each as a copy
    with a label of its own: containerd 1.6's CRI took an imported image for absent (and tried
    to pull it) once an image pulled from the suite's registry shared its config digest."""
    names = {
        "agent": (f"local/workflow-agent:{agent_version()}", "local/wfa-chart-agent:test"),
        "job": ("local/workflow-job:latest", "local/wfa-chart-job:test"),
    }
    for source, ours in names.values():
        subprocess.run(
            ["docker", "build", "-q", "--label", "selfhosted.workflow-agent.test=chart",
             "-t", ours, "-"],
            input=f"FROM {source}\n", capture_output=True, text=True, check=True, timeout=300,
        )  # fmt: skip
    proc = subprocess.run(
        ["bash", str(REPO / "tests/k8s/import-image.sh"), *(ours for _, ours in names.values())],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return {what: ours for what, (_, ours) in names.items()}


def helm_env(kubectl) -> dict:
    return {"KUBECONFIG": kubectl[kubectl.index("--kubeconfig") + 1]}


# --- the API server's validation ------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_manifests_pass_the_api_servers_dry_run(
    helm, kubectl, crds, namespace, tmp_path, case
):
    ns = namespace("dry")
    rendered = helm.template(CASES[case], tmp_path, namespace=ns)
    assert rendered.rc == 0, rendered.stderr
    docs = rendered.docs
    dry = kube(
        kubectl, "apply", "--dry-run=server", "--validate=strict", "-n", ns, "-f", "-",
        input=rendered.stdout, check=False,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    # Every object was judged, and none drew a warning (a pod template that would violate
    # `restricted`, a deprecated API, an unknown field).
    assert dry.stdout.count("(server dry run)") == len(docs), dry.stdout
    assert "Warning" not in dry.stderr, dry.stderr
    assert TOKEN not in dry.stdout + dry.stderr
    # Nothing was created.
    left = kube(kubectl, "get", "all,configmaps,secrets,roles", "-n", ns, "-o", "name").stdout
    assert "workflow-agent" not in left


def test_the_dry_run_is_no_rubber_stamp(helm, kubectl, crds, namespace, tmp_path):
    """A misspelt CRD field and a typo in a pod spec fail; an added capability warns."""
    ns = namespace("dry")
    docs = helm.template(CASES["keda"], tmp_path, namespace=ns).docs
    [monitor] = [d for d in docs if d["kind"] == "ServiceMonitor"]
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    context = deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    context["capabilities"]["add"] = ["SYS_ADMIN"]
    [test_pod] = [d for d in docs if d["kind"] == "Pod"]
    test_pod["spec"]["containers"][0]["readinessProbe"] = {"httpGet": {"paht": "/x"}}
    for doc, expected in (
        (monitor, r"unknown field \"spec.endpoints\[0\].intervall\""),
        (test_pod, r"unknown field \"spec.containers\[0\].readinessProbe.httpGet.paht\""),
    ):
        dry = kube(
            kubectl, "apply", "--dry-run=server", "--validate=strict", "-n", ns, "-f", "-",
            input=json.dumps(doc), check=False,
        )  # fmt: skip
        assert dry.returncode != 0 and re.search(expected, dry.stderr), dry.stderr
    dry = kube(
        kubectl, "apply", "--dry-run=server", "-n", ns, "-f", "-", input=json.dumps(deployment)
    )
    assert 'would violate PodSecurity "restricted' in dry.stderr, dry.stderr


def test_bad_values_reach_nothing(helm, kubectl, namespace, tmp_path):
    ns = namespace("bad")
    values = write_values(tmp_path, {**BASE, "config": {"polling_interval": "5 minutes"}})
    run = helm.run(
        "install", RELEASE, str(CHART), "-n", ns, "-f", str(values), env=helm_env(kubectl)
    )
    assert run.rc != 0
    assert "at '/config/polling_interval'" in run.stderr, run.stderr
    assert TOKEN not in run.stdout + run.stderr
    listed = helm.run("list", "-a", "-n", ns, "-q", env=helm_env(kubectl))
    assert listed.rc == 0 and listed.stdout.strip() == ""
    left = kube(
        kubectl, "get", "all,configmaps,secrets,roles,serviceaccounts", "-n", ns, "-o", "json"
    )
    names = [i["metadata"]["name"] for i in json.loads(left.stdout)["items"]]
    assert not [n for n in names if n.startswith(RELEASE)], names


# --- a release's life -----------------------------------------------------------------------


def diagnose(kubectl, ns: str) -> str:
    """The namespace's pods and latest events, for a failed wait's message."""
    pods = kube(kubectl, "get", "pods", "-n", ns, "-o", "wide", check=False).stdout
    events = kube(
        kubectl, "get", "events", "-n", ns, "--sort-by=.lastTimestamp", check=False
    ).stdout.splitlines()[-15:]
    return pods + "\n".join(events)


def agent_pods(kubectl, ns: str) -> list[dict]:
    selector = (
        "app.kubernetes.io/name=workflow-agent,app.kubernetes.io/component=agent,"
        f"app.kubernetes.io/instance={RELEASE}"
    )
    return kube_json(kubectl, "get", "pods", "-n", ns, "-l", selector)["items"]


def ready(pod: dict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def config_hash(pod_or_deployment: dict) -> str:
    meta = pod_or_deployment.get("spec", {}).get("template", {}).get("metadata")
    meta = meta or pod_or_deployment["metadata"]
    return meta["annotations"]["workflow-agent/config-hash"]


def test_install_test_upgrade_with_a_running_job_rollback_uninstall(
    helm, kubectl, images, namespace, tmp_path
):
    ns = namespace("life")
    env = helm_env(kubectl)
    node = kube_json(kubectl, "get", "nodes")["items"][0]
    node_ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    with Emulator(host=node_ip) as emu:
        values = {
            "image": {
                "repository": images["agent"].split(":")[0],
                "tag": images["agent"].split(":")[1],
                "pullPolicy": "IfNotPresent",
            },
            "token": emu.pool_token,
            "serviceUrl": emu.url,
            "config": {
                "polling_interval": "1s",
                "default_image": images["job"],
                "pull_image": False,
                # Job pods too must pass the namespace's `restricted` enforcement.
                "job_security_profile": "restricted",
            },
        }
        v1 = write_values(tmp_path, values)
        started = time.monotonic()
        install = helm.run(
            "install", RELEASE, str(CHART), "-n", ns, "-f", str(v1), "--wait", "--timeout", "4m",
            env=env,
        )  # fmt: skip
        assert install.rc == 0, install.stderr + diagnose(kubectl, ns)
        assert emu.pool_token not in install.stdout + install.stderr
        print(f"install: {time.monotonic() - started:.0f}s")

        # (No --logs: a passed test's pod is deleted at once, so there are none to show.)
        test = helm.run("test", RELEASE, "-n", ns, "--timeout", "3m", env=env)
        assert test.rc == 0, test.stdout + test.stderr + diagnose(kubectl, ns)
        assert re.search(r"Phase:\s+Succeeded", test.stdout), test.stdout

        [old] = agent_pods(kubectl, ns)
        old_name, old_hash = old["metadata"]["name"], config_hash(old)
        wait_for(
            lambda: any(a["instance"] == old_name for a in emu.agents()),
            what=f"{old_name} online at the emulator",
        )
        steps = [{"name": "long", "run": f"echo started; sleep {LONG_STEP}; echo finished"}]
        job_id = emu.create_job(steps, image=images["job"])
        wait_for(
            lambda: emu.job(job_id)["status"] == "running", timeout=180, what="the job running"
        )
        worker = kube_json(
            kubectl, "get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=pulumi-workflow"
        )["items"]
        assert [p["metadata"]["labels"]["workflow-agent/instance"] for p in worker] == [old_name]

        # A changed agent key: a new ConfigMap hash, so new pods; the old one drains its job.
        v2 = write_values(
            tmp_path, {**values, "config": {**values["config"], "log_level": "debug"}}
        )
        upgrade = helm.run(
            "upgrade", RELEASE, str(CHART), "-n", ns, "-f", str(v2), "--wait", "--timeout", "4m",
            env=env,
        )  # fmt: skip
        assert upgrade.rc == 0, upgrade.stderr + diagnose(kubectl, ns)
        # The old pod drains: deleted, yet still there while its job runs.
        pods = wait_for(
            lambda: {
                p["metadata"]["name"]: p
                for p in agent_pods(kubectl, ns)
                if p["metadata"]["name"] != old_name or p["metadata"].get("deletionTimestamp")
            },
            timeout=60,
            what="the old pod terminating",
        )
        assert old_name in pods, "the old pod went before its job finished"
        [new_name] = [n for n, p in pods.items() if ready(p)]
        assert new_name != old_name and config_hash(pods[new_name]) != old_hash
        assert emu.job(job_id)["status"] == "running"

        [job] = emu.wait_jobs([job_id], timeout=LONG_STEP + 180)
        assert job["status"] == "succeeded", job
        assert "finished" in json.dumps(job["steps"])
        wait_for(
            lambda: old_name not in {p["metadata"]["name"] for p in agent_pods(kubectl, ns)},
            timeout=120,
            what="the drained pod gone",
        )

        rollback = helm.run(
            "rollback", RELEASE, "1", "-n", ns, "--wait", "--timeout", "4m", env=env
        )
        assert rollback.rc == 0, rollback.stderr + diagnose(kubectl, ns)
        got = helm.run("get", "values", RELEASE, "-n", ns, "-o", "json", env=env)
        assert got.rc == 0 and json.loads(got.stdout) == values
        config = kube_json(kubectl, "get", "configmap", f"{RELEASE}-config", "-n", ns)
        assert "log_level" not in config["data"]["pulumi-workflow-agent.yaml"]
        deployment = kube_json(kubectl, "get", "deployment", RELEASE, "-n", ns)
        assert config_hash(deployment) == old_hash
        history = json.loads(helm.run("history", RELEASE, "-n", ns, "-o", "json", env=env).stdout)
        assert [h["revision"] for h in history] == [1, 2, 3]
        assert history[-1]["description"] == "Rollback to 1"
        wait_for(
            lambda: [p for p in agent_pods(kubectl, ns) if ready(p) and config_hash(p) == old_hash],
            timeout=180,
            what="an agent pod of revision 1's config ready",
        )

        # helm test fails when no agent answers (its pod stays, with the reason in its log).
        kube(kubectl, "scale", "deployment", RELEASE, "-n", ns, "--replicas=0")
        # A terminating agent still answers until it exits (CI once saw /healthz 200 from one).
        wait_for(lambda: not agent_pods(kubectl, ns), timeout=180, what="no agent pod left")
        test = helm.run("test", RELEASE, "-n", ns, "--logs", "--timeout", "3m", env=env)
        assert test.rc != 0, test.stdout
        assert re.search(r"/healthz failed: ", test.stdout), test.stdout
        kube(kubectl, "delete", "pod", f"{RELEASE}-test-health", "-n", ns)

        uninstall = helm.run("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "4m", env=env)
        assert uninstall.rc == 0, uninstall.stderr + diagnose(kubectl, ns)

    def left():
        return kube_json(
            kubectl, "get", "all,configmaps,secrets,roles,rolebindings,serviceaccounts", "-n", ns,
            "-l", f"app.kubernetes.io/instance={RELEASE}",
        )["items"]  # fmt: skip

    wait_for(lambda: left() == [], timeout=120, what="nothing of the release left")


def test_a_rotated_existing_secret_rolls_the_pods_on_upgrade(helm, kubectl, namespace, tmp_path):
    """existingSecret without existingSecretChecksum: helm install/upgrade looks the Secret up,
    so the same values after a rotation give the pods a new token-hash."""
    ns = namespace("secret")
    env = helm_env(kubectl)

    def token_secret(token: str) -> None:
        manifest = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "my-token", "namespace": ns},
            "stringData": {"PULUMI_AGENT_TOKEN": token},
        }
        kube(kubectl, "apply", "-f", "-", input=json.dumps(manifest))

    def token_hash() -> str | None:
        deployment = kube_json(kubectl, "get", "deployment", RELEASE, "-n", ns)
        return deployment["spec"]["template"]["metadata"]["annotations"].get(
            "workflow-agent/token-hash"
        )

    values = write_values(tmp_path, {"image": BASE["image"], "existingSecret": "my-token"})
    token_secret(TOKEN)
    run = helm.run("install", RELEASE, str(CHART), "-n", ns, "-f", str(values), env=env)
    assert run.rc == 0, run.stderr
    first = token_hash()
    assert first and re.fullmatch(r"[0-9a-f]{16}", first)
    run = helm.run("upgrade", RELEASE, str(CHART), "-n", ns, "-f", str(values), env=env)
    assert run.rc == 0, run.stderr
    assert token_hash() == first  # unchanged Secret, unchanged pods
    token_secret(TOKEN + "0")
    run = helm.run("upgrade", RELEASE, str(CHART), "-n", ns, "-f", str(values), env=env)
    assert run.rc == 0, run.stderr
    assert token_hash() not in (None, first)
    assert helm.run("uninstall", RELEASE, "-n", ns, env=env).rc == 0
