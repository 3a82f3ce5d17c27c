"""Harnesses that drive each target against the real thing and observe what it left behind.

A harness builds a target, makes jobs for it and answers two questions from outside the target:
what is still around for a job (dirs, containers, pods), and is a process with a given token in
its command line still running. The contract tests in test_contract.py run against every
harness; a harness whose backend is missing skips with the reason.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from workflow_agent.config import AgentConfig
from workflow_agent.targets import _jobdir
from workflow_agent.targets.base import (
    LABEL_INSTANCE,
    LABEL_JOB,
    LABEL_RUN,
    JobSpec,
    Step,
    StepOutcome,
    Target,
)

REPO = Path(__file__).resolve().parents[3]
JOB_IMAGE = os.environ.get("WORKFLOW_AGENT_JOB_IMAGE", "local/workflow-job:latest")


def token() -> str:
    """A number no other process on the machine has in its command line: `sleep <token>`."""
    return f"{random.randint(4000, 8999)}.{random.randint(10**8, 10**9 - 1)}"


def host_processes_with(text: str) -> list[str]:
    """Live processes on this kernel whose command line contains `text` (docker's too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or entry.name == str(os.getpid()):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state not in ("Z", "X"):
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


def make_config(**kw) -> AgentConfig:
    return AgentConfig(token="pul-test-not-a-secret", **kw)


@dataclass
class Result:
    outcomes: list[StepOutcome] = field(default_factory=list)
    lines: list[list[str]] = field(default_factory=list)


def run_steps(target: Target, job: JobSpec, cancel: threading.Event | None = None) -> Result:
    """What the agent does with a prepared job: run steps in order, stop at the first failure."""
    res = Result()
    for step in job.steps:
        lines: list[str] = []
        out = target.run_step(job, step, lines.append, cancel or threading.Event())
        res.outcomes.append(out)
        res.lines.append(lines)
        if not out.succeeded:
            break
    return res


class Harness:
    kind = ""
    # Variables a step may see besides JobSpec.env: the shell's own, the target's defaults.
    # PULUMI_ENV: the job runtime's file (docs/protocol.md, "Job runtime"), in every target.
    allowed_extra_env = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PULUMI_ENV"})

    def __init__(self, tmp_path: Path) -> None:
        self.base = tmp_path / "shared"
        self.instance = f"wfa-targets-test-{uuid.uuid4().hex[:8]}"
        self.made: list[tuple[Target, JobSpec]] = []

    def config(self, **kw) -> AgentConfig:
        return make_config(deploy_target=self.kind, shared_volume_directory=str(self.base), **kw)

    def target(self, instance: str | None = None, **kw) -> Target:
        raise NotImplementedError

    def job(self, *scripts: str, env: dict | None = None, timeout: float | None = None, **kw):
        job_id = kw.pop("job_id", f"job-{uuid.uuid4().hex[:10]}")
        steps = tuple(
            Step(index=i, name=f"step{i}", run=s, timeout=timeout)
            for i, s in enumerate(scripts, start=1)
        )
        return JobSpec(
            job_id=job_id,
            run_id=kw.pop("run_id", "run-1"),
            image=kw.pop("image", JOB_IMAGE),
            env=dict(env or {}),
            steps=steps,
            labels={LABEL_JOB: job_id, LABEL_RUN: "run-1", LABEL_INSTANCE: self.instance},
            **kw,
        )

    def leftovers(self, job: JobSpec) -> list[str]:
        """Everything the target made for `job` that still exists."""
        return [
            str(jd.root)
            for jd in _jobdir.find(self.base, self.instance)
            if jd.owner().get("job_id") == job.job_id
        ]

    def running(self, text: str, job: JobSpec) -> list[str]:
        return host_processes_with(text)

    def extra_env_ok(self, name: str) -> bool:
        return name in self.allowed_extra_env

    def inspect(self, job: JobSpec) -> str:
        """What the backend shows anyone who may look at the job (the container's config, the
        pod spec); "" for the process target, which has no such thing."""
        return ""

    def teardown(self) -> None:
        pass


class ProcessHarness(Harness):
    kind = "process"
    allowed_extra_env = Harness.allowed_extra_env | {"HOME", "PATH"}

    def target(self, instance: str | None = None, **kw) -> Target:
        from workflow_agent.targets.process import ProcessTarget

        kw.setdefault("grace", 5.0)
        return ProcessTarget(self.config(), instance or self.instance, **kw)


def docker_available() -> str | None:
    """None when the engine answers, else why not."""
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (pip install -e 'agent[docker]')"
    try:
        import workflow_agent.targets.docker  # noqa: F401
    except ImportError as exc:
        return f"the docker target is not importable: {exc}"
    try:
        client = docker.from_env(timeout=20)
        client.ping()
    except Exception as exc:  # any failure to talk to the engine means: skip
        return f"no Docker engine reachable ({exc.__class__.__name__}: {exc})"
    try:
        client.images.get(JOB_IMAGE)
    except docker.errors.ImageNotFound:
        # Same thing `make images` does; cached by a content hash, so cheap when built.
        proc = subprocess.run(
            ["bash", str(REPO / "scripts/build-job-image.sh")],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            return f"cannot build {JOB_IMAGE}: {proc.stderr.strip()[-300:]}"
    return None


class DockerHarness(Harness):
    kind = "docker"
    # Docker sets HOSTNAME and HOME; PATH comes from the image.
    allowed_extra_env = Harness.allowed_extra_env | {"HOME", "PATH", "HOSTNAME"}

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        import docker

        self.client = docker.from_env(timeout=60)

    def target(self, instance: str | None = None, **kw) -> Target:
        from workflow_agent.targets.docker import DockerTarget

        kw.setdefault("grace", 5.0)
        cfg = self.config(pull_image=kw.pop("pull_image", False), **kw.pop("cfg", {}))
        return DockerTarget(cfg, instance or self.instance, **kw)

    def containers(self, job: JobSpec | None = None, instance: str | None = None) -> list:
        filters = [f"{LABEL_INSTANCE}={instance or self.instance}"]
        if job is not None:
            filters.append(f"{LABEL_JOB}={job.job_id}")
        return self.client.containers.list(all=True, filters={"label": filters})

    def leftovers(self, job: JobSpec) -> list[str]:
        return super().leftovers(job) + [f"container {c.name}" for c in self.containers(job)]

    def inspect(self, job: JobSpec) -> str:
        return json.dumps([c.attrs for c in self.containers(job)])

    def teardown(self) -> None:
        for c in self.containers():
            c.remove(force=True)
        if self.base.exists():
            shutil.rmtree(self.base, ignore_errors=True)


K8S_STABLE_KUBECONFIG = "/var/tmp/workflow-agent-k8s/kubeconfig"  # what `make k8s-up` writes


def kubeconfig_path() -> str | None:
    for path in (os.environ.get("KUBECONFIG"), K8S_STABLE_KUBECONFIG, "~/.kube/config"):
        if path and Path(path).expanduser().is_file():
            return str(Path(path).expanduser())
    return None


def kubernetes_available() -> str | None:
    """None when a cluster with a Ready node answers, else why not."""
    try:
        from kubernetes import client, config
    except ImportError:
        return "the kubernetes client is not installed (pip install -e 'agent[kubernetes]')"
    path = kubeconfig_path()
    if path is None:
        return (
            "no Kubernetes cluster: KUBECONFIG is unset and neither "
            f"{K8S_STABLE_KUBECONFIG} (make k8s-up) nor ~/.kube/config exists"
        )
    try:
        api = client.CoreV1Api(config.new_client_from_config(config_file=path))
        nodes = api.list_node(_request_timeout=20).items
    except Exception as exc:  # any failure to talk to the cluster means: skip
        return f"the cluster of {path} does not answer ({exc.__class__.__name__}: {exc})"
    ready = [
        n.metadata.name
        for n in nodes
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    ]
    if not ready:
        return f"the cluster of {path} has no Ready node"
    return None


class KubernetesHarness(Harness):
    kind = "kubernetes"
    # HOME from the pod spec, PATH from the image, HOSTNAME and KUBERNETES_* from the kubelet.
    allowed_extra_env = Harness.allowed_extra_env | {"HOME", "PATH", "HOSTNAME"}

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        from kubernetes import client, config

        path = kubeconfig_path()
        self.api_client = config.new_client_from_config(config_file=path)
        _, active = config.list_kube_config_contexts(config_file=path)
        self.namespace = (active or {}).get("context", {}).get("namespace") or "default"
        self.api = client.CoreV1Api(self.api_client)

    def extra_env_ok(self, name: str) -> bool:
        return super().extra_env_ok(name) or name.startswith("KUBERNETES_")

    def target(self, instance: str | None = None, **kw) -> Target:
        from workflow_agent.targets.kubernetes import KubernetesTarget

        kw.setdefault("grace", 5.0)
        kw.setdefault("start_timeout", 180.0)
        cfg = self.config(pull_image=kw.pop("pull_image", False), **kw.pop("cfg", {}))
        return KubernetesTarget(
            cfg,
            instance or self.instance,
            namespace=self.namespace,
            env=kw.pop("env", {}),
            api_client=self.api_client,
            **kw,
        )

    def pods(self, job: JobSpec | None = None, instance: str | None = None) -> list:
        from workflow_agent.targets._k8spod import label_value

        selector = f"{LABEL_INSTANCE}={label_value(instance or self.instance)}"
        if job is not None:
            selector += f",{LABEL_JOB}={label_value(job.job_id)}"
        return self.api.list_namespaced_pod(self.namespace, label_selector=selector).items

    def leftovers(self, job: JobSpec) -> list[str]:
        return [f"pod {p.metadata.name}" for p in self.pods(job)]

    def inspect(self, job: JobSpec) -> str:
        return json.dumps([self.api_client.sanitize_for_serialization(p) for p in self.pods(job)])

    def running(self, text: str, job: JobSpec) -> list[str]:
        from kubernetes.stream import stream

        found = []
        for pod in self.pods(job):
            out = stream(
                self.api.connect_get_namespaced_pod_exec,
                pod.metadata.name,
                self.namespace,
                container="pulumi-workflow",
                command=[
                    "/bin/sh",
                    "-c",
                    'for p in /proc/[0-9]*; do tr "\\0" " " <$p/cmdline; echo; done',
                ],
                stdin=False,
                stdout=True,
                stderr=False,
                tty=False,
            )
            found += [line for line in out.splitlines() if text in line and "/proc/" not in line]
        return found

    def teardown(self) -> None:
        for pod in self.pods():
            self.api.delete_namespaced_pod(
                pod.metadata.name, self.namespace, grace_period_seconds=0
            )
