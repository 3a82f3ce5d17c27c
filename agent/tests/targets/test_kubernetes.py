"""Kubernetes target specifics, against a real cluster (KUBECONFIG, or the one `make k8s-up`
brings up); skipped with the reason when there is none. The shared behaviour (steps, cancel,
timeout, env, cleanup) is in test_contract.py; pod rendering without a cluster in
test_k8spod.py."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from target_harness import JOB_IMAGE, run_steps
from workflow_agent.targets.base import LABEL_INSTANCE, LABEL_JOB, TargetError


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        # The image's own user (root here, as in pulumi/pulumi), in / as upstream's runner.
        ("image", ["0", "/root", "/"]),
        # The hardened profile: uid 1000, HOME on the job's volume.
        ("restricted", ["1000", "/mnt/workflow", "/"]),
    ],
)
def test_pod_in_the_cluster_has_the_upstream_shape(kubernetes_harness, profile, expected):
    h = kubernetes_harness
    target = h.target(cfg={"job_security_profile": profile})
    job = h.job("id -u; echo $HOME; pwd", env={"SECRET_ONE": "never-in-the-pod-spec"})
    target.prepare(job)
    try:
        [pod] = h.pods(job)
        assert pod.metadata.name.startswith("pulumi-workflow-runner-")
        labels = pod.metadata.labels
        assert labels["app.kubernetes.io/component"] == "pulumi-workflow"
        assert labels["app.kubernetes.io/name"] == "workflow-runner"
        assert labels[LABEL_INSTANCE] == h.instance and labels[LABEL_JOB] == job.job_id
        [c] = pod.spec.containers
        assert c.name == "pulumi-workflow" and c.image == JOB_IMAGE
        if profile == "restricted":
            assert c.security_context.allow_privilege_escalation is False
            assert pod.spec.security_context.run_as_non_root is True
        else:
            assert c.security_context is None
        assert "never-in-the-pod-spec" not in json.dumps(
            h.api_client.sanitize_for_serialization(pod)
        )
        res = run_steps(target, job)
        assert res.outcomes[0].succeeded
        assert res.lines[0] == expected
    finally:
        target.cleanup(job)
    assert h.pods(job) == []


def test_missing_image_with_pull_never_is_a_clear_error(kubernetes_harness):
    h = kubernetes_harness
    target = h.target(pull_image=False)
    job = h.job("true", image="local/wfa-targets-does-not-exist:1")
    try:
        with pytest.raises(TargetError) as err:
            target.prepare(job)
        assert "local/wfa-targets-does-not-exist:1" in str(err.value)
        assert "ErrImageNeverPull" in str(err.value)
    finally:
        target.cleanup(job)
    assert h.pods(job) == []


def test_image_pull_failure_is_a_clear_error(kubernetes_harness):
    h = kubernetes_harness
    target = h.target(pull_image=True)
    job = h.job("true", image="registry.wfa-targets.invalid/team/job:1")
    try:
        with pytest.raises(TargetError, match="cannot pull the image"):
            target.prepare(job)
    finally:
        target.cleanup(job)
    assert h.pods(job) == []


def test_debug_pod_is_kept_until_orphan_cleanup(kubernetes_harness):
    h = kubernetes_harness
    target = h.target(env={"PULUMI_AGENT_DEBUG_POD": "true"})
    job = h.job("echo kept > f")
    target.prepare(job)
    assert run_steps(target, job).outcomes[0].succeeded
    target.cleanup(job)
    assert len(h.pods(job)) == 1
    assert h.target().cleanup_orphans() == 1
    assert h.pods(job) == []


def test_orphans_of_another_run_are_deleted_and_live_jobs_kept(kubernetes_harness):
    h = kubernetes_harness
    crashed = h.target()
    orphan = h.job("true")
    crashed.prepare(orphan)  # and the agent "dies": no cleanup
    other = h.target(instance=h.instance + "-other")
    other_job = h.job("true")
    other.prepare(other_job)
    fresh = h.target()
    live = h.job("true")
    fresh.prepare(live)
    try:
        assert fresh.cleanup_orphans() == 1
        assert h.pods(orphan) == []
        assert len(h.pods(live)) == 1
        assert len(h.pods(instance=h.instance + "-other")) == 1
    finally:
        fresh.cleanup(live)
        other.cleanup(other_job)


def test_a_deleted_pod_makes_the_step_an_error_not_a_hang(kubernetes_harness):
    h = kubernetes_harness
    target = h.target()
    job = h.job("echo started; sleep 300", timeout=300)
    target.prepare(job)
    try:
        [pod] = h.pods(job)

        def on_line(line: str) -> None:
            threading.Thread(
                target=h.api.delete_namespaced_pod,
                args=(pod.metadata.name, h.namespace),
                kwargs={"grace_period_seconds": 0},
                daemon=True,
            ).start()

        out = target.run_step(job, job.steps[0], on_line, threading.Event())
        assert not out.succeeded and out.reason in ("error", "exited"), out
    finally:
        target.cleanup(job)
    assert h.pods(job) == []


# The Role the K8s deployment grants the agent (documented in targets/kubernetes.py).
RBAC_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "patch", "delete"]},
]


@pytest.fixture
def rbac_namespace(kubernetes_harness):
    """A namespace enforcing the `restricted` Pod Security level, and a service account bound
    to a Role with `rules` (set by the test); yields a factory for its API client."""
    from kubernetes import client

    h = kubernetes_harness
    name = f"wfa-targets-rbac-{h.instance[-8:]}"
    h.api.create_namespace(
        {
            "metadata": {
                "name": name,
                "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
            }
        }
    )
    rbac = client.RbacAuthorizationV1Api(h.api_client)

    def agent_client(rules: list[dict]) -> client.ApiClient:
        sa = f"agent-{len(rules)}-{abs(hash(json.dumps(rules))) % 10**6}"
        h.api.create_namespaced_service_account(name, {"metadata": {"name": sa}})
        rbac.create_namespaced_role(name, {"metadata": {"name": sa}, "rules": rules})
        rbac.create_namespaced_role_binding(
            name,
            {
                "metadata": {"name": sa},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": name}],
            },
        )
        token = h.api.create_namespaced_service_account_token(
            sa, name, {"spec": {"expirationSeconds": 3600}}
        ).status.token
        conf = client.Configuration()
        conf.host = h.api_client.configuration.host
        conf.ssl_ca_cert = h.api_client.configuration.ssl_ca_cert
        conf.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(conf)

    yield name, agent_client
    h.api.delete_namespace(name, grace_period_seconds=0)


def test_exactly_the_documented_rbac_is_enough_and_pods_pass_restricted(
    kubernetes_harness, rbac_namespace
):
    """A job runs end to end as a service account holding only the documented verbs, in a
    namespace that enforces the `restricted` Pod Security Standard, with
    job_security_profile: restricted."""
    from workflow_agent.targets.kubernetes import KubernetesTarget

    h = kubernetes_harness
    ns, agent_client = rbac_namespace
    api = agent_client(RBAC_RULES)
    cfg = h.config(pull_image=False, job_security_profile="restricted")
    target = KubernetesTarget(cfg, h.instance, namespace=ns, env={}, api_client=api, grace=5)
    job = h.job("echo hi > /mnt/workflow/f", "cat /mnt/workflow/f", timeout=120)
    assert target.cleanup_orphans() == 0
    target.prepare(job)
    try:
        res = run_steps(target, job)
        assert [o.succeeded for o in res.outcomes] == [True, True]
        assert res.lines[1] == ["hi"]
    finally:
        target.cleanup(job)
    assert h.api.list_namespaced_pod(ns).items == []
    # The namespace does enforce `restricted`: a pod without the defaults is refused.
    from kubernetes.client.rest import ApiException

    plain = {
        "metadata": {"name": "not-restricted"},
        "spec": {"containers": [{"name": "c", "image": JOB_IMAGE}]},
    }
    with pytest.raises(ApiException) as err:
        h.api.create_namespaced_pod(ns, plain)
    assert "violates PodSecurity" in str(err.value.body)
    # So is the image's own user (the default profile): one clear error naming the rules.
    target = KubernetesTarget(
        h.config(pull_image=False), h.instance, namespace=ns, env={}, api_client=api, grace=5
    )
    job = h.job("true")
    try:
        with pytest.raises(TargetError, match=r'violates PodSecurity "restricted:latest"'):
            target.prepare(job)
    finally:
        target.cleanup(job)


def test_without_watch_prepare_fails_with_a_clear_error(kubernetes_harness, rbac_namespace):
    from workflow_agent.targets.kubernetes import KubernetesTarget

    h = kubernetes_harness
    ns, agent_client = rbac_namespace
    rules = [dict(RBAC_RULES[0], verbs=["create", "list", "delete"]), RBAC_RULES[1]]
    target = KubernetesTarget(
        h.config(pull_image=False, job_security_profile="restricted"),
        h.instance,
        namespace=ns,
        env={},
        api_client=agent_client(rules),
    )
    job = h.job("true")
    try:
        with pytest.raises(TargetError, match=r"cannot watch pod .*: 403"):
            target.prepare(job)
    finally:
        target.cleanup(job)


def test_a_deployment_fetches_and_runs_the_executor_in_a_pod(kubernetes_harness, tmp_path):
    """The deployment-shaped job of tests/system/test_agent_executor.py, here: a real agent
    (deploy_target: kubernetes) claims it from an emulator that listens on the node's address,
    which pods reach (tests/k8s/README.md); the agent copies the executor into the pod, and
    the job runtime (PULUMI_ENV, PULUMI_OIDC_TOKEN) works there as on the other targets."""
    from agent_harness import DEPLOYMENT_STEPS, WAIT, AgentProcess, Emulator, check_deployment_logs
    from target_harness import kubeconfig_path

    h = kubernetes_harness
    [node] = h.api.list_node().items
    node_ip = next(a.address for a in node.status.addresses if a.type == "InternalIP")
    with Emulator(host=node_ip) as emu:
        agent = AgentProcess(
            emu, tmp_path, h.instance, deploy_target="kubernetes", pull_image=False
        )
        agent.start(env={"KUBECONFIG": kubeconfig_path()})
        try:
            job_id = emu.create_job(
                DEPLOYMENT_STEPS, service_env=True, image=JOB_IMAGE, **{"shell": "bash"}
            )
            [job] = emu.wait_jobs([job_id], timeout=WAIT * 2)
        finally:
            agent.stop()
    assert job["status"] == "succeeded", job
    check_deployment_logs(job["steps"])
    assert h.pods() == []  # the agent deleted the job's pod


def test_real_pulumi_deployments_in_pods(kubernetes_harness, tmp_path):
    """The real deployments of tests/system/pulumi_harness.py (up with config, a secret and a
    StackReference, preview, destroy, a program error, a cancel mid-`up`, the executor fetched
    once), here in worker pods of local/pulumi:latest, imported into the cluster's containerd."""
    import subprocess

    import pulumi_harness as deploy
    from agent_harness import AgentProcess, Emulator
    from target_harness import kubeconfig_path
    from workflow_emulator.testing import PROGRAMS, GitServer

    bins = deploy.bins_or_fail()
    root = Path(__file__).resolve().parents[3]
    subprocess.run(["bash", "tests/k8s/import-image.sh", deploy.JOB_IMAGE], cwd=root, check=True)
    h = kubernetes_harness
    [node] = h.api.list_node().items
    node_ip = next(a.address for a in node.status.addresses if a.type == "InternalIP")
    with Emulator(host=node_ip) as emu, GitServer(host=node_ip) as git:
        url = git.add("programs", PROGRAMS)
        agent = AgentProcess(
            emu,
            tmp_path,
            h.instance,
            deploy_target="kubernetes",
            pull_image=False,
            default_image=deploy.JOB_IMAGE,
        )
        agent.start(env={"KUBECONFIG": kubeconfig_path()})
        try:
            deploy.check_deployments(deploy.Deployments(emu, agent, url), emu, tmp_path, bins)
        finally:
            agent.stop()
    assert h.pods() == []


