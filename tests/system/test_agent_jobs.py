"""The job protocol (workflow_agent.jobs) in-process against the real emulator.

The target here is a scripted `Recorder` (a Target implementation): the real targets have their
own tests (agent/tests/targets); what is under test is the agent's side of the contract: what
it hands a target (env, steps, timeouts, labels, shell, working directories, the OIDC token),
how it reports target errors, that cleanup always runs, and what reaches the service (statuses,
logs, offsets, redaction). There is no job-level status call: the emulator derives a job's
outcome from its step reports, as the real service does, so every way a job ends must show
there as a failed step with the reason in its log.
"""

from __future__ import annotations

import threading

import pytest
from workflow_agent.client import Client
from workflow_agent.config import validate_mapping
from workflow_agent.jobdef import Claim
from workflow_agent.jobs import Cancel, JobRunner
from workflow_agent.metrics import Metrics
from workflow_agent.redaction import Redactor
from workflow_agent.targets.base import StepOutcome, Target, TargetError


class Recorder(Target):
    def __init__(
        self, *, prepare_error=None, outputs=None, outcomes=None, step_error=None, block=()
    ):
        self.calls: list[tuple] = []
        self.prepare_error = prepare_error
        self.outputs = outputs or {}
        self.outcomes = outcomes or {}
        self.step_error = step_error
        self.block = block  # steps that run until canceled
        self.started = threading.Event()
        self.jobs = []
        self.steps = []

    def prepare(self, job):
        self.calls.append(("prepare", job.job_id))
        self.jobs.append(job)
        if self.prepare_error:
            raise self.prepare_error

    def run_step(self, job, step, on_line, cancel):
        self.calls.append(("run_step", step.index))
        self.steps.append(step)
        if self.step_error:
            raise self.step_error
        for line in self.outputs.get(step.index, ()):
            on_line(line)
        if step.index in self.block:
            self.started.set()
            cancel.wait(120)
            return StepOutcome(None, "canceled", "canceled")
        return self.outcomes.get(step.index, StepOutcome(0, "exited"))

    def cleanup(self, job):
        self.calls.append(("cleanup", job.job_id))

    def cleanup_orphans(self):
        return 0


def runner_for(emu, target, *, host_env=None, **settings):
    cfg = validate_mapping(
        {
            "token": emu.pool_token,
            "service_url": emu.url,
            "request_retry_wait": "100ms",
            "request_retry_max_wait": "200ms",
            **settings,
        }
    )
    client = Client(cfg, env={})
    runner = JobRunner(
        cfg,
        client,
        target,
        instance="it-1",
        metrics=Metrics(),
        redactor=Redactor([emu.pool_token]),
        host_env=host_env or {},
        withheld=lambda: [emu.pool_token],
    )
    return runner, client


def claim_one(client) -> Claim:
    reply = client.call("GET", "/api/deployments/poll", route="poll")
    assert reply.status == 200
    return Claim.parse(reply.data)


def run_job(emu, target, steps, *, job_kw=None, **settings):
    job_id = emu.create_job(steps=steps, **(job_kw or {}))
    runner, client = runner_for(emu, target, **settings)
    claim = claim_one(client)
    assert claim.job_id == job_id
    result = runner.run(claim, Cancel())
    return result, emu.job(job_id), runner, claim


STEPS = [{"name": "one", "run": "a"}, {"name": "two", "run": "b"}]


def test_jobspec_handed_to_the_target(emu):
    target = Recorder()
    result, job, _, claim = run_job(
        emu,
        target,
        [
            {"name": "build", "run": "make", "timeout": "10m"},
            {"name": "test", "run": "make t", "workingDir": "src"},
        ],
        job_kw={
            "env": {"PLAIN": "v", "SECRET_ONE": {"secret": "hush-hush-1"}},
            "timeout": "1h",
            "image": "local/job:7",
            "shell": "bash",
        },
        env_forward_allowlist=["AWS_REGION", "MISSING"],
        host_env={"AWS_REGION": "eu-west-1", "HOME": "/root", "DOCKER_HOST": "tcp://d:2375"},
    )
    assert result == "succeeded" and job["status"] == "succeeded"
    [spec] = target.jobs
    assert spec.env == {
        "PLAIN": "v",
        "SECRET_ONE": "hush-hush-1",
        "AWS_REGION": "eu-west-1",
        "DOCKER_HOST": "tcp://d:2375",
    }
    assert spec.image == "local/job:7"
    assert spec.labels == {
        "workflow-agent/job-id": claim.job_id,
        "workflow-agent/run-id": claim.run_id,
        "workflow-agent/instance": "it-1",
    }
    assert [(s.index, s.name, s.run, s.workdir) for s in spec.steps] == [
        (1, "build", "make", ""),
        (2, "test", "make t", "src"),
    ]
    assert spec.shell == "bash"
    assert spec.oidc_token == claim.oidc_token and claim.oidc_token.count(".") == 2
    build, test = target.steps
    assert build.timeout == 600.0  # the step's own limit is the tighter one
    assert 3500 < test.timeout <= 3600  # no step limit: what is left of the job's hour
    assert target.calls[0] == ("prepare", claim.job_id)
    assert target.calls[-1] == ("cleanup", claim.job_id)


