"""Shared by the chart tests (and the Kubernetes tests that use Helm or the suite's registry):
the Helm CLI, the registry's references, the golden cases' values, and the `restricted` Pod
Security Standard as a check of pod specs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def helm_path() -> str:
    """The pinned Helm CLI (scripts/build-go-tool.sh helm: v3.22.0 from its Go module, built
    once and cached); fails the test, never skips, when it cannot be built."""
    build = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-go-tool.sh"), "helm"],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
        cwd=REPO,
    )
    path = build.stdout.strip().splitlines()[-1] if build.stdout.strip() else ""
    if build.returncode != 0 or not os.access(path, os.X_OK):
        pytest.fail(
            "cannot build the Helm CLI with scripts/build-go-tool.sh helm "
            f"(exit {build.returncode}):\n{build.stderr[-3000:]}",
            pytrace=False,
        )
    return path


REGISTRY_REFS = ("WFA_AGENT_IMAGE", "WFA_JOB_IMAGE", "WFA_CHART", "WFA_CHART_VERSION")


def registry_refs() -> dict[str, str]:
    """What scripts/push-images.sh put into the suite's registry (the k8s stage has run it and
    exported them; else it runs here, a second or so when the registry has them)."""
    if all(os.environ.get(name) for name in REGISTRY_REFS):
        return {name: os.environ[name] for name in REGISTRY_REFS}
    proc = subprocess.run(
        ["bash", "scripts/push-images.sh"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/push-images.sh failed: {proc.stderr[-2000:]}", pytrace=False)
    return dict(line.split("=", 1) for line in proc.stdout.split() if "=" in line)


CHART = REPO / "charts" / "workflow-agent"
TOKEN = "pul-" + "5a" * 20
PROXY_PASSWORD = "s3cret-proxy-pw"  # noqa: S105 - a test value, checked to appear nowhere
PROXY = f"http://agent:{PROXY_PASSWORD}@proxy.example:3128"
CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"

# The golden cases: values on top of these (a user's minimum: an image and a token).
BASE = {"image": {"repository": "registry.example.com/team/workflow-agent"}, "token": TOKEN}
KEDA_TRIGGER = {
    "type": "prometheus",
    "metadata": {
        "serverAddress": "http://prometheus.monitoring:9090",
        "threshold": "1",
        "query": "sum(workflow_agent_busy_slots)",
    },
}
CASES = {
    "defaults": BASE,
    "existing-secret": {
        "image": BASE["image"],
        "existingSecret": "my-token",
        "drainTimeout": "1h",
        "pdb": {"maxUnavailable": None},
        "replicas": 3,
    },
    "proxy-secret": {
        **BASE,
        "proxy": {"existingSecret": "corp-proxy", "noProxy": "example.com"},
        "caBundle": CA,
    },
    "hpa": {**BASE, "replicas": 2, "autoscaling": {"mode": "hpa", "maxReplicas": 5}},
    "keda": {
        **BASE,
        "slots": 2,
        "autoscaling": {
            "mode": "keda",
            "minReplicas": 0,
            "maxReplicas": 8,
            "kedaTriggers": [KEDA_TRIGGER],
        },
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "prometheusPodAnnotations": True,
    },
    # Everything a hardened namespace sees: pods without fixed ids (OpenShift assigns them),
    # the NetworkPolicy, and a config of its own. The pods must meet `restricted` in every case.
    "restricted": {
        **BASE,
        "podIds": False,
        "networkPolicy": {"enabled": True},
        "config": {"job_security_profile": "restricted", "polling_interval": "5s"},
        "proxy": {"https": PROXY, "noProxy": "example.com"},
        "env": {"EXTRA": 1},
        "worker": {
            "pod": {"spec": {"nodeSelector": {"pool": "jobs"}}},
            "cpu": "500m",
            "memory": "1Gi",
            "serviceAccountAnnotations": {
                "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/jobs"
            },
            "imagePullSecrets": ["jobs-registry"],
        },
    },
}


@dataclass
class Rendered:
    rc: int
    stdout: str
    stderr: str

    @property
    def docs(self) -> list[dict]:
        return [d for d in yaml.safe_load_all(self.stdout) if d]


class Helm:
    def __init__(self, path: str) -> None:
        self.path = path

    def run(self, *args: str, timeout: float = 600, env: dict | None = None) -> Rendered:
        proc = subprocess.run(
            [self.path, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **(env or {})},
        )
        return Rendered(proc.returncode, proc.stdout, proc.stderr)

    def template(
        self, values: dict, tmp: Path, name: str = "workflow-agent", namespace: str = "agents"
    ) -> Rendered:
        """`helm template` with the values in a 0600 file (a token never goes in argv)."""
        path = write_values(tmp, values)
        return self.run("template", name, str(CHART), "--namespace", namespace, "-f", str(path))


def env_of(deployment: dict) -> dict:
    """The agent container's env by name (each name once), value or valueFrom."""
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert len(names) == len(set(names)), names
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in env}


def agent_check(config_text: str, path: Path, token: str = TOKEN) -> dict:
    """`workflow-agent check --format json` of an agent config as a pod gets it (the token from
    the environment): the agent's own verdict on what the chart writes."""
    path.write_text(config_text)
    script = Path(sys.executable).parent / "workflow-agent"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "workflow_agent"]
    proc = subprocess.run(
        [*cmd, "check", "--config", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PULUMI_AGENT_TOKEN": token},
    )
    assert proc.returncode == 0, f"{path.name}: {proc.stderr}"
    return json.loads(proc.stdout)


def write_values(tmp: Path, values: dict) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="values-", suffix=".yaml", dir=tmp)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(values, f)
    return Path(name)


def find(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    [doc] = [d for d in find(docs, kind) if name in (None, d["metadata"]["name"])]
    return doc


def pod_specs(docs: list[dict]) -> dict[str, dict]:
    """Every pod spec the manifests make: the Deployment's template and the helm test Pod."""
    specs = {}
    for doc in docs:
        if doc["kind"] == "Pod":
            specs[f"Pod/{doc['metadata']['name']}"] = doc["spec"]
        elif doc["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            specs[f"{doc['kind']}/{doc['metadata']['name']}"] = doc["spec"]["template"]["spec"]
    return specs


# The `restricted` Pod Security Standard (kubernetes.io/docs/concepts/security/
# pod-security-standards), as of policy version v1.25+: what the pods must meet.
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip


def restricted_violations(spec: dict) -> list[str]:
    """What in a pod spec the `restricted` level forbids (empty: admissible)."""
    out = []
    pod_ctx = spec.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(f"{key} is set")
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {volume['name']} is {sorted(kinds)}")
    pod_seccomp = (pod_ctx.get("seccompProfile") or {}).get("type") in (
        "RuntimeDefault",
        "Localhost",
    )
    if pod_ctx.get("runAsUser") == 0:
        out.append("pod runAsUser is 0")
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        ctx = c.get("securityContext") or {}
        name = c["name"]
        if ctx.get("privileged"):
            out.append(f"{name}: privileged")
        if ctx.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds capabilities {caps['add']}")
        if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is not True:
            out.append(f"{name}: runAsNonRoot is not true")
        if ctx.get("runAsUser") == 0:
            out.append(f"{name}: runAsUser is 0")
        seccomp = (ctx.get("seccompProfile") or {}).get("type")
        if not (seccomp in ("RuntimeDefault", "Localhost") or (seccomp is None and pod_seccomp)):
            out.append(f"{name}: no seccompProfile RuntimeDefault (pod or container)")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                out.append(f"{name}: hostPort {port['hostPort']}")
    return out
