"""Worker pod rendering and settings of the kubernetes target: pure functions, no cluster.

The rendered pods are validated against the Kubernetes schema (kubernetes-validate, strict).
"""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest
from kubernetes import client
from workflow_agent.targets import _k8spod
from workflow_agent.targets._k8spod import (
    Settings,
    label_value,
    load_patch,
    pod_name,
    render_pod,
    selector,
)
from workflow_agent.targets.base import LABEL_INSTANCE, LABEL_JOB, LABEL_RUN, JobSpec, TargetError
from workflow_agent.targets.kubernetes import start_verdict

SECRET = "s3cr3t-value-never-in-the-pod-spec"
JOB = JobSpec(
    job_id="5f1c2a8e-0d3b-4c1e-9a77-1b2c3d4e5f60",
    run_id="run-42",
    image="local/workflow-job:latest",
    env={"PULUMI_ACCESS_TOKEN": SECRET, "PLAIN": "v"},
    labels={LABEL_JOB: "x", "team": "infra"},
)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def render(settings: Settings | None = None, job: JobSpec = JOB, **kw) -> dict:
    kw.setdefault("pull_image", True)
    kw.setdefault("grace", 30)
    return render_pod(job, "host-a-agent-1", settings or Settings(), **kw)


def validate(pod: dict) -> None:
    kubernetes_validate.validate(pod, "1.30", strict=True)


def test_default_pod_shape():
    pod = render()
    validate(pod)
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "pulumi-workflow-runner-5f1c2a8e-0d3b-4c1e-9a77-1b2c3d4e5f60"
    assert meta["labels"] == {
        "app.kubernetes.io/component": "pulumi-workflow",
        "app.kubernetes.io/name": "workflow-runner",
        LABEL_JOB: JOB.job_id,
        LABEL_RUN: "run-42",
        LABEL_INSTANCE: "host-a-agent-1",
        "team": "infra",
    }
    assert meta["annotations"][LABEL_JOB] == JOB.job_id
    [c] = spec["containers"]
    assert c["name"] == "pulumi-workflow"
    assert c["image"] == JOB.image
    assert c["command"] == ["/bin/sh", "-c", _k8spod.KEEPALIVE]
    assert c["imagePullPolicy"] == "Always"
    assert c["workingDir"] == "/"  # as upstream's runner [RE]
    assert c["volumeMounts"] == [{"name": "workflow", "mountPath": "/mnt/workflow"}]
    # The image's own user (root in pulumi/pulumi), as upstream: nothing forced.
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert "securityContext" not in c and "env" not in c
    assert spec["volumes"] == [{"name": "workflow", "emptyDir": {}}]
    assert spec["restartPolicy"] == "Never"
    assert spec["enableServiceLinks"] is False
    assert spec["terminationGracePeriodSeconds"] == 30
    assert "serviceAccountName" not in spec and "resources" not in c


def test_job_env_and_secrets_stay_out_of_the_pod_spec():
    text = json.dumps(render())
    assert SECRET not in text and "PULUMI_ACCESS_TOKEN" not in text
    restricted = render(profile="restricted")
    assert SECRET not in json.dumps(restricted)
    assert restricted["spec"]["containers"][0]["env"] == [
        {"name": "HOME", "value": "/mnt/workflow"}
    ]