def test_prepare_target_error_fails_the_job_with_its_text_shipped(emu):
    target = Recorder(
        prepare_error=TargetError("image local/x:1 not found and pull_image is false")
    )
    result, job, _, _ = run_job(emu, target, STEPS)
    assert result == "failed"
    assert job["status"] == "failed"
    assert job["reason"] == (
        "step 1 (one) failed: [workflow-agent] error: "
        "image local/x:1 not found and pull_image is false"
    )
    assert job["steps"][0]["status"] == "failed"
    assert job["steps"][0]["logs"] == [
        "[workflow-agent] error: image local/x:1 not found and pull_image is false"
    ]
    assert job["steps"][1]["status"] == "not-started"
    assert [c[0] for c in target.calls] == ["prepare", "cleanup"]


def test_a_target_bug_fails_one_job_and_cleanup_still_runs(emu):
    target = Recorder(prepare_error=RuntimeError("boom"))
    result, job, _, _ = run_job(emu, target, STEPS)
    assert result == "failed"
    assert "agent internal error preparing the job: RuntimeError: boom" in job["reason"]
    assert target.calls[-1][0] == "cleanup"

    target = Recorder(step_error=TargetError("container vanished"))
    result, job, _, _ = run_job(emu, target, STEPS)
    assert result == "failed"
    assert job["steps"][0]["logs"][-1] == (
        "[workflow-agent] step 1 (one) failed: error: container vanished"
    )
    assert [c[0] for c in target.calls] == ["prepare", "run_step", "cleanup"]


@pytest.mark.parametrize(
    ("outcome", "line"),
    [
        (StepOutcome(2, "exited"), "step 1 (one) failed: exit code 2"),
        (StepOutcome(None, "timeout"), "job timed out in step 1 (one)"),  # the job's hour
        (StepOutcome(None, "timeout", "10m"), "step 1 (one) timed out (10m)"),
    ],
)
def test_failed_steps_stop_the_job(emu, outcome, line):
    target = Recorder(outputs={1: ["working"]}, outcomes={1: outcome})
    steps = [{**STEPS[0], "timeout": outcome.detail}, STEPS[1]] if outcome.detail else STEPS
    result, job, _, _ = run_job(emu, target, steps)
    assert result == "failed" and job["reason"] == f"step 1 (one) failed: [workflow-agent] {line}"
    assert [s["status"] for s in job["steps"]] == ["failed", "not-started"]
    assert job["steps"][0]["logs"][0] == "working"
    assert line in job["steps"][0]["logs"][-1]
    assert ("run_step", 2) not in target.calls


def test_secrets_and_tokens_are_redacted_from_shipped_lines(emu):
    target = Recorder()
    job_id = emu.create_job(steps=STEPS, env={"S": {"secret": "hush-hush-2"}})
    runner, client = runner_for(emu, target)
    claim = claim_one(client)
    target.outputs = {
        1: [
            "secret=hush-hush-2",
            f"jobtoken={claim.job_token}",
            f"oidc={claim.oidc_token}",
            f"pool={emu.pool_token}",
        ]
    }
    assert runner.run(claim, Cancel()) == "succeeded"
    assert emu.job(job_id)["steps"][0]["logs"] == [
        "secret=[secret]",
        "jobtoken=[secret]",
        "oidc=[secret]",
        "pool=[secret]",
    ]
    # Job secrets are forgotten after the job; the pool token stays masked.
    assert runner.redactor("hush-hush-2") == "hush-hush-2"
    assert runner.redactor(emu.pool_token) == "[secret]"


