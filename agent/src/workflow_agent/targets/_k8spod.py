"""The worker pod of the kubernetes target: settings from the environment, the rendered Pod.

Pure functions (no Kubernetes client), unit-tested without a cluster.

Settings (environment of the agent, upstream names):
    PULUMI_AGENT_SERVICE_ACCOUNT_NAME   worker pods' service account (default: the namespace's)
    PULUMI_AGENT_NUM_CPUS               CPU request of the job container, e.g. 2 or 500m
    PULUMI_AGENT_MEM_QUANTITY           memory request, e.g. 4, 4Gi or 4000000000
                                        (bare numbers: see `requests_from_env`)
    WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY  (extension) the job image's Always | IfNotPresent |
                                        Never (default: Always when pull_image is true, Never
                                        when false). Upstream's PULUMI_AGENT_IMAGE_PULL_POLICY is
                                        its agent image's, which this target does not use.
    PULUMI_AGENT_DEBUG_POD              true: keep the pod after the job
    WORKFLOW_AGENT_WORKER_POD_PATCH     (extension) path of the strategic merge patch applied to
                                        every worker pod; default /mnt/worker-pod.json, which
                                        may be absent
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from workflow_agent.targets import strategic_merge
from workflow_agent.targets.base import (
    LABEL_INSTANCE,
    LABEL_JOB,
    LABEL_RUN,
    OIDC_TOKEN_DIR,
    JobSpec,
    TargetError,
)

CONTAINER = "pulumi-workflow"
OIDC_VOLUME = "pulumi-oidc"
NAME_PREFIX = "pulumi-workflow-runner-"
WORKDIR = "/mnt/workflow"  # the per-job volume
STEP_DIR = "/"  # where steps run [RE: upstream's runner]
VOLUME = "workflow"
COMPONENT = {"app.kubernetes.io/component": "pulumi-workflow"}
RUNNER_NAME = {"app.kubernetes.io/name": "workflow-runner"}
DEFAULT_PATCH_PATH = "/mnt/worker-pod.json"
PATCH_PATH_VAR = "WORKFLOW_AGENT_WORKER_POD_PATCH"
KEEPALIVE = 'trap "exit 0" TERM; while :; do sleep 3600 & wait; done'
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PULL_POLICY_VAR = "WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY"
# The uid/gid of the `restricted` defaults (upstream's non-root recipe uses 1000 too).
DEFAULT_UID = 1000

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[0-9]+)?$")
_BARE = re.compile(r"^[0-9]+(\.[0-9]+)?$")
# Where a bare number stops counting whole units (CPUs, GiB) and starts counting the smallest
# ones (millicores, bytes). Upstream's two published examples need both readings: its Fargate
# notes say "agentMemQuantity: quantity of memory in Gigabytes (i.e. 4 = 4Gi)" and CPUs as a
# count; its Helm draft passes numberCPUs: 1000 and memoryQuantity: 4000000000. No job asks for
# 1000 CPUs or 1000 GiB, and none fits in 1000 millicores' worth of bytes.
BARE_LIMIT = 1000
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False", "")


@dataclass(frozen=True)
class Settings:
    service_account: str = ""
    cpus: str = ""
    memory: str = ""
    pull_policy: str = ""
    debug_pod: bool = False
    patch: dict = field(default_factory=dict)
    patch_source: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read and check the settings; TargetError names the variable or file at fault."""
        sa = env.get("PULUMI_AGENT_SERVICE_ACCOUNT_NAME", "").strip()
        cpus, mem = requests_from_env(env)
        policy = env.get(PULL_POLICY_VAR, "").strip()
        if policy and policy not in PULL_POLICIES:
            raise TargetError(
                f"{PULL_POLICY_VAR}: {policy!r} is not one of {', '.join(PULL_POLICIES)}"
            )
        debug = env.get("PULUMI_AGENT_DEBUG_POD", "").strip()
        if debug not in _TRUE + _FALSE:
            raise TargetError(f"PULUMI_AGENT_DEBUG_POD: {debug!r} is not a boolean (true/false)")
        path = env.get(PATCH_PATH_VAR, "").strip()
        patch, source = load_patch(path or DEFAULT_PATCH_PATH, required=bool(path))
        return cls(sa, cpus, mem, policy, debug in _TRUE, patch, source)


