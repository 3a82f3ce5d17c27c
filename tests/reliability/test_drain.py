"""Drain: SIGTERM while jobs run. Every running job completes and is reported succeeded, nothing
is claimed after the signal (deployment and lease pollers alike, with work still queued), and
the agent exits 0 without reaching drain_timeout. Extends tests/system/test_agent_e2e.py
(one slot, process target) to busy slots of both kinds, and to the docker target.
"""

from __future__ import annotations

import signal

import pytest
from rel_harness import JOB_IMAGE, WAIT, AgentProcess, assert_no_crash, docker_available, wait_for

# The step waits for a file named `gate` in the per-job dir (the process target's working
# directory; the docker target bind-mounts it at /mnt/workflow, steps running in /), so the test
# releases each job by creating that file.
GATED = [
    {
        "name": "gated",
        "run": "w=/mnt/workflow; [ -d $w ] || w=.; "
        "echo started; while [ ! -e $w/gate ]; do sleep 0.1; done; echo done",
    }
]


def job_workdirs(agent: AgentProcess) -> list:
    return sorted((agent.dir / "jobs").glob("workflow-agent-job-*/work"))


def release(agent: AgentProcess, count: int) -> None:
    dirs = wait_for(
        lambda: (d := job_workdirs(agent)) and len(d) == count and d, what=f"{count} job dirs"
    )
    for work in dirs:
        (work / "gate").touch()


def claims_of(emu, agent: AgentProcess) -> int:
    [record] = [a for a in emu.agents(online_within=None) if a["id"].endswith("/" + agent.name)]
    return record["claims"]


def drain_and_check(emu, agent: AgentProcess, running: list[str], queued: list[str]) -> None:
    wait_for(
        lambda: all(emu.job(j)["status"] == "running" for j in running),
        timeout=WAIT * 2,
        what="jobs running",
    )
    claimed = claims_of(emu, agent)
    agent.signal(signal.SIGTERM)
    wait_for(lambda: agent.get("/readyz")[0] == 503, what="draining")
    release(agent, len(running))
    assert agent.wait() == 0, agent.stderr[-3000:]

    for job_id in running:
        job = emu.job(job_id)
        assert job["status"] == "succeeded", job
        assert job["steps"][0]["logs"] == ["started", "done"]
    for job_id in queued:
        job = emu.job(job_id)
        assert job["status"] == "not-started" and job["claims"] == [], job
    assert claims_of(emu, agent) == claimed  # not one claim after the signal
    assert "drain_timeout reached" not in agent.stderr
    assert_no_crash(agent)


def test_drain_with_every_slot_busy_and_work_queued(emu, agents, tmp_path):
    agent = AgentProcess(
        emu,
        tmp_path,
        "drainer",
        slots=2,
        drain_timeout="10m",
        enabled_workflow_types=["deployment", "insights_scan", "policy_evaluation"],
    )
    agents.append(agent.start())
    running = [emu.create_job(steps=GATED) for _ in range(2)]
    running += [emu.create_job(steps=GATED, type="insights_scan") for _ in range(2)]
    wait_for(
        lambda: all(emu.job(j)["status"] == "running" for j in running),
        timeout=WAIT * 2,
        what="4 slots busy",
    )
    queued = [
        emu.create_job(steps=[{"name": "later", "run": "true"}]),
        emu.create_job(steps=[{"name": "later", "run": "true"}], type="policy_evaluation"),
    ]
    drain_and_check(emu, agent, running, queued)


def test_drain_of_a_docker_job_completes_it_and_removes_its_container(emu, agents, tmp_path):
    reason = docker_available()
    if reason:
        pytest.skip(reason)
    import docker

    agent = AgentProcess(
        emu,
        tmp_path,
        "docker-drainer",
        deploy_target="docker",
        pull_image=False,
        drain_timeout="10m",
    )
    agents.append(agent.start())
    running = [emu.create_job(steps=GATED, image=JOB_IMAGE)]
    queued = [emu.create_job(steps=[{"name": "later", "run": "true"}], image=JOB_IMAGE)]
    drain_and_check(emu, agent, running, queued)
    client = docker.from_env()
    left = client.containers.list(
        all=True, filters={"label": f"workflow-agent/job-id={running[0]}"}
    )
    assert left == []