def test_thousands_of_lines_arrive_in_order_with_offsets(emu):
    lines = [f"line {i}" for i in range(2345)]
    target = Recorder(outputs={2: lines})
    result, job, _, _ = run_job(emu, target, STEPS)
    assert result == "succeeded"
    assert job["steps"][1]["logs"] == lines
    assert job["steps"][0]["logs"] == []


def test_a_batch_that_landed_without_an_answer_is_not_duplicated(emu):
    """The service stored the first batch but the answer was lost: 409 expectedOffset."""
    target = Recorder(outputs={1: ["a", "b"]})
    job_id = emu.create_job(steps=STEPS)
    runner, client = runner_for(emu, target)
    claim = claim_one(client)
    client.call(
        "POST",
        f"/api/workflow/jobs/{job_id}/1/logs",
        route="job_logs",
        json_body={
            "offset": 0,
            "lines": [
                {"t": "2024-01-01T00:00:00Z", "l": "a"},
                {"t": "2024-01-01T00:00:00Z", "l": "b"},
            ],
        },
        job_token=claim.job_token,
    )
    assert runner.run(claim, Cancel()) == "succeeded"
    assert emu.job(job_id)["steps"][0]["logs"] == ["a", "b"]


def test_a_type_that_is_not_enabled_is_refused(emu):
    target = Recorder()
    result, job, _, _ = run_job(emu, target, STEPS, enabled_workflow_types=["insights_scan"])
    assert result == "failed"
    assert "workflow type 'deployment' is not enabled" in job["reason"]
    assert target.calls == []


def test_a_refused_job_definition_fails_the_first_step_with_the_reason(emu):
    """A definition the agent cannot use (here a `shell` that is no program name): the service
    learns why from step 1, the first step that cannot run; step 0 is never reported."""
    target = Recorder()
    result, job, _, _ = run_job(emu, target, STEPS, job_kw={"shell": "bash -e {0}"})
    assert result == "failed" and target.calls == []
    assert [s["status"] for s in job["steps"]] == ["failed", "not-started"]
    assert job["steps"][0]["logs"] == [
        "[workflow-agent] error: refused the job definition: shell: 'bash -e {0}' is not a "
        "program name or path"
    ]
    assert job["status"] == "failed"


def test_a_service_side_skip_stops_the_job_without_inventing_failures(emu):
    """`skipped` (a fresher deployment is queued) cancels the job; the running step reports
    how it ended, the later ones stay not-started, and the service's status stands."""
    target = Recorder(block=(1,))
    job_id = emu.create_job(steps=STEPS)
    runner, client = runner_for(emu, target, job_status_loop_interval="1s")
    claim = claim_one(client)
    results: list[str] = []
    thread = threading.Thread(target=lambda: results.append(runner.run(claim, Cancel())))
    thread.start()
    assert target.started.wait(60)
    emu.cancel(job_id, "a fresher deployment is queued", status="skipped")
    thread.join(60)
    assert results == ["canceled"]
    job = emu.job(job_id)
    assert job["status"] == "skipped" and job["reason"] == "a fresher deployment is queued"
    assert [s["status"] for s in job["steps"]] == ["failed", "not-started"]
    assert job["steps"][0]["logs"] == [
        "[workflow-agent] step canceled: the service reports the job skipped"
    ]


def test_a_bad_job_token_fails_cleanly(emu):
    target = Recorder()
    emu.create_job(steps=STEPS)
    runner, client = runner_for(emu, target)
    claim = claim_one(client)
    forged = Claim(claim.job_id, "forged-token", claim.run_id, claim.type_specific_id)
    assert runner.run(forged, Cancel()) == "failed"
    assert target.calls == []


def test_an_agent_side_cancel_before_a_step_fails_that_step(emu):
    """The agent stops (drain timeout, SIGQUIT): the service cannot know, so the step that will
    not run is reported failed, with the reason."""
    target = Recorder()
    emu.create_job(steps=STEPS)
    runner, client = runner_for(emu, target)
    claim = claim_one(client)
    cancel = Cancel()
    cancel.set("the agent is stopping")
    assert runner.run(claim, cancel) == "canceled"
    job = emu.job(claim.job_id)
    assert job["status"] == "failed"
    assert job["reason"] == (
        "step 1 (one) failed: [workflow-agent] error: canceled: the agent is stopping"
    )
    assert (
        runner.metrics.value(
            "workflow_agent_jobs_total", {"type": "deployment", "result": "canceled"}
        )
        == 1
    )
