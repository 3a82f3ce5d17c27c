"""A real Pulumi deployment through the agent, against the same commands in a bare `docker run`.

Through the agent: the emulator issues a deployment job (`base` program, `update`, config with a
secret, the passphrase in the deployment's env); one agent on the docker target runs it in
local/pulumi:latest (scripts/build-pulumi-image.sh), cloning from a GitServer; the stand-in
executor runs the real Pulumi CLI against the emulator's stand-in backend. Timed from the claim
to the service's record of the job's end (the container's removal comes after, outside the job).

Two baselines, measured in the same run, interleaved deployment by deployment (the order of the
three rotates), each a `docker run --rm` of the same image from the same git server:
- executor: the same stand-in executor, `clone` then `update`, with the same job's settings (a
  job of another pool, claimed and its definition read by plain HTTP calls, untimed): what the
  agent adds to the commands it runs. The goal is judged on this one.
- by hand: what the executor does, typed out: the clone, then `pulumi login` (a file:// backend
  in the container), `stack select --create`, the two `config set` and `up --yes
  --skip-preview`: what the agent and the stand-in executor (its state download and upload, its
  Python) add together.
Each is timed from `docker run` to the clock reading the container prints after the last command
(the container's removal comes after, as above).

Every deployment makes a new stack, so each does the same work: the first `up` of a stack. Where
the time goes, per phase (claim → step 1 running is the agent's start of the job: ack,
definition, executor, container; the steps are the executor's clone and update), is in the
results and in the notes under the table.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import tempfile
import time
import uuid

import httpx
from benchlib import DOCKER, REPO, STATE, emulator, median, spawn_agents, stop_agents
from workflow_emulator.testing import PROGRAMS, GitServer

EXECUTOR = PROGRAMS.parent / "pulumi-deploy-executor"  # the one the emulator serves

IMAGE = "local/pulumi:latest"
PASSPHRASE = "bench passphrase"  # noqa: S105 - a throwaway stack's, in a throwaway container
CONFIG = {"greeting": "hello", "secretWord": {"value": "s3cr3t", "secret": True}}
WARMUP = 1  # the first pair warms caches (the executor's download, the image's pages)

# `@name time` lines mark the phases of a bare run.
BARE_EXECUTOR = r"""
set -eu
mark() { echo "@$1 $(date +%s.%N)"; }
mark started
"$PULUMI_DEPLOY_EXECUTOR" clone
mark cloned
"$PULUMI_DEPLOY_EXECUTOR" update
mark done
"""
# The stand-in executor's commands, by hand.
BY_HAND = r"""
set -eu
mark() { echo "@$1 $(date +%s.%N)"; }
mark started
git clone --depth 1 --quiet -- "$URL" /src
mark cloned
cd /src/base
export PULUMI_HOME=/tmp/pulumi-home PULUMI_SKIP_UPDATE_CHECK=true
mkdir -p /tmp/state
pulumi login --non-interactive file:///tmp/state
pulumi stack select --create --non-interactive "$STACK"
printf %s "$GREETING" | pulumi config set --non-interactive --stack "$STACK" --plaintext -- greeting
printf %s "$SECRET" | pulumi config set --non-interactive --stack "$STACK" --secret -- secretWord
pulumi up --yes --skip-preview --non-interactive --stack "$STACK"
mark done
"""


def ensure_image() -> str:
    """The job image, (re)built when its inputs changed; "" or why it cannot be had."""
    out = subprocess.run(
        ["bash", str(REPO / "scripts/build-pulumi-image.sh")],
        capture_output=True,
        text=True,
        timeout=3600,  # a cold Pulumi build takes minutes
        check=False,
    )
    if out.returncode == 0:
        return ""
    have = subprocess.run([DOCKER, "image", "inspect", IMAGE], capture_output=True, check=False)
    if have.returncode == 0:
        return ""  # the image there is older than its inputs, but it runs the same way
    return f"n/a: no {IMAGE} (scripts/build-pulumi-image.sh: {out.stderr.strip()[-200:]})"


def bridge_gateway() -> str:
    """Docker's default bridge address: what job containers reach the host's servers on (an
    engine may leave the gateway out of the network's IPAM: then the subnet's first address)."""
    fmt = "{{range .IPAM.Config}}{{.Gateway}} {{.Subnet}}{{end}}"
    out = subprocess.run(
        [DOCKER, "network", "inspect", "-f", fmt, "bridge"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    gateway, _, subnet = out.stdout.strip().rpartition(" ")
    return gateway or str(ipaddress.ip_network(subnet)[1])


def _stack() -> str:
    return f"bench-{uuid.uuid4().hex[:8]}"


def _deployment(emu, git_url: str, **kw) -> str:
    return emu.create_deployment(
        f"{emu.org}/base/{_stack()}",
        {"url": git_url, "repoDir": "base"},
        config=CONFIG,
        env={"PULUMI_CONFIG_PASSPHRASE": {"secret": PASSPHRASE}},
        image={"reference": "pulumi/pulumi:latest", "isDefault": True},
        **kw,
    )


def through_agent(emu, git_url: str) -> dict:
    """One deployment through the agent: seconds, and its phases from the emulator's record."""
    job_id = _deployment(emu, git_url)
    [job] = emu.wait_jobs([job_id], timeout=600, poll=0.05)
    if job["status"] != "succeeded":
        tail = "\n".join(line for s in job["steps"] for line in s["logs"])[-1500:]
        raise RuntimeError(f"deployment {job_id} {job['status']}: {job['reason']}\n{tail}")
    at = {e["event"]: e["at"] for e in job["events"]}
    claimed = job["claimed_at"]
    return {
        "s": job["finished_at"] - claimed,
        "phases": {
            "ack": at["accepted"] - claimed,
            "start (definition, executor, container)": at["step 1 running"] - at["accepted"],
            "clone step": at["step 1 succeeded"] - at["step 1 running"],
            "update step": at["step 2 succeeded"] - at["step 2 running"],
            "final report": job["finished_at"] - at["step 2 succeeded"],
        },
    }


