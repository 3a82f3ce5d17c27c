"""The job protocol, run for one claimed job (docs/protocol.md, "Job lifecycle").

ack → fetch the definition with the job token → prepare the target → for each step ≥ 1:
status running, output shipped as logs, status succeeded|failed → cleanup (always). Meanwhile a
watch thread heartbeats and checks the deployment's status, and cancels the target when the
service says the job failed, was canceled or skipped.

There is no job-level status call: the real service has none (docs/protocol.md). The step
reports carry the outcome, so whatever ends a job early must reach the service as a failed
step: a definition the agent cannot use, a target that cannot start the job, a job timeout or an
agent-side cancel fail the first step that cannot run, with the reason in that step's log.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from workflow_agent import trust
from workflow_agent.client import AbortedError, Client, ServiceError
from workflow_agent.clock import Clock
from workflow_agent.config import AgentConfig
from workflow_agent.executor import ExecutorCache, ExecutorError
from workflow_agent.health import Health
from workflow_agent.jobdef import BadPayload, Claim, build_env, job_image, parse_definition
from workflow_agent.logship import LogShipper
from workflow_agent.redaction import Redactor
from workflow_agent.targets.base import (
    LABEL_INSTANCE,
    LABEL_JOB,
    LABEL_RUN,
    JobSpec,
    Step,
    StepOutcome,
    Target,
    TargetError,
)

logger = logging.getLogger(__name__)

HEARTBEAT_MAX = 30.0  # seconds; the service fails a job after 10 minutes without one
# Deployment statuses that end a running job [SPEC JobStatus]; "skipped": a fresher deployment
# is queued. "canceled" is not in the enum; tolerated all the same.
CANCEL_STATUSES = frozenset({"failed", "skipped", "canceled", "cancelled"})
FIRST_STEP = 1  # step 0 is reserved for the source checkout; the runner never runs it [RE]
# The agent's environment variable that replaces every job's image [REPO CHANGELOG 1.3.5].
OVERRIDE_IMAGE_ENV = "PULUMI_DEPLOY_OVERRIDE_IMAGE_REFERENCE"


class Cancel:
    """A request to stop a job, and why. Targets watch `event`. `by_service`: the service ended
    the job (it knows); otherwise the agent did (drain, shutdown) and must tell it."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason = ""
        self.by_service = False

    def set(self, reason: str, *, by_service: bool = False) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.by_service = by_service
            self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()


class Watch:
    """Heartbeats every min(30s, job_status_loop_interval); status check every interval."""

    def __init__(self, runner: JobRunner, claim: Claim, cancel: Cancel, log) -> None:
        self.runner = runner
        self.claim = claim
        self.cancel = cancel
        self.log = log
        self.clock = runner.clock
        self.status_every = runner.cfg.job_status_loop_interval.total_seconds()
        self.heartbeat_every = min(HEARTBEAT_MAX, self.status_every)
        now = self.clock.monotonic()
        self.next_heartbeat = now
        self.next_status = now + self.status_every
        self.stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> float:
        """Do what is due; return the seconds until the next thing is due."""
        now = self.clock.monotonic()
        if now >= self.next_heartbeat:
            self.next_heartbeat = now + self.heartbeat_every
            self.heartbeat()
        if now >= self.next_status:
            self.next_status = now + self.status_every
            self.check_status()
        return max(0.0, min(self.next_heartbeat, self.next_status) - self.clock.monotonic())

    def heartbeat(self) -> None:
        try:
            self.runner.client.call(
                "POST",
                f"/api/workflow/jobs/{self.claim.job_id}/heartbeat",
                route="job_heartbeat",
                json_body={},
                job_token=self.claim.job_token,
                bypass_breaker=True,
                cancel=self.stopped,
            )
        except AbortedError:
            return  # the job ended while the heartbeat waited to retry
        except ServiceError as exc:
            self.log.warning("heartbeat failed: %s", exc)
            return
        self.runner.touch()

    def check_status(self) -> None:
        if self.claim.type != "deployment" or not self.claim.type_specific_id:
            return  # the status endpoint is the deployments one
        try:
            reply = self.runner.client.call(
                "GET",
                f"/api/deployments/{self.claim.type_specific_id}/status",
                route="deployment_status",
                bypass_breaker=True,
                cancel=self.stopped,
            )
        except AbortedError:
            return
        except ServiceError as exc:
            self.log.warning("status check failed: %s", exc)
            return
        self.runner.touch()
        status = reply.data.get("status") if isinstance(reply.data, dict) else reply.data
        if isinstance(status, str) and status.lower() in CANCEL_STATUSES:
            self.log.warning("the service reports the job %s: canceling it", status)
            self.cancel.set(f"the service reports the job {status}", by_service=True)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="watch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self.stopped.is_set():
            delay = self.tick()
            if self.clock.wait(self.stopped, delay):
                return

    def stop(self) -> None:
        self.stopped.set()
        if self._thread is not None:
            self._thread.join()


