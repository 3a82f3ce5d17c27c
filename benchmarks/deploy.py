"""A real Pulumi deployment through the agent, against the same commands in a bare `docker run`.

Through the agent: the emulator issues a deployment job (`base` program, `update`, config with a
secret, the passphrase in the deployment's env); one agent on the docker target runs it in
local/pulumi:latest (scripts/build-pulumi-image.sh), cloning from a GitServer; the stand-in
executor runs the real Pulumi CLI against the emulator's stand-in backend. Timed from the claim
to the service's record of the job's end (the container's removal comes after, outside the job).

Baseline, measured in the same run, interleaved deployment by deployment (which of the two goes
first alternates): `docker run --rm` of the
same image doing what the executor does by hand: the same clone from the same git server, then
`pulumi login` (a file:// backend in the container), `stack select --create`, the two `config set`
and `up --yes --skip-preview`. Timed from `docker run` to the clock reading the container prints
after `up` (the container's removal comes after, as above).

Every deployment makes a new stack on both sides, so each does the same work: the first `up` of a
stack. Where the time goes, per phase (claim → step 1 running is the agent's start of the job:
ack, definition, executor, container; the steps are the executor's clone and update), is in the
results and in the notes under the table.
"""

from __future__ import annotations

import ipaddress
import subprocess
import time
import uuid

from benchlib import DOCKER, REPO, emulator, median, spawn_agents, stop_agents
from workflow_emulator.testing import PROGRAMS, GitServer

IMAGE = "local/pulumi:latest"
PASSPHRASE = "bench passphrase"  # noqa: S105 - a throwaway stack's, in a throwaway container
CONFIG = {"greeting": "hello", "secretWord": {"value": "s3cr3t", "secret": True}}
WARMUP = 1  # the first pair warms caches (the executor's download, the image's pages)

# The bare side: the stand-in executor's commands, by hand; `@name time` lines mark the phases.
BARE = r"""
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


def through_agent(emu, git_url: str) -> dict:
    """One deployment through the agent: seconds, and its phases from the emulator's record."""
    job_id = emu.create_deployment(
        f"{emu.org}/base/{_stack()}",
        {"url": git_url, "repoDir": "base"},
        config=CONFIG,
        env={"PULUMI_CONFIG_PASSPHRASE": {"secret": PASSPHRASE}},
        image={"reference": "pulumi/pulumi:latest", "isDefault": True},
    )
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


def bare(git_url: str) -> dict:
    """The same deployment in a bare `docker run` of the same image."""
    secret = CONFIG["secretWord"]["value"]
    env = {
        "URL": git_url,
        "STACK": f"organization/base/{_stack()}",
        "GREETING": CONFIG["greeting"],
        "SECRET": secret,
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
    }
    args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    t0 = time.time()
    out = subprocess.run(
        [DOCKER, "run", "--rm", *args, IMAGE, "sh", "-c", BARE],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    returned = time.time()
    if out.returncode != 0:
        raise RuntimeError(f"bare docker run exit {out.returncode}: {out.stderr[-1500:]}")
    mark = {
        line.split()[0][1:]: float(line.split()[1])
        for line in out.stdout.splitlines()
        if line.startswith("@")
    }
    return {
        "s": mark["done"] - t0,
        "phases": {
            "start (docker run → first command)": mark["started"] - t0,
            "clone": mark["cloned"] - mark["started"],
            "login, select, config, up": mark["done"] - mark["cloned"],
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
    """One run: an emulator, a git server and one agent; `deployments` pairs (agent, bare),
    alternating, after `warmup` pairs that are not counted."""
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
        [agent] = spawn_agents(emu, "deploy", 1, **settings)
        try:
            agent_runs, bare_runs = [], []
            for i in range(warmup + deployments):
                # Which goes first alternates: neither side always follows the other's work.
                if i % 2:
                    b = bare(url)
                    a = through_agent(emu, url)
                else:
                    a = through_agent(emu, url)
                    b = bare(url)
                if i >= warmup:
                    agent_runs.append(a)
                    bare_runs.append(b)
        finally:
            stop_agents([agent])
    out = {"deployments": deployments, "agent": _summary(agent_runs), "bare": _summary(bare_runs)}
    out["ratio"] = round(out["agent"]["median_s"] / out["bare"]["median_s"], 3)
    return out
