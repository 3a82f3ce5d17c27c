"""Real Pulumi deployments through a real agent, on the process and docker targets (issue 24;
the kubernetes target: agent/tests/targets/test_kubernetes.py in the k8s stage). What each run
proves, and how: tests/system/pulumi_harness.py.

The docker target runs the jobs in local/pulumi:latest (scripts/build-pulumi-image.sh), which
stands in for pulumi/pulumi: the jobs ask for the default image (isDefault), and the agent's
`default_image` names ours. The process target finds the same CLI on PATH.
"""

from __future__ import annotations

import pytest
from agent_harness import Emulator
from pulumi_harness import JOB_IMAGE, bins_or_fail, bridge_gateway, deployments_test
from target_harness import docker_available
from workflow_emulator.testing import PROGRAMS, GitServer


@pytest.fixture(scope="module")
def bins() -> list[str]:
    return bins_or_fail()


def test_real_deployments_as_processes(tmp_path, bins):
    with Emulator() as emu, GitServer() as git:
        url = git.add("programs", PROGRAMS)
        deployments_test(emu, url, tmp_path, bins, "process", env_forward_allowlist=["PATH"])


def test_real_deployments_in_docker(tmp_path, bins):
    reason = docker_available()
    if reason:
        pytest.skip(reason)
    host = bridge_gateway()  # what the job containers reach
    with Emulator(host=host) as emu, GitServer(host=host) as git:
        url = git.add("programs", PROGRAMS)
        deployments_test(
            emu, url, tmp_path, bins, "docker", pull_image=False, default_image=JOB_IMAGE
        )
