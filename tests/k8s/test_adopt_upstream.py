"""Adopting upstream's Kubernetes install with the agent_k8s role (workflow_agent_k8s_adopt).

Upstream's install is tests/k8s/upstream/agent.yaml: object for object what its Pulumi component
makes (pulumi/customer-managed-workflow-agent kubernetes/agent.ts and index.ts), run with our
agent image, which takes upstream's environment as it is. While one of its agents runs a job,
the role installs its own release in the namespace with only the image, the kubeconfig and
`workflow_agent_k8s_adopt: true` set: the pool token, the service URL and the workers' cloud
identity come from upstream's Secret, ConfigMap and service account. The job must finish
successfully on upstream's agent (no running job lost), nothing of upstream's may be left, the
token must appear nowhere in Ansible's output, our agents must take the next job, and a second
run must change nothing.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import string
import subprocess
import time
from pathlib import Path

from agent_harness import Emulator
from chartlib import helm_path
from test_plugins_common import run_play

MANIFEST = Path(__file__).resolve().parent / "upstream" / "agent.yaml"
UPSTREAM_LABEL = "app.kubernetes.io/name=customer-managed-workflow-agent"
JOB_SECONDS = 25  # long enough to be running across the role's whole takeover


def kubectl(cluster, *args: str, stdin: str | None = None, check: bool = True):
    proc = subprocess.run(
        [cluster["kubectl"], "--kubeconfig", cluster["kubeconfig"], *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr}")
    return proc


def suffix() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(7))


def rollout(cluster, namespace: str, deployment: str) -> None:
    proc = kubectl(
        cluster, "rollout", "status", "-n", namespace, deployment, "--timeout=240s", check=False
    )
    if proc.returncode != 0:
        pods = kubectl(cluster, "describe", "pods", "-n", namespace, check=False).stdout
        raise AssertionError(f"{deployment} not rolled out: {proc.stderr}\n{pods[-3000:]}")


def changed_tasks(run) -> list[str]:
    return [name for name, result in run.results.items() if result.get("changed")]


def node_ip(cluster) -> str:
    nodes = json.loads(kubectl(cluster, "get", "nodes", "-o", "json").stdout)["items"]
    return next(a["address"] for a in nodes[0]["status"]["addresses"] if a["type"] == "InternalIP")


def wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def upstream_objects(cluster, namespace: str) -> list[str]:
    """Everything of upstream's left in the namespace: labelled objects, and the named ones."""
    left = []
    kinds = "deployments,replicasets,pods,services,configmaps,secrets,serviceaccounts,roles"
    kinds += ",rolebindings"
    out = kubectl(cluster, "get", kinds, "-n", namespace, "-l", UPSTREAM_LABEL, "-o", "name")
    left += out.stdout.split()
    for ref in ("secret/agent-secret", "configmap/agent-config", "deployment/workflow-agent-pool"):
        if kubectl(cluster, "get", ref, "-n", namespace, check=False).returncode == 0:
            left.append(ref)
    accounts = kubectl(cluster, "get", "serviceaccounts", "-n", namespace, "-o", "name").stdout
    # Pulumi's auto-names (ours are workflow-agent and workflow-agent-worker).
    left += [
        a for a in accounts.split() if re.fullmatch(r"serviceaccount/workflow-agent-[a-z0-9]{7}", a)
    ]
    return sorted(set(left))


