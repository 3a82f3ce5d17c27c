"""Agent overhead: from the claim (the emulator's record of it) to the first step running (the
step prints its own start time), over N jobs, one at a time, on the process and docker targets.

Baselines, measured in the same run:
- process: a bare client doing the same protocol calls (poll, ack, job definition, step
  running) with httpx, then fork/exec of the same step: the floor any agent pays;
- docker: a bare `docker run --rm <image> sh -c <step>`, timed from the moment it is started;
  and, beside it, the floor of the agent's design (a long-lived job container, each step an
  exec in it, so that files and processes persist between steps): the same image created and
  started through the Engine API with a keepalive, then the step exec'd in it, with nothing
  else around it (no attachment, no token, no protocol).

Each job's protocol phases come from the emulator's event record (claimed, accepted, step 1
running); where a figure's median misses its goal over the repeated runs, the claim-to-step path
also runs in-process under cProfile and the functions that dominate are reported.
"""

from __future__ import annotations

import cProfile
import pstats
import shutil
import subprocess
import tempfile
import time

import httpx
from benchlib import DOCKER, STATE, emulator, median, percentile, spawn_agents, stop_agents

STEP = "date +%s.%N"
JOB_IMAGE = "local/workflow-job:latest"
WARMUP = 2  # first jobs warm caches (imports, the image, the engine); not counted


def _summary(values: list[float]) -> dict:
    return {
        "n": len(values),
        "median_ms": round(median(values) * 1000, 1),
        "p95_ms": round(percentile(values, 95) * 1000, 1),
        "min_ms": round(min(values) * 1000, 1),
        "max_ms": round(max(values) * 1000, 1),
    }


def _job_kw(target: str) -> dict:
    return {"image": JOB_IMAGE} if target == "docker" else {}


def agent_run(target: str, jobs: int) -> dict:
    name = f"overhead-{target}"
    settings = {"deploy_target": target, "polling_interval": "100ms", "pull_image": False}
    with emulator(name) as emu:
        [agent] = spawn_agents(emu, name, 1, **settings)
        try:
            totals, phases = [], {"ack": [], "definition+prepare+report": [], "spawn": []}
            for i in range(jobs + WARMUP):
                job_id = emu.create_job(steps=[{"name": "t", "run": STEP}], **_job_kw(target))
                [job] = emu.wait_jobs([job_id], timeout=300, poll=0.02)
                if job["status"] != "succeeded":
                    raise RuntimeError(f"job {job_id} {job['status']}: {job['reason']}")
                if i < WARMUP:
                    continue
                started = float(job["steps"][0]["logs"][0])
                at = {e["event"]: e["at"] for e in job["events"]}
                totals.append(started - job["claimed_at"])
                phases["ack"].append(at["accepted"] - at["claimed"])
                phases["definition+prepare+report"].append(at["step 1 running"] - at["accepted"])
                phases["spawn"].append(started - at["step 1 running"])
        finally:
            stop_agents([agent])
    return {
        **_summary(totals),
        "phases_median_ms": {k: round(median(v) * 1000, 1) for k, v in phases.items()},
    }


def bare_client(jobs: int) -> dict:
    """The same protocol calls and the same step, with nothing else around them."""
    work = STATE / "overhead-bare"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    totals = []
    with emulator("overhead-bare") as emu:
        pool = {"Authorization": f"token {emu.pool_token}"}
        with httpx.Client(base_url=emu.url, timeout=30) as http:
            for i in range(jobs + WARMUP):
                job_id = emu.create_job(steps=[{"name": "t", "run": STEP}])
                claim = http.get("/api/deployments/poll", headers=pool).json()
                job = {"Authorization": f"token {claim['jobToken']}"}
                http.post(
                    "/api/agent-workflows/deployment",
                    json={"jobID": job_id, "deploymentID": claim["deploymentID"]},
                    headers=pool,
                )
                http.get(f"/api/workflow/jobs/{job_id}", headers=job).raise_for_status()
                http.patch(
                    f"/api/workflow/jobs/{job_id}/1/status", json={"status": "running"}, headers=job
                ).raise_for_status()
                out = subprocess.run(
                    ["/bin/sh", "-c", STEP],
                    capture_output=True,
                    text=True,
                    cwd=work,
                    env={"PATH": "/usr/bin:/bin"},
                    check=True,
                )
                if i >= WARMUP:
                    totals.append(float(out.stdout) - emu.job(job_id)["claimed_at"])
    return _summary(totals)