def test_restricted_profile_meets_the_restricted_pod_security_standard():
    """The fields the `restricted` Pod Security Standard checks, set by job_security_profile:
    restricted."""
    pod = render(profile="restricted")
    validate(pod)
    spec = pod["spec"]
    psc = spec["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 1000
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in spec["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert "add" not in sc["capabilities"]
    assert not any(k in spec for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert all("hostPath" not in v for v in spec["volumes"])


def test_settings_from_the_environment():
    s = Settings.from_env(
        {
            "PULUMI_AGENT_SERVICE_ACCOUNT_NAME": "worker",
            "PULUMI_AGENT_NUM_CPUS": "2",
            "PULUMI_AGENT_MEM_QUANTITY": "4Gi",
            "WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY": "IfNotPresent",
            # Upstream's is its agent image's (PULUMI_AGENT_IMAGE), not the job image's.
            "PULUMI_AGENT_IMAGE_PULL_POLICY": "Never",
            "PULUMI_AGENT_DEBUG_POD": "true",
            _k8spod.PATCH_PATH_VAR: "",
        }
    )
    assert (s.service_account, s.cpus, s.memory, s.pull_policy, s.debug_pod) == (
        "worker",
        "2",
        "4Gi",
        "IfNotPresent",
        True,
    )
    pod = render(s)
    validate(pod)
    assert pod["spec"]["serviceAccountName"] == "worker"
    c = pod["spec"]["containers"][0]
    assert c["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"}}
    assert c["imagePullPolicy"] == "IfNotPresent"


def test_the_oidc_token_gets_an_in_memory_volume_and_stays_out_of_the_spec():
    token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJqb2IifQ.c2lnbmF0dXJl"
    pod = render(job=JobSpec(job_id="j1", run_id="r1", image="i", oidc_token=token))
    validate(pod)
    [container] = pod["spec"]["containers"]
    assert {"name": "pulumi-oidc", "mountPath": "/mnt/pulumi"} in container["volumeMounts"]
    assert {"name": "pulumi-oidc", "emptyDir": {"medium": "Memory"}} in pod["spec"]["volumes"]
    assert token not in json.dumps(pod)
    assert "pulumi-oidc" not in json.dumps(render())  # no token, no volume


def test_pull_policy_follows_pull_image_when_unset():
    assert render(pull_image=True)["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert render(pull_image=False)["spec"]["containers"][0]["imagePullPolicy"] == "Never"


@pytest.mark.parametrize(
    ("cpus", "memory", "requests"),
    [
        # Upstream's Fargate notes: a count of CPUs, memory "in Gigabytes (i.e. 4 = 4Gi)".
        ("4", "4", {"cpu": "4", "memory": "4Gi"}),
        ("0.5", "1.5", {"cpu": "0.5", "memory": "1.5Gi"}),
        # Upstream's Helm draft: numberCPUs: 1000, memoryQuantity: 4000000000 (bytes).
        ("1000", "4000000000", {"cpu": "1000m", "memory": "4000000000"}),
        ("999", "999", {"cpu": "999", "memory": "999Gi"}),  # the edge: below 1000, whole units
        # A unit says it all: a Kubernetes quantity, used as it is.
        ("500m", "512Mi", {"cpu": "500m", "memory": "512Mi"}),
        ("2", "4G", {"cpu": "2", "memory": "4G"}),
    ],
)
def test_cpu_and_memory_read_both_upstream_examples(cpus, memory, requests):
    env = {"PULUMI_AGENT_NUM_CPUS": cpus, "PULUMI_AGENT_MEM_QUANTITY": memory}
    pod = render(Settings.from_env({**env, _k8spod.PATCH_PATH_VAR: ""}))
    validate(pod)
    assert pod["spec"]["containers"][0]["resources"] == {"requests": requests}


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        (
            "PULUMI_AGENT_MEM_QUANTITY",
            "4000000000.5",
            "PULUMI_AGENT_MEM_QUANTITY: '4000000000.5': a count of millicores or bytes is whole",
        ),
        (
            "PULUMI_AGENT_NUM_CPUS",
            "two",
            "PULUMI_AGENT_NUM_CPUS: 'two' is not a Kubernetes quantity",
        ),
        (
            "PULUMI_AGENT_MEM_QUANTITY",
            "4GB",
            "PULUMI_AGENT_MEM_QUANTITY: '4GB' is not a Kubernetes",
        ),
        (
            "WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY",
            "always",
            "WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY: 'always' is",
        ),
        ("PULUMI_AGENT_DEBUG_POD", "yes", "PULUMI_AGENT_DEBUG_POD: 'yes' is not a boolean"),
    ],
)
def test_bad_settings_name_the_variable(var, value, message):
    with pytest.raises(TargetError) as err:
        Settings.from_env({var: value})
    assert str(err.value).startswith(message)


def test_patch_file_applied_as_strategic_merge(tmp_path):
    patch = {
        "metadata": {"labels": {"cost-center": "42"}, "annotations": {"a": "b"}},
        "spec": {
            "nodeSelector": {"pool": "workers"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "securityContext": {"runAsUser": 2000, "fsGroup": None},
            "containers": [
                {
                    "name": "pulumi-workflow",
                    "resources": {"limits": {"memory": "2Gi"}},
                    "env": [{"name": "EXTRA", "value": "1"}],
                    "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                },
                {"name": "sidecar", "image": "side:1"},
            ],
            "volumes": [{"name": "cache", "emptyDir": {}}],
        },
    }
    path = tmp_path / "worker-pod.json"
    path.write_text(json.dumps(patch))
    s = Settings.from_env({_k8spod.PATCH_PATH_VAR: str(path)})
    assert s.patch_source == str(path)
    pod = render(s, profile="restricted")
    validate(pod)
    spec = pod["spec"]
    assert pod["metadata"]["labels"]["cost-center"] == "42"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "pulumi-workflow"
    assert spec["nodeSelector"] == {"pool": "workers"}
    assert spec["securityContext"]["runAsUser"] == 2000
    assert "fsGroup" not in spec["securityContext"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    main, side = spec["containers"]
    assert (main["name"], side["name"]) == ("pulumi-workflow", "sidecar")
    assert main["resources"] == {"limits": {"memory": "2Gi"}}
    # kubectl's order: items new in the patch first (test_strategic_merge checks it with kubectl).
    assert [e["name"] for e in main["env"]] == ["EXTRA", "HOME"]
    assert [m["mountPath"] for m in main["volumeMounts"]] == ["/cache", "/mnt/workflow"]
    assert [v["name"] for v in spec["volumes"]] == ["cache", "workflow"]


def test_patch_cannot_take_away_what_the_agent_relies_on(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(
        json.dumps(
            {
                "metadata": {"name": "other", "namespace": "elsewhere", "labels": {LABEL_JOB: "x"}},
                "spec": {"containers": [{"name": "pulumi-workflow", "command": ["sleep", "1"]}]},
            }
        )
    )
    pod = render(Settings.from_env({_k8spod.PATCH_PATH_VAR: str(path)}))
    assert pod["metadata"]["name"].startswith("pulumi-workflow-runner-")
    assert "namespace" not in pod["metadata"]
    assert pod["metadata"]["labels"][LABEL_JOB] == JOB.job_id
    assert pod["spec"]["containers"][0]["command"][:2] == ["/bin/sh", "-c"]


def test_patch_may_drop_the_restricted_defaults(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"spec": {"securityContext": {"$patch": "replace"}}}))
    pod = render(Settings.from_env({_k8spod.PATCH_PATH_VAR: str(path)}))
    assert pod["spec"]["securityContext"] == {}


def test_absent_default_patch_file_is_fine_but_an_explicit_one_must_exist(tmp_path):
    assert load_patch(str(tmp_path / "absent.json"), required=False) == ({}, "")
    with pytest.raises(TargetError, match="WORKFLOW_AGENT_WORKER_POD_PATCH: .*: no such file"):
        Settings.from_env({_k8spod.PATCH_PATH_VAR: str(tmp_path / "absent.json")})


def test_a_directory_at_the_default_patch_path_is_no_patch(tmp_path):
    """Upstream's install (kubernetes/agent.ts) mounts ConfigMap key worker-pod.json with subPath
    even when it passes no pod template; the key is then absent and the kubelet mounts an empty
    directory at /mnt/worker-pod.json. An explicitly named path must still be a file."""
    directory = tmp_path / "worker-pod.json"
    directory.mkdir()
    assert load_patch(str(directory), required=False) == ({}, "")
    with pytest.raises(TargetError, match="WORKFLOW_AGENT_WORKER_POD_PATCH: .*: is a directory"):
        Settings.from_env({_k8spod.PATCH_PATH_VAR: str(directory)})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"spec": {', "line 1 column 11: invalid JSON"),
        ("[1]", "must be a JSON object (a Pod)"),
        ('{"containers": []}', "'containers' is not a Pod field; the patch is a Pod"),
        ('{"spec": {"containers": [{"image": "x"}]}}', "spec.containers: an item has no merge key"),
        (
            '{"spec": {"containers": [{"name": "pulumi-workflow", "$patch": "delete"}]}}',
            "the patch removes the pulumi-workflow container",
        ),
    ],
)
def test_bad_patch_files_fail_at_start_naming_the_file(tmp_path, text, message):
    path = tmp_path / "worker-pod.json"
    path.write_text(text)
    with pytest.raises(TargetError) as err:
        Settings.from_env({_k8spod.PATCH_PATH_VAR: str(path)})
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value)


def test_empty_patch_file_means_no_patch(tmp_path):
    path = tmp_path / "worker-pod.json"
    path.write_text("\n")
    assert Settings.from_env({_k8spod.PATCH_PATH_VAR: str(path)}).patch == {}


@pytest.mark.parametrize(
    "job_id",
    ["simple-id", "UPPER_case.id", "x" * 200, "éé/../", "", "-leading-and-trailing-"],
)
def test_names_and_labels_are_valid_for_any_job_id(job_id):
    name = pod_name(job_id)
    assert len(name) <= 63 and DNS_LABEL.match(name), name
    value = label_value(job_id)
    assert len(value) <= 63 and LABEL_VALUE.match(value), value
    job = JobSpec(job_id=job_id, run_id=job_id, image="i")
    validate(render(job=job))


def test_shortened_names_stay_distinct():
    a, b = "A" * 100 + "1", "A" * 100 + "2"
    assert pod_name(a) != pod_name(b)
    assert label_value(a) != label_value(b)
    assert pod_name("simple") == "pulumi-workflow-runner-simple"
    assert label_value("host-a-agent-1") == "host-a-agent-1"


def test_selector_finds_exactly_this_instance():
    assert selector("host-a-agent-1") == (
        f"{LABEL_INSTANCE}=host-a-agent-1,app.kubernetes.io/component=pulumi-workflow"
    )


def _pod(phase="Pending", waiting=None, running=False, terminated=None, conditions=None):
    state = client.V1ContainerState(
        waiting=client.V1ContainerStateWaiting(**waiting) if waiting else None,
        running=client.V1ContainerStateRunning() if running else None,
        terminated=client.V1ContainerStateTerminated(**terminated) if terminated else None,
    )
    cs = client.V1ContainerStatus(
        name="pulumi-workflow",
        image="i",
        image_id="",
        ready=running,
        restart_count=0,
        state=state,
    )
    return client.V1Pod(
        status=client.V1PodStatus(
            phase=phase,
            container_statuses=[cs] if (waiting or running or terminated) else None,
            conditions=conditions,
        )
    )


def test_start_verdicts():
    assert start_verdict(_pod("Running", running=True), "i") == ("running", "running")
    verdict, text = start_verdict(
        _pod(waiting={"reason": "ErrImagePull", "message": "manifest unknown"}), "reg/x:1"
    )
    assert verdict == "failed"
    assert text == "cannot pull the image (reg/x:1): ErrImagePull: manifest unknown"
    verdict, text = start_verdict(_pod(waiting={"reason": "ContainerCreating"}), "i")
    assert (verdict, text) == ("waiting", "Pending: ContainerCreating")
    verdict, text = start_verdict(
        _pod("Failed", terminated={"reason": "Error", "exit_code": 127}), "i"
    )
    assert verdict == "failed" and "exit code 127" in text and "/bin/sh" in text
    unschedulable = client.V1PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable", message="0/1 nodes"
    )
    verdict, text = start_verdict(_pod(conditions=[unschedulable]), "i")
    assert (verdict, text) == ("waiting", "not scheduled: Unschedulable: 0/1 nodes")
