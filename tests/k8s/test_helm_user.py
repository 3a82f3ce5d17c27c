"""A plain Helm user and the agent_k8s role get the same agents from the same chart.

Both install the chart from the suite's OCI registry by reference (scripts/push-images.sh pushed
it there with the agent image, as a user publishes to their own registry): the role into one
namespace, `helm install oci://...` with hand-written values into another. The objects must be
the same but for their namespace and the digests in the pod annotations (the role keeps the token
in a Secret of its own; the Helm user gives it as a value), and both pools must come online.
"""

from __future__ import annotations

import json
import secrets
import string
import subprocess

import pytest
from agent_harness import Emulator
from chartlib import helm_path
from test_plugins_common import run_play

RELEASE = "workflow-agent"
KINDS = "deployments,services,serviceaccounts,roles,rolebindings,configmaps,poddisruptionbudgets"


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_path()


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd[:4])}...: {proc.stderr[-3000:]}")
    return proc


def suffix() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(6))


def objects(cluster, namespace: str) -> dict[str, dict]:
    """The release's objects by kind/name, without what differs by design: the namespace, the
    server's fields, Helm's release annotations and the pods' digest annotations."""
    out = run(
        cluster["kubectl"],
        "--kubeconfig",
        cluster["kubeconfig"],
        "get",
        KINDS,
        "-n",
        namespace,
        "-l",
        f"app.kubernetes.io/instance={RELEASE}",
        "-o",
        "json",
    ).stdout
    found = {}
    for obj in json.loads(out.replace(namespace, "NAMESPACE"))["items"]:
        meta = obj["metadata"]
        key = f"{obj['kind']}/{meta['name']}"
        for field in (
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
            "annotations",
        ):
            meta.pop(field, None)
        obj.pop("status", None)
        template = obj.get("spec", {}).get("template", {}).get("metadata", {})
        template.pop("annotations", None)
        if obj["kind"] == "Service":
            for field in ("clusterIP", "clusterIPs"):
                obj["spec"].pop(field, None)
        found[key] = obj
    return found


def test_helm_install_from_the_registry_gives_what_the_role_gives(cluster, refs, helm, tmp_path):
    role_ns, helm_ns = "wfa-huser-role-" + suffix(), "wfa-huser-helm-" + suffix()
    repository, tag = refs["WFA_AGENT_IMAGE"].rsplit(":", 1)
    nodes = json.loads(
        run(
            cluster["kubectl"], "--kubeconfig", cluster["kubeconfig"], "get", "nodes", "-o", "json"
        ).stdout
    )["items"]
    ip = next(a["address"] for a in nodes[0]["status"]["addresses"] if a["type"] == "InternalIP")
    kube = ["--kubeconfig", cluster["kubeconfig"]]
    try:
        with Emulator(host=ip) as emu:
            variables = {
                "workflow_agent_k8s_namespaces": [role_ns],
                "workflow_agent_k8s_replicas": 2,
                "workflow_agent_k8s_token": emu.pool_token,
                "workflow_agent_k8s_service_url": emu.url,
                "workflow_agent_k8s_image": refs["WFA_AGENT_IMAGE"],
                "workflow_agent_k8s_chart_ref": refs["WFA_CHART"],
                "workflow_agent_k8s_chart_version": refs["WFA_CHART_VERSION"],
                "workflow_agent_k8s_chart_plain_http": True,
                "workflow_agent_k8s_helm_binary": helm,
                "workflow_agent_k8s_kubeconfig": cluster["kubeconfig"],
                "workflow_agent_k8s_config": {"polling_interval": "2s"},
                "workflow_agent_k8s_wait_timeout": 300,
            }
            tasks = [
                {"ansible.builtin.include_role": {"name": "selfhosted.workflow_agent.agent_k8s"}}
            ]
            played = run_play(tmp_path / "role", tasks, variables=variables)
            assert played.rc == 0, played.stdout[-4000:]

            # A Helm user: the same chart by reference, the token as a value, no Ansible.
            values = tmp_path / "values.yaml"
            values.write_text(
                json.dumps(
                    {
                        "image": {"repository": repository, "tag": tag},
                        "replicas": 2,
                        "token": emu.pool_token,
                        "serviceUrl": emu.url,
                        "config": {"polling_interval": "2s"},
                    }
                )
            )
            values.chmod(0o600)
            run(
                helm,
                "install",
                RELEASE,
                refs["WFA_CHART"],
                "--version",
                refs["WFA_CHART_VERSION"],
                "--plain-http",
                "-n",
                helm_ns,
                "--create-namespace",
                "-f",
                str(values),
                "--wait",
                "--timeout",
                "5m",
                *kube,
            )
            run(helm, "test", RELEASE, "-n", helm_ns, "--timeout", "3m", *kube)

            by_role, by_helm = objects(cluster, role_ns), objects(cluster, helm_ns)
            kinds = {key.split("/")[0] for key in by_role}
            assert kinds == {
                "Deployment",
                "Service",
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "ConfigMap",
                "PodDisruptionBudget",
            }, sorted(by_role)
            assert sorted(by_helm) == sorted(by_role)
            for key in by_role:
                assert by_helm[key] == by_role[key], key
            emu.wait_agents(4, timeout=180)
    finally:
        run(helm, "uninstall", RELEASE, "-n", helm_ns, "--wait", *kube, check=False)
        for ns in (role_ns, helm_ns):
            run(cluster["kubectl"], *kube, "delete", "namespace", ns, "--wait=false", check=False)
