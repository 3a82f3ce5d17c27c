"""A job shaped like a real deployment, end to end on the process and docker targets (the
kubernetes one: agent/tests/targets/test_kubernetes.py, k8s stage): a real agent claims it,
fetches the Pulumi Deployments executor with the pool's credentials and places it in the job,
a step's $PULUMI_ENV line reaches the next step, and the claim's OIDC token is
PULUMI_OIDC_TOKEN (agent_harness.DEPLOYMENT_STEPS). Step 0, the checkout slot, is never run."""

from __future__ import annotations

import pytest
from agent_harness import DEPLOYMENT_STEPS, WAIT, AgentProcess, Emulator, check_deployment_logs
from pulumi_harness import bridge_gateway
from target_harness import JOB_IMAGE, docker_available


def run_deployment(emu, tmp_path, **settings) -> dict:
    agent = AgentProcess(emu, tmp_path, settings.get("deploy_target", "process"), **settings)
    agent.start()
    try:
        job_id = emu.create_job(
            DEPLOYMENT_STEPS, service_env=True, image=JOB_IMAGE, **{"shell": "bash"}
        )
        [job] = emu.wait_jobs([job_id], timeout=WAIT)
    finally:
        agent.stop()
    assert emu.job(job_id)["steps"][0]["index"] == 1  # step 0 is the checkout slot
    return job


def check(job: dict) -> None:
    assert job["status"] == "succeeded", job
    check_deployment_logs(job["steps"])


def test_a_deployment_fetches_and_runs_the_executor_as_a_process(emu, tmp_path):
    check(run_deployment(emu, tmp_path))


def test_a_deployment_fetches_and_runs_the_executor_in_docker(tmp_path):
    reason = docker_available()
    if reason:
        pytest.skip(reason)
    # The job's container reaches the service at the bridge's gateway, as in upstream's own
    # docker setups (service_url must be reachable from the jobs, not only from the agent).
    with Emulator(host=bridge_gateway()) as emu:
        check(run_deployment(emu, tmp_path, deploy_target="docker", pull_image=False))
