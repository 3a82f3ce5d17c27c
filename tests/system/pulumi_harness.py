"""Real Pulumi deployments through a real agent, for any target: the job shapes, the checks
and the helpers that tests/system/test_pulumi_deploy.py (process, docker) and
agent/tests/targets/test_kubernetes.py (kubernetes) share.

The emulator issues deployment jobs shaped like the service's (step 0 reserved, the clone, one
step per pre-run command, the operation; a scoped PULUMI_ACCESS_TOKEN and the PULUMI_CI_*
variables). The agent fetches the executor with the pool's credentials and places it in the
job; the executor is the emulator's stand-in, which runs the real Pulumi CLI (built here from
its Go modules, with the YAML language host) on a program cloned from a real git server. The
state lives in the emulator's stand-in backend, so every outcome is checked from outside the
job with `pulumi stack output` / `pulumi stack export` on a copy of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from agent_harness import WAIT, AgentProcess
from workflow_emulator.testing import PulumiMissing, pulumi_bin_dirs

PASSPHRASE = "correct horse battery staple"
JOB_IMAGE = "local/pulumi:latest"
STACK = "dev"


def bins_or_fail() -> list[str]:
    """The Pulumi CLI's and language host's directories; the test fails (never skips) without
    them: the stages that run these wait for the builds."""
    try:
        return pulumi_bin_dirs()
    except PulumiMissing as exc:
        pytest.fail(f"{exc} (the stage waits for scripts/go-builds.sh pulumi)")


def pulumi(bins, backend: Path, *args: str) -> str:
    """The real CLI, from outside any job, on a copy of the emulator's state."""
    env = {
        "PATH": os.pathsep.join([*bins, "/usr/bin", "/bin"]),
        "PULUMI_HOME": str(backend / ".home"),
        "PULUMI_BACKEND_URL": f"file://{backend}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }
    out = subprocess.run(
        ["pulumi", *args, "--non-interactive"],
        env=env,
        cwd=backend,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def outputs(emu, bins, tmp_path: Path, project: str) -> dict:
    backend = emu.extract_backend(tmp_path / f"state-{uuid.uuid4().hex[:6]}")
    stack = f"organization/{project}/{STACK}"
    return json.loads(
        pulumi(bins, backend, "stack", "output", "--json", "--show-secrets", "-s", stack)
    )


def resources(emu, bins, tmp_path: Path, project: str) -> list:
    backend = emu.extract_backend(tmp_path / f"state-{uuid.uuid4().hex[:6]}")
    stack = f"organization/{project}/{STACK}"
    exported = json.loads(pulumi(bins, backend, "stack", "export", "-s", stack))
    return exported["deployment"].get("resources") or []


def all_logs(job: dict) -> str:
    return "\n".join(line for step in job["steps"] for line in step["logs"])


class Deployments:
    """One agent of one target, deploying the programs of one git repository (`git`: its URL)."""

    def __init__(self, emu, agent, git) -> None:
        self.emu, self.agent, self.git = emu, agent, git

    def create(self, project: str, operation: str = "update", pre=(), **kw) -> str:
        # The passphrase reaches pulumi only through /PULUMI_ENV, written by a pre-run
        # command: every update with a secret proves the file reaches the program's run.
        pre_run = [f'echo "PULUMI_CONFIG_PASSPHRASE={PASSPHRASE}" >> "$PULUMI_ENV"', *pre]
        return self.emu.create_deployment(
            f"{self.emu.org}/{project}/{STACK}",
            {"url": self.git, "repoDir": project},
            operation=operation,
            pre_run_commands=pre_run,
            image={"reference": "pulumi/pulumi:latest", "isDefault": True},
            **kw,
        )

    def run(self, project: str, operation: str = "update", **kw) -> dict:
        [job] = self.emu.wait_jobs([self.create(project, operation, **kw)], timeout=WAIT * 2)
        return job


def deployments_test(emu, git, tmp_path, bins, target: str, **settings) -> None:
    env = {"PATH": os.pathsep.join([*bins, os.environ["PATH"]])}
    agent = AgentProcess(emu, tmp_path, target, deploy_target=target, **settings)
    agent.start(env=env)
    try:
        d = Deployments(emu, agent, git)
        check_deployments(d, emu, tmp_path, bins)
    finally:
        agent.stop()


def check_deployments(d: Deployments, emu, tmp_path: Path, bins) -> None:
    # pulumi up, with config, a secret and an OIDC token; checked from outside the job.
    config = {"greeting": "hello", "secretWord": {"value": "s3cr3t-w0rd", "secret": True}}
    job = d.run("base", config=config, pre=['test -n "$PULUMI_OIDC_TOKEN" && echo oidc-present'])
    logs = all_logs(job)
    assert job["status"] == "succeeded", logs[-3000:]
    assert "oidc-present" in logs
    assert "Loading PULUMI_ENV from" in logs
    assert "s3cr3t-w0rd" not in logs  # pulumi shows secrets as [secret]; the agent redacts
    assert outputs(emu, bins, tmp_path, "base") == {
        "greeting": "hello",
        "message": "hello, world",
        "secretWord": "s3cr3t-w0rd",
    }
    assert emu.pool_token not in logs

    # A StackReference to it, then a preview, then a destroy that leaves an empty stack.
    job = d.run("app")
    assert job["status"] == "succeeded", all_logs(job)[-3000:]
    assert outputs(emu, bins, tmp_path, "app") == {"fromBase": "hello, world"}
    job = d.run("app", "preview")
    assert job["status"] == "succeeded", all_logs(job)[-3000:]
    assert "Previewing update (dev)" in all_logs(job)
    job = d.run("app", "destroy")
    assert job["status"] == "succeeded", all_logs(job)[-3000:]
    assert resources(emu, bins, tmp_path, "app") == []

    # A program error: a failed step whose log shows Pulumi's own error.
    job = d.run("broken")
    assert job["status"] == "failed"
    assert "doesNotExist" in all_logs(job), all_logs(job)[-3000:]

    # A cancel in the middle of `pulumi up`, then an update of the same stack that succeeds:
    # no lock is left.
    fifo = f"/tmp/wfa-gate-{uuid.uuid4().hex[:8]}"  # noqa: S108 - the job's own /tmp
    job_id = d.create("gate", config={"gate": fifo}, pre=[f"rm -f {fifo}; mkfifo {fifo}"])
    deadline = time.monotonic() + WAIT
    while "Updating (dev)" not in all_logs(emu.job(job_id)):
        assert time.monotonic() < deadline, emu.job(job_id)
        assert emu.job(job_id)["status"] in ("not-started", "accepted", "running"), emu.job(job_id)
        time.sleep(0.2)
    emu.cancel(job_id)
    [job] = emu.wait_jobs([job_id], timeout=WAIT)
    assert job["status"] == "canceled", job
    job = d.run("gate", config={"gate": "Pulumi.yaml"})
    assert job["status"] == "succeeded", all_logs(job)[-3000:]

    # One agent, many deployments, one executor version: downloaded once.
    assert emu.executor()["fetches"]["200"] == 1, emu.executor()


def bridge_gateway() -> str:
    import ipaddress

    import docker

    [config] = docker.from_env(timeout=30).networks.get("bridge").attrs["IPAM"]["Config"]
    return config.get("Gateway") or str(ipaddress.ip_network(config["Subnet"])[1])