def bare_docker_run(runs: int) -> dict:
    totals = []
    for i in range(runs + WARMUP):
        t0 = time.time()
        out = subprocess.run(
            [DOCKER, "run", "--rm", JOB_IMAGE, "sh", "-c", STEP],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        if i >= WARMUP:
            totals.append(float(out.stdout) - t0)
    return _summary(totals)


def engine_exec(runs: int, socket_path: str = "/var/run/docker.sock") -> dict:
    """Create + start (a keepalive, the engine's init, as the agent's job container), then one
    exec of the step, through the Engine API over its unix socket; timed from the create."""
    keepalive = 'trap "exit 0" TERM; while :; do sleep 3600 & wait; done'
    container = {
        "Image": JOB_IMAGE,
        "Entrypoint": ["/bin/sh", "-c"],
        "Cmd": [keepalive],
        "WorkingDir": "/",
        "HostConfig": {"Init": True},
    }
    step = {"Cmd": ["/bin/sh", "-c", STEP], "AttachStdout": True, "AttachStderr": True}
    totals = []
    transport = httpx.HTTPTransport(uds=socket_path)
    with httpx.Client(transport=transport, base_url="http://engine/v1.41", timeout=300) as api:
        for i in range(runs + WARMUP):
            t0 = time.time()
            created = api.post("/containers/create", json=container)
            created.raise_for_status()
            cid = created.json()["Id"]
            try:
                api.post(f"/containers/{cid}/start").raise_for_status()
                exec_id = api.post(f"/containers/{cid}/exec", json=step).json()["Id"]
                # Not a TTY: the output comes in frames, each after an 8-byte header.
                out = api.post(f"/exec/{exec_id}/start", json={"Detach": False, "Tty": False})
            finally:
                api.delete(f"/containers/{cid}", params={"force": 1})
            if i >= WARMUP:
                totals.append(float(out.content[8:]) - t0)
    return _summary(totals)


def profile(target: str, jobs: int = 10) -> dict:
    """The claim-to-step path in-process under cProfile: JobRunner.run with the real target
    against the emulator (the slot thread's work, on the main thread where cProfile sees it)."""
    from workflow_agent.client import Client
    from workflow_agent.config import validate_mapping
    from workflow_agent.jobdef import Claim
    from workflow_agent.jobs import Cancel, JobRunner
    from workflow_agent.targets import make_target

    work = tempfile.mkdtemp(prefix="profile-", dir=STATE)
    prof = cProfile.Profile()
    with emulator(f"profile-{target}") as emu:
        cfg = validate_mapping(
            {
                "token": emu.pool_token,
                "service_url": emu.url,
                "deploy_target": target,
                "pull_image": False,
                "shared_volume_directory": work,
            }
        )
        client = Client(cfg, env={})
        runner = JobRunner(cfg, client, make_target(cfg, "bench-profile"), instance="bench-profile")
        for _ in range(jobs):
            emu.create_job(steps=[{"name": "t", "run": STEP}], **_job_kw(target))
            claim = Claim.parse(client.call("GET", "/api/deployments/poll", route="poll").data)
            prof.enable()
            runner.run(claim, Cancel())
            prof.disable()
        client.close()
    shutil.rmtree(work, ignore_errors=True)
    stats = pstats.Stats(prof).stats  # {(file, line, func): (cc, nc, tottime, cumtime, callers)}
    per_job = {}
    for (file, _line, func), (_cc, _nc, _tt, cum, _callers) in stats.items():
        # The agent's functions, and the Docker SDK's API calls (one per engine request).
        for marker in ("workflow_agent/", "docker/api/"):
            if marker in file:
                short = marker.rstrip("/") + "/" + file.split(marker, 1)[1]
                per_job[f"{short}:{func}"] = round(cum / jobs * 1000, 1)
    top = dict(sorted(per_job.items(), key=lambda kv: -kv[1])[:16])
    leaves = sorted(((k, v[2]) for k, v in stats.items()), key=lambda kv: -kv[1])[:6]
    return {
        "jobs": jobs,
        "cumulative_ms_per_job": top,
        "top_self_time_ms_per_job": {
            f"{k[0].rsplit('/', 1)[-1]}:{k[2]}": round(v / jobs * 1000, 1) for k, v in leaves
        },
        "note": "JobRunner.run covers the whole job (step, log shipping, cleanup); "
        "prepare, _ack, the job_get call and _step_status are the claim-to-step part",
    }


def run(jobs: int, docker_ok: bool) -> dict:
    """One run: each agent figure, then its baseline (repeated runs interleave them)."""
    out: dict = {"jobs": jobs}
    out["process"] = agent_run("process", jobs)
    out["bare_client"] = bare_client(jobs)
    out["process_ratio"] = round(out["process"]["median_ms"] / out["bare_client"]["median_ms"], 2)
    if docker_ok:
        out["docker"] = agent_run("docker", jobs)
        out["bare_docker_run"] = bare_docker_run(jobs)
        out["engine_exec"] = engine_exec(jobs)
        ratio = out["docker"]["median_ms"] / out["bare_docker_run"]["median_ms"]
        out["docker_ratio"] = round(ratio, 2)
        ratio = out["docker"]["median_ms"] / out["engine_exec"]["median_ms"]
        out["docker_engine_exec_ratio"] = round(ratio, 2)
        ratio = out["engine_exec"]["median_ms"] / out["bare_docker_run"]["median_ms"]
        out["engine_exec_docker_run_ratio"] = round(ratio, 2)
    return out


def profiles(summary: dict) -> dict:
    """Where a figure's median missed its goal, what dominates the claim-to-step path."""
    out = {}
    if summary["process"]["median_ms"]["median"] > 50:
        out["process_profile"] = profile("process")
    if "docker_ratio" in summary and summary["docker_ratio"]["median"] > 1.15:
        out["docker_profile"] = profile("docker")
    return out
