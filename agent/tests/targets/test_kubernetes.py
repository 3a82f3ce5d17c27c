"""Kubernetes target specifics, against a real cluster (KUBECONFIG, or the one `make k8s-up`
brings up); skipped with the reason when there is none. The shared behaviour (steps, cancel,
timeout, env, cleanup) is in test_contract.py; pod rendering without a cluster in
test_k8spod.py."""

from __future__ import annotations

import json
import threading

import pytest
from target_harness import JOB_IMAGE, run_steps
from workflow_agent.targets.base import LABEL_INSTANCE, LABEL_JOB, TargetError


def test_pod_in_the_cluster_has_the_upstream_shape(kubernetes_harness):
    h = kubernetes_harness
    target = h.target()
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
        assert c.security_context.allow_privilege_escalation is False
        assert pod.spec.security_context.run_as_non_root is True
        assert "never-in-the-pod-spec" not in json.dumps(
            h.api_client.sanitize_for_serialization(pod)
        )
        res = run_steps(target, job)
        assert res.outcomes[0].succeeded
        assert res.lines[0] == ["1000", "/mnt/workflow", "/mnt/workflow"]
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