def test_upstream_install_is_adopted_without_losing_its_running_job(cluster, refs, tmp_path):
    namespace = "wfa-adopt-" + suffix()
    image = refs["WFA_AGENT_IMAGE"]
    ip = node_ip(cluster)
    kubectl(cluster, "create", "namespace", namespace)
    try:
        with Emulator(host=ip) as emu:
            worker_sa = "workflow-agent-" + suffix()
            manifest = string.Template(MANIFEST.read_text()).substitute(
                NAMESPACE=namespace,
                SERVICE_URL=emu.url,
                IMAGE=image,
                TOKEN=emu.pool_token,
                SUFFIX=suffix(),
                SUFFIX_WORKER=worker_sa.rsplit("-", 1)[1],
                REPLICAS="1",
            )
            kubectl(cluster, "apply", "-f", "-", stdin=manifest)
            rollout(cluster, namespace, "deployment/workflow-agent-pool")
            [upstream] = emu.wait_agents(1, timeout=120)
            assert upstream["hostname"].startswith("workflow-agent-pool-"), upstream

            steps = [{"name": "long", "run": f"sleep {JOB_SECONDS}; echo finished-on-upstream"}]
            running = emu.create_job(steps=steps, image=refs["WFA_JOB_IMAGE"])
            try:
                wait(lambda: emu.job(running)["status"] == "running", 180, "the job to run")
            except AssertionError as exc:
                logs = kubectl(
                    cluster,
                    "logs",
                    "-n",
                    namespace,
                    "deployment/workflow-agent-pool",
                    "--tail=40",
                    check=False,
                )
                job = emu.job(running)
                raise AssertionError(f"{exc}: {job}\n{logs.stdout}{logs.stderr}") from None

            variables = {
                "workflow_agent_k8s_namespaces": [namespace],
                "workflow_agent_k8s_create_namespaces": False,
                "workflow_agent_k8s_adopt": True,
                "workflow_agent_k8s_image": image,
                "workflow_agent_k8s_kubeconfig": cluster["kubeconfig"],
                "workflow_agent_k8s_drain_timeout": "2m",
                "workflow_agent_k8s_wait_timeout": 300,
                "workflow_agent_k8s_config": {"polling_interval": "2s"},
                "workflow_agent_k8s_resources": {"requests": {"cpu": "20m", "memory": "64Mi"}},
            }
            tasks = [
                {"ansible.builtin.include_role": {"name": "selfhosted.workflow_agent.agent_k8s"}}
            ]
            env = {"PATH": str(Path(helm_path()).parent) + os.pathsep + os.environ["PATH"]}
            first = run_play(tmp_path / "first", tasks, variables=variables, env=env)
            assert first.rc == 0, first.stdout[-4000:]
            assert emu.pool_token not in first.stdout + first.stderr

            # The running job finished where it ran, on upstream's agent, which drained first.
            [done] = emu.wait_jobs([running], timeout=JOB_SECONDS + 180)
            assert done["status"] == "succeeded", done
            assert "finished-on-upstream" in "".join(done["steps"][0]["logs"])
            assert done["agent"] == upstream["id"]

            assert upstream_objects(cluster, namespace) == []
            # The token and the workers' identity were taken over.
            secret = json.loads(
                kubectl(
                    cluster, "get", "secret", "workflow-agent-token", "-n", namespace, "-o", "json"
                ).stdout
            )
            assert "PULUMI_AGENT_TOKEN" in secret["data"]
            worker = json.loads(
                kubectl(
                    cluster,
                    "get",
                    "serviceaccount",
                    "workflow-agent-worker",
                    "-n",
                    namespace,
                    "-o",
                    "json",
                ).stdout
            )
            assert worker["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith(
                ":role/jobs"
            )

            # Our agents take the next job.
            after = emu.create_job(
                steps=[{"name": "ok", "run": "echo on-ours"}], image=refs["WFA_JOB_IMAGE"]
            )
            [next_job] = emu.wait_jobs([after], timeout=180)
            assert next_job["status"] == "succeeded", next_job
            ours = {a["id"]: a["hostname"] for a in emu.agents()}
            assert ours[next_job["agent"]].startswith("workflow-agent-"), ours
            assert not ours[next_job["agent"]].startswith("workflow-agent-pool-")

            second = run_play(tmp_path / "second", tasks, variables=variables, env=env)
            assert second.rc == 0, second.stdout[-4000:]
            assert changed_tasks(second) == []
            assert emu.pool_token not in second.stdout + second.stderr
    finally:
        kubectl(cluster, "delete", "namespace", namespace, "--wait=false", check=False)