def requests_from_env(env: Mapping[str, str]) -> tuple[str, str]:
    """The CPU and memory requests (Kubernetes quantities, "" when unset) from
    PULUMI_AGENT_NUM_CPUS and PULUMI_AGENT_MEM_QUANTITY.

    One rule for both: a value with a unit (500m, 2, 4Gi, 4G) is a Kubernetes quantity and used
    as it is, except that a bare number below BARE_LIMIT counts whole units (CPUs; GiB for
    memory: "4" is 4Gi, as upstream's Fargate notes say) and a bare number from BARE_LIMIT on
    counts the smallest ones (millicores; bytes for memory: upstream's Helm draft's 1000 is
    1 CPU, its 4000000000 is 4 GB).
    """
    out = []
    for var, small_unit, large_unit in (
        ("PULUMI_AGENT_NUM_CPUS", "", "m"),
        ("PULUMI_AGENT_MEM_QUANTITY", "Gi", ""),
    ):
        value = env.get(var, "").strip()
        if value and not _QUANTITY.match(value):
            raise TargetError(
                f"{var}: {value!r} is not a Kubernetes quantity (examples: 2, 500m, 4Gi)"
            )
        if _BARE.match(value):
            if float(value) < BARE_LIMIT:
                value += small_unit
            elif "." in value:
                raise TargetError(f"{var}: {value!r}: a count of millicores or bytes is whole")
            else:
                value += large_unit
        out.append(value)
    return out[0], out[1]