def test_registry_credentials_become_a_pull_secret_the_pod_owns(kubernetes_harness):
    """image.credentials: a kubernetes.io/dockerconfigjson Secret for the image's registry, named
    in the pod's imagePullSecrets, owned by the pod, deleted with it; the password is in neither
    the pod spec nor the Secret's name or labels. (The image is already on the node: this proves
    the plumbing, not a pull from a private registry.)"""
    import base64

    h = kubernetes_harness
    target = h.target()
    password = "registry-password-9c8b7a"
    job = replace(h.job("echo pulled"), image_credentials=("robot", password))
    target.prepare(job)
    try:
        [pod] = h.pods(job)
        [ref] = pod.spec.image_pull_secrets
        secret = h.api.read_namespaced_secret(ref.name, target.namespace)
        assert secret.type == "kubernetes.io/dockerconfigjson"
        [owner] = secret.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid) == ("Pod", pod.metadata.name, pod.metadata.uid)
        config = json.loads(base64.b64decode(secret.data[".dockerconfigjson"]))
        auth = config["auths"]["https://index.docker.io/v1/"]
        assert (auth["username"], auth["password"]) == ("robot", password)
        assert password not in json.dumps(h.api_client.sanitize_for_serialization(pod))
        assert run_steps(target, job).lines[0] == ["pulled"]
    finally:
        target.cleanup(job)
    assert h.pods(job) == []
    names = [s.metadata.name for s in h.api.list_namespaced_secret(target.namespace).items]
    assert ref.name not in names