def _docker_run(env: dict, script: str, *args: str) -> tuple[float, dict, float]:
    """`docker run --rm` of the image running `script`: its start time, the `@name` marks it
    printed, the time it returned. The environment goes in a file (it may hold a token)."""
    with tempfile.NamedTemporaryFile("w", dir=STATE, prefix="deploy-env-", delete=False) as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.writelines(f"{k}={v}\n" for k, v in env.items())
    try:
        t0 = time.time()
        out = subprocess.run(
            [DOCKER, "run", "--rm", "--env-file", fh.name, *args, IMAGE, "sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        returned = time.time()
    finally:
        os.unlink(fh.name)
    if out.returncode != 0:
        raise RuntimeError(f"bare docker run exit {out.returncode}: {out.stderr[-1500:]}")
    marks = {
        line.split()[0][1:]: float(line.split()[1])
        for line in out.stdout.splitlines()
        if line.startswith("@")
    }
    return t0, marks, returned


def _claimed_env(emu, pool_token: str, job_id: str) -> dict:
    """A job of the baseline's own pool, claimed and its definition read as an agent would
    (untimed): its environment, secrets as plain values."""
    with httpx.Client(base_url=emu.url, timeout=30) as http:
        pool = {"Authorization": f"token {pool_token}"}
        claim = http.get("/api/deployments/poll", headers=pool).json()
        http.post(
            "/api/agent-workflows/deployment",
            json={"jobID": job_id, "deploymentID": claim["deploymentID"]},
            headers=pool,
        ).raise_for_status()
        job = {"Authorization": f"token {claim['jobToken']}"}
        reply = http.get(f"/api/workflow/jobs/{job_id}", headers=job)
        reply.raise_for_status()
    env = reply.json()["env"]
    return {k: v["secret"] if isinstance(v, dict) else v for k, v in env.items()}


def bare_executor(emu, pool: tuple[str, str], git_url: str) -> dict:
    """The same deployment by the same executor in a bare `docker run` of the same image."""
    name, token = pool
    env = _claimed_env(emu, token, _deployment(emu, git_url, pool=name))
    where = "/opt/pulumi-deploy/pulumi-deploy-executor"
    env |= {"PULUMI_DEPLOY_EXECUTOR": where, "PULUMI_DEPLOY_WORKSPACE": "/tmp/pulumi-deploy"}
    return _timed(env, BARE_EXECUTOR, "update", "-v", f"{EXECUTOR}:{where}:ro")


def by_hand(git_url: str) -> dict:
    """The executor's commands, typed out, in a bare `docker run` of the same image."""
    env = {
        "URL": git_url,
        "STACK": f"organization/base/{_stack()}",
        "GREETING": CONFIG["greeting"],
        "SECRET": CONFIG["secretWord"]["value"],
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
    }
    return _timed(env, BY_HAND, "login, select, config, up")


def _timed(env: dict, script: str, work: str, *args: str) -> dict:
    """A bare run's time to its last command, and its phases (`work`: what follows the clone)."""
    t0, mark, returned = _docker_run(env, script, *args)
    return {
        "s": mark["done"] - t0,
        "phases": {
            "start (docker run → first command)": mark["started"] - t0,
            "clone": mark["cloned"] - mark["started"],
            work: mark["done"] - mark["cloned"],
            "container exit and removal": returned - mark["done"],
        },
    }


def _summary(samples: list[dict]) -> dict:
    seconds = [s["s"] for s in samples]
    return {
        "n": len(seconds),
        "median_s": round(median(seconds), 3),
        "min_s": round(min(seconds), 3),
        "max_s": round(max(seconds), 3),
        "phases_median_s": {
            k: round(median([s["phases"][k] for s in samples]), 3) for k in samples[0]["phases"]
        },
    }


def run(deployments: int, warmup: int = WARMUP) -> dict:
    """One run: an emulator, a git server and one agent; `deployments` rounds (agent, executor,
    by hand; the order rotates), after `warmup` rounds that are not counted."""
    reason = ensure_image()
    if reason:
        return {"na": reason}
    gateway = bridge_gateway()  # job containers reach the emulator and git server there
    settings = {
        "deploy_target": "docker",
        "pull_image": False,
        "default_image": IMAGE,
        "polling_interval": "200ms",
    }
    with emulator("deploy", host=gateway) as emu, GitServer(host=gateway) as git:
        url = git.add("programs", PROGRAMS)
        pool = ("bench-bare", emu.create_pool("bench-bare")["token"])  # the agent never sees it
        [agent] = spawn_agents(emu, "deploy", 1, **settings)
        sides = {
            "agent": lambda: through_agent(emu, url),
            "executor": lambda: bare_executor(emu, pool, url),
            "by_hand": lambda: by_hand(url),
        }
        names = list(sides)
        samples: dict[str, list] = {name: [] for name in names}
        try:
            for i in range(warmup + deployments):
                # The order rotates: no side always follows the same other side's work.
                for name in names[i % 3 :] + names[: i % 3]:
                    sample = sides[name]()
                    if i >= warmup:
                        samples[name].append(sample)
        finally:
            stop_agents([agent])
    out = {"deployments": deployments, **{name: _summary(samples[name]) for name in names}}
    agent = out["agent"]["median_s"]
    out["ratio"] = round(agent / out["executor"]["median_s"], 3)
    out["ratio_by_hand"] = round(agent / out["by_hand"]["median_s"], 3)
    return out