class JobRunner:
    def __init__(
        self,
        cfg: AgentConfig,
        client: Client,
        target: Target,
        *,
        instance: str,
        clock: Clock | None = None,
        metrics=None,
        health: Health | None = None,
        redactor: Redactor | None = None,
        host_env: Mapping[str, str] | None = None,
        withheld: Callable[[], Iterable[str]] = lambda: (),
        executors: ExecutorCache | None = None,
    ) -> None:
        self.cfg = cfg
        self.client = client
        self.target = target
        self.instance = instance
        self.clock = clock or client.clock
        self.metrics = metrics
        self.health = health
        self.redactor = redactor or Redactor()
        self.host_env = os.environ if host_env is None else host_env
        self.withheld = withheld
        self.executors = executors

    def touch(self) -> None:
        if self.health is not None:
            self.health.touch()

    def run(self, claim: Claim, cancel: Cancel) -> str:
        """Run one claimed job to the end. Returns "succeeded", "failed" or "canceled"."""
        log = logging.LoggerAdapter(logger, {"job": claim.job_id, "run": claim.run_id})
        secrets = [claim.job_token, claim.oidc_token]
        self.redactor.add(secrets)
        if self.metrics is not None:
            self.metrics.busy_slots.labels(claim.type).inc()
        log.info("job claimed (%s %s)", claim.type, claim.type_specific_id)
        watch = None
        try:
            if claim.type == "deployment":
                self._ack(claim, log)
            watch = Watch(self, claim, cancel, log)
            watch.start()
            result, reason = self._run(claim, cancel, log, secrets)
        except Exception as exc:  # a bug must fail one job, not kill the slot
            log.exception("internal error")
            result, reason = "failed", f"agent internal error: {type(exc).__name__}"
        finally:
            if watch is not None:
                watch.stop()
        log.info("job %s%s", result, f": {self.redactor(reason)}" if reason else "")
        self.redactor.remove(secrets)
        if self.metrics is not None:
            self.metrics.busy_slots.labels(claim.type).dec()
            self.metrics.jobs.labels(claim.type, result).inc()
        return result

    def _ack(self, claim: Claim, log) -> None:
        try:
            self.client.call(
                "POST",
                "/api/agent-workflows/deployment",
                route="ack",
                json_body={"jobID": claim.job_id, "deploymentID": claim.type_specific_id},
                bypass_breaker=True,
            )
        except ServiceError as exc:
            # The claim is ours either way (claims are never redelivered): run it.
            log.warning("ack failed: %s", exc)

    def _run(self, claim: Claim, cancel: Cancel, log, secrets: list[str]) -> tuple[str, str]:
        if claim.type not in self.cfg.enabled_workflow_types:
            # Only enabled types are asked for; a server that hands out others gets a clear no.
            text = f"workflow type {claim.type!r} is not enabled on this agent"
            return self._not_run(claim, FIRST_STEP, text, log)
        try:
            reply = self.client.call(
                "GET",
                f"/api/workflow/jobs/{claim.job_id}",
                route="job_get",
                job_token=claim.job_token,
                bypass_breaker=True,
            )
        except ServiceError as exc:
            return self._not_run(claim, FIRST_STEP, f"cannot fetch the job definition: {exc}", log)
        try:
            definition = parse_definition(reply.data)
        except BadPayload as exc:
            return self._not_run(claim, FIRST_STEP, f"refused the job definition: {exc}", log)
        self.redactor.add(definition.secrets)
        secrets.extend(definition.secrets)
        env, refused = build_env(
            definition.env, self.cfg.env_forward_allowlist, self.host_env, self.withheld()
        )
        for name in refused:
            log.warning("not forwarding %s: it holds the agent's own credential", name)
        steps = tuple(
            Step(s.index, s.name, s.run, s.timeout, workdir=s.working_dir) for s in definition.steps
        )
        image = job_image(
            definition, self.cfg.default_image, self.host_env.get(OVERRIDE_IMAGE_ENV, "")
        )
        if image != definition.image:
            log.info("job image %s (the job named %r)", image, definition.image)
        executor = ""
        if claim.type == "deployment" and self.executors is not None:
            try:
                executor = self.executors.path()
            except ExecutorError as exc:
                return self._not_run(claim, FIRST_STEP, str(exc), log)
        ca_bundle = b""
        if self.cfg.job_ca_bundle:
            try:
                ca_bundle = trust.bundle(self.cfg.ca_bundle, self.host_env)
            except OSError as exc:
                text = f"job_ca_bundle: cannot read {exc.filename}: {exc.strerror}"
                return self._not_run(claim, FIRST_STEP, text, log)
        spec = JobSpec(
            job_id=claim.job_id,
            run_id=claim.run_id,
            image=image,
            executor=executor,
            ca_bundle=ca_bundle,
            image_credentials=definition.credentials,
            env=env,
            steps=steps,
            shell=definition.shell,
            oidc_token=claim.oidc_token,
            labels={
                LABEL_JOB: claim.job_id,
                LABEL_RUN: claim.run_id,
                LABEL_INSTANCE: self.instance,
            },
        )
        deadline = None
        if definition.timeout is not None:
            deadline = self.clock.monotonic() + definition.timeout
        try:
            try:
                self.target.prepare(spec)
            except TargetError as exc:
                return self._setup_failed(claim, spec, str(exc), log)
            except Exception as exc:
                log.exception("target prepare failed")
                text = f"agent internal error preparing the job: {type(exc).__name__}: {exc}"
                return self._setup_failed(claim, spec, text, log)
            for step in steps:
                if cancel.is_set():
                    if not cancel.by_service:  # the service cannot know: fail the step
                        self._not_run(claim, step.index, f"canceled: {cancel.reason}", log)
                    return "canceled", cancel.reason
                timeout, by_job = step.timeout, False
                if deadline is not None:
                    remaining = deadline - self.clock.monotonic()
                    if timeout is None or remaining < timeout:
                        timeout, by_job = remaining, True
                if timeout is not None and timeout <= 0:
                    return self._setup_failed(
                        claim, replace(spec, steps=(step,)), "job timed out", log
                    )
                outcome, why = self._step(
                    claim, spec, replace(step, timeout=timeout), cancel, log, by_job
                )
                if outcome.succeeded:
                    continue
                if cancel.is_set():
                    return "canceled", cancel.reason
                return "failed", why
            return "succeeded", ""
        finally:
            try:
                self.target.cleanup(spec)
            except Exception:  # cleanup must never raise; if it does, say so and go on
                log.exception("target cleanup failed")

    def _step(
        self, claim: Claim, spec: JobSpec, step: Step, cancel: Cancel, log, by_job: bool
    ) -> tuple[StepOutcome, str]:
        """Run one step and report it; its outcome and, when it failed, why (the last line of
        its log: what the service shows as the job's reason)."""
        log.info("step %d (%s) running", step.index, step.name)
        self._step_status(claim, step.index, "running", log)
        shipper = self._shipper(claim, step.index)
        shipper.start()
        try:
            outcome = self.target.run_step(spec, step, shipper.add, cancel.event)
        except TargetError as exc:
            outcome = StepOutcome(None, "error", str(exc))
        except Exception as exc:
            log.exception("target run_step failed")
            outcome = StepOutcome(None, "error", f"agent internal error: {type(exc).__name__}")
        why = ""
        if not outcome.succeeded:
            if outcome.reason == "canceled" or cancel.is_set():
                why = f"step canceled: {cancel.reason or outcome.detail}"
            elif outcome.reason == "timeout" and by_job:
                why = f"job timed out in step {step.index} ({step.name})"
            elif outcome.reason == "timeout":
                detail = f" ({outcome.detail})" if outcome.detail else ""
                why = f"step {step.index} ({step.name}) timed out{detail}"
            else:
                why = f"step {step.index} ({step.name}) failed: {_describe(outcome)}"
            shipper.add(f"[workflow-agent] {why}")
        shipper.close()
        status = "succeeded" if outcome.succeeded else "failed"
        self._step_status(claim, step.index, status, log)
        log.info("step %d (%s) %s", step.index, step.name, status)
        return outcome, why

    def _setup_failed(self, claim: Claim, spec: JobSpec, text: str, log) -> tuple[str, str]:
        """A job that fails before a step runs: the reason goes to the first step's log."""
        if not spec.steps:
            log.error("job failed: %s", text)
            return "failed", text
        return self._not_run(claim, spec.steps[0].index, text, log)

    def _not_run(self, claim: Claim, index: int, text: str, log) -> tuple[str, str]:
        """Report step `index`, which cannot run, as failed with `text` in its log: the only way
        the service learns why the job ended (there is no job-level status call)."""
        log.error("job failed: step %d cannot run: %s", index, text)
        self._step_status(claim, index, "running", log)
        shipper = self._shipper(claim, index)
        shipper.add(f"[workflow-agent] error: {text}")
        shipper.close()
        self._step_status(claim, index, "failed", log)
        return "failed", text

    def _shipper(self, claim: Claim, step: int) -> LogShipper:
        return LogShipper(
            self.client, claim.job_id, claim.job_token, step, redact=self.redactor, clock=self.clock
        )

    def _step_status(self, claim: Claim, index: int, status: str, log) -> None:
        try:
            self.client.call(
                "PATCH",
                f"/api/workflow/jobs/{claim.job_id}/{index}/status",
                route="step_status",
                json_body={"status": status},
                job_token=claim.job_token,
                bypass_breaker=True,
            )
        except ServiceError as exc:
            log.warning("step %d status %s not reported: %s", index, status, exc)


def _describe(outcome: StepOutcome) -> str:
    if outcome.reason == "exited":
        return f"exit code {outcome.exit_code}"
    if outcome.reason == "timeout":
        return "timed out" + (f" ({outcome.detail})" if outcome.detail else "")
    return outcome.reason + (f": {outcome.detail}" if outcome.detail else "")