def load_patch(path: str, *, required: bool) -> tuple[dict, str]:
    """The worker pod patch at `path` ({} when absent and not required)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise TargetError(f"{PATCH_PATH_VAR}: {path}: no such file") from None
        return {}, ""
    except IsADirectoryError:
        # Upstream's install mounts the ConfigMap key worker-pod.json with subPath; without a pod
        # template the key is absent and the kubelet mounts an empty directory there instead.
        if required:
            raise TargetError(f"{PATCH_PATH_VAR}: {path}: is a directory, not a file") from None
        return {}, ""
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetError(f"{path}: cannot read the worker pod patch: {exc}") from None
    if not text.strip():
        return {}, path
    try:
        patch = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TargetError(
            f"{path}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    if not isinstance(patch, dict):
        raise TargetError(f"{path}: the worker pod patch must be a JSON object (a Pod)")
    extra = sorted(set(patch) - {"apiVersion", "kind", "metadata", "spec"})
    if extra:
        raise TargetError(
            f"{path}: {extra[0]!r} is not a Pod field; the patch is a Pod: put pod spec fields "
            'under "spec" and labels under "metadata"'
        )
    # Surface a broken patch at agent start, not at the first job.
    sample = JobSpec(job_id="sample", run_id="sample", image="sample")
    render_pod(
        sample, "sample", Settings(patch=patch, patch_source=path), pull_image=True, grace=30
    )
    return patch, path


def label_value(text: str) -> str:
    """`text` as a valid label value (<= 63 chars, alphanumeric ends); a hash keeps it unique."""
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    clean = re.sub(r"[^-A-Za-z0-9_.]+", "-", text)[:54].strip("-_.")
    return f"{clean}-{digest}" if clean else digest


def pod_name(job_id: str) -> str:
    """`pulumi-workflow-runner-<id>`: a DNS label (<= 63 chars) derived from the job id."""
    room = 63 - len(NAME_PREFIX)
    clean = re.sub(r"[^a-z0-9]+", "-", job_id.lower()).strip("-")
    if clean and clean == job_id and len(clean) <= room:
        return NAME_PREFIX + clean
    digest = hashlib.sha256(job_id.encode()).hexdigest()[:8]
    clean = clean[: room - 9].strip("-")
    return f"{NAME_PREFIX}{clean}-{digest}" if clean else f"{NAME_PREFIX}{digest}"


def selector(instance: str) -> str:
    """Label selector of every worker pod an agent instance made."""
    return f"{LABEL_INSTANCE}={label_value(instance)},app.kubernetes.io/component=pulumi-workflow"


def render_pod(
    job: JobSpec,
    instance: str,
    settings: Settings,
    *,
    pull_image: bool,
    grace: float,
    profile: str = "image",
) -> dict:
    """The worker Pod for `job`, with the worker pod patch applied. `profile`: "image" runs the
    image's own user (root in pulumi/pulumi, as upstream); "restricted" meets the `restricted`
    Pod Security level (uid/gid 1000, no capabilities, no privilege escalation).

    The job's environment is deliberately absent: it is handed to each step over the exec's
    stdin, so secrets never sit in the pod spec (readable by anyone who may get pods).
    """
    name = pod_name(job.job_id)
    ours = {
        **COMPONENT,
        **RUNNER_NAME,
        LABEL_JOB: label_value(job.job_id),
        LABEL_RUN: label_value(job.run_id),
        LABEL_INSTANCE: label_value(instance),
    }
    labels = {k: label_value(v) for k, v in job.labels.items() if k not in ours}
    labels.update(ours)
    container: dict = {
        "name": CONTAINER,
        "image": job.image,
        "imagePullPolicy": settings.pull_policy or ("Always" if pull_image else "Never"),
        "command": ["/bin/sh", "-c", KEEPALIVE],
        "workingDir": STEP_DIR,
        "volumeMounts": [{"name": VOLUME, "mountPath": WORKDIR}],
    }
    restricted = profile == "restricted"
    if restricted:
        # A uid without a passwd entry gets HOME=/, which it cannot write.
        container["env"] = [{"name": "HOME", "value": WORKDIR}]
        container["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
        }
    requests = {}
    if settings.cpus:
        requests["cpu"] = settings.cpus
    if settings.memory:
        requests["memory"] = settings.memory
    if requests:
        container["resources"] = {"requests": requests}
    spec: dict = {
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": max(1, int(round(grace))),
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": VOLUME, "emptyDir": {}}],
    }
    if restricted:
        spec["securityContext"].update(
            runAsNonRoot=True, runAsUser=DEFAULT_UID, runAsGroup=DEFAULT_UID, fsGroup=DEFAULT_UID
        )
    if job.oidc_token:  # written by the target over an exec; in memory, never in the spec
        container["volumeMounts"].append({"name": OIDC_VOLUME, "mountPath": OIDC_TOKEN_DIR})
        spec["volumes"].append({"name": OIDC_VOLUME, "emptyDir": {"medium": "Memory"}})
    if settings.service_account:
        spec["serviceAccountName"] = settings.service_account
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels,
            # The exact ids, which labels may have had to shorten.
            "annotations": {LABEL_JOB: job.job_id, LABEL_RUN: job.run_id, LABEL_INSTANCE: instance},
        },
        "spec": spec,
    }
    try:
        pod = strategic_merge.merge(pod, settings.patch)
    except strategic_merge.PatchError as exc:
        raise TargetError(f"{settings.patch_source}: {exc}") from None
    # What the agent relies on wins over the patch: the name, its labels, and the keepalive.
    meta = pod.setdefault("metadata", {})
    meta["name"] = name
    meta.setdefault("labels", {}).update(ours)
    meta.pop("namespace", None)
    containers = pod.get("spec", {}).get("containers") or []
    main = next((c for c in containers if c.get("name") == CONTAINER), None)
    if main is None:
        raise TargetError(f"{settings.patch_source}: the patch removes the {CONTAINER} container")
    main["command"] = ["/bin/sh", "-c", KEEPALIVE]
    main.pop("args", None)
    main["image"] = job.image
    return pod
