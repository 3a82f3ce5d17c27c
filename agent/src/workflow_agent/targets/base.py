"""The one interface every execution target implements (docker, kubernetes, process).

The agent owns the job protocol (steps, status, logs, heartbeats); a target only executes and
reports what happened. Order of calls for one job:
    prepare(job) -> run_step(job, step, ...) for each step -> cleanup(job)   (cleanup always runs)

`BaseTarget` holds the run_step skeleton the three targets share (refusal, time limit, output
streaming, timeout/cancel outcomes); each target supplies only how a step starts (`StepRun`).
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

LABEL_JOB = "workflow-agent/job-id"
LABEL_RUN = "workflow-agent/run-id"
LABEL_INSTANCE = "workflow-agent/instance"
DEFAULT_SHELL = "/bin/sh"
# What a job is given (docs/protocol.md, "Job runtime"). The claim's oidcToken reaches a job's
# steps as PULUMI_OIDC_TOKEN and as the file /mnt/pulumi/pulumi.oidc [DOC]. The docker and
# kubernetes targets keep it out of the container's config and the pod spec: it goes to the file
# (tmpfs) over an exec's stdin, and each step's wrapper exports the variable from the file.
OIDC_TOKEN_ENV = "PULUMI_OIDC_TOKEN"  # noqa: S105 - a name
OIDC_TOKEN_DIR = "/mnt/pulumi"  # noqa: S105 - a path
OIDC_TOKEN_PATH = OIDC_TOKEN_DIR + "/pulumi.oidc"
# Writes one line of stdin (the token) to $1 with mode 0600, as the job's own user: run in the
# job container by the docker and kubernetes targets.
WRITE_TOKEN_SCRIPT = 'umask 077 && IFS= read -r t && printf "%s" "$t" > "$1"'  # noqa: S105
# /PULUMI_ENV [DOC]: NAME=value lines a step appends reach the later steps. PULUMI_ENV names the
# file in every target (the process target has no container root: a per-job file).
PULUMI_ENV_VAR = "PULUMI_ENV"
PULUMI_ENV_PATH = "/PULUMI_ENV"
# The deployment executor [SPEC GetPulumiDeployExecutor], placed by the target in the job's work
# volume (where is not public: [ASSUMED]); PULUMI_DEPLOY_EXECUTOR names its path in the job.
EXECUTOR_ENV = "PULUMI_DEPLOY_EXECUTOR"
EXECUTOR_DIR = ".pulumi-deploy"
EXECUTOR_NAME = "pulumi-deploy-executor"


@dataclass(frozen=True)
class Step:
    index: int  # 1..N: step 0 is skipped by the agent before it reaches a target
    name: str
    run: str  # a script for the job's shell (JobSpec.shell)
    timeout: float | None = None  # seconds, already min(step timeout, remaining job time)
    # Where the step runs: "" is the job's work directory; a relative path is relative to it.
    workdir: str = ""


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    run_id: str
    image: str
    # (username, password); never logged. repr=False keeps it out of tracebacks and debug logs.
    image_credentials: tuple[str, str] | None = field(default=None, repr=False)
    # The final job env, computed by the agent: job env + allowlisted host vars + DOCKER_HOST.
    env: dict[str, str] = field(default_factory=dict, repr=False)
    steps: tuple[Step, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    shell: str = ""  # the JobDefinition's `shell` (a name on PATH or a path); "" is /bin/sh
    oidc_token: str = field(default="", repr=False)  # the claim's oidcToken ("" when none)
    # The deployment executor on the agent's host (a cached file), placed in the job by the
    # target; "" for jobs that have none (non-deployment workflows).
    executor: str = ""
    # With `job_ca_bundle`: every CA the agent trusts, one PEM bundle the target hands the job
    # (trust.JOB_CA_VARS name it); b"" otherwise.
    ca_bundle: bytes = field(default=b"", repr=False)

    @property
    def shell_or_default(self) -> str:
        return self.shell or DEFAULT_SHELL


@dataclass(frozen=True)
class StepOutcome:
    exit_code: int | None  # None when the step was killed
    reason: str  # "exited" | "timeout" | "canceled" | "error"
    detail: str = ""

    @property
    def succeeded(self) -> bool:
        return self.reason == "exited" and self.exit_code == 0


def refuse_step(prepared: bool, step: Step, cancel: threading.Event) -> StepOutcome | None:
    """The outcome of a step that must not start (every target's run_step asks first), or None."""
    if not prepared:
        return StepOutcome(None, "error", "the job was not prepared (or already cleaned up)")
    if cancel.is_set():
        return StepOutcome(None, "canceled", "canceled before the step started")
    if step.timeout is not None and step.timeout <= 0:
        return StepOutcome(None, "timeout", "no time left for this step")
    return None


class TargetError(Exception):
    """A clear, job-level error, e.g. 'image local/x:1 not found and pull_image is false'."""


class Target(abc.ABC):
    @abc.abstractmethod
    def prepare(self, job: JobSpec) -> None:
        """Pull the image, create the container, pod or work dir. TargetError on failure."""

    @abc.abstractmethod
    def run_step(
        self,
        job: JobSpec,
        step: Step,
        on_line: Callable[[str], None],
        cancel: threading.Event,
    ) -> StepOutcome:
        """Run one step; stream its output lines (no trailing newline) to on_line.

        Kills the step on timeout or when `cancel` is set: TERM, a grace period, then KILL.
        """

    @abc.abstractmethod
    def cleanup(self, job: JobSpec) -> None:
        """Remove everything prepare/run_step made. Always called, idempotent, never raises."""

    @abc.abstractmethod
    def cleanup_orphans(self) -> int:
        """At agent start: remove leftovers this agent instance labelled. Returns the count."""


class StepRun(abc.ABC):
    """One started step, as a target runs it (returned by `BaseTarget._start_step`)."""

    # How a timed out or canceled step was stopped: the end of its outcome's detail.
    stopped = "its processes were terminated"

    @abc.abstractmethod
    def pump(self, deadline: float | None, cancel: threading.Event) -> str:
        """Stream output until the step ends: "exited", "timeout" or "canceled".

        On timeout (monotonic `deadline`) or cancel: TERM, keep streaming what the step prints
        while it shuts down, KILL after the grace period.
        """

    @abc.abstractmethod
    def end(self, abandoned: bool) -> None:
        """Release the step's streams. `abandoned`: pump raised (on_line did), so first stop
        what still runs."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Hand on the last output line when it had no newline."""

    @abc.abstractmethod
    def exited(self) -> StepOutcome:
        """The outcome of a step that ended by itself."""


class BaseTarget(Target):
    """run_step for targets that run a step as a process they stream and signal."""

    def run_step(
        self,
        job: JobSpec,
        step: Step,
        on_line: Callable[[str], None],
        cancel: threading.Event,
    ) -> StepOutcome:
        state = self._step_state(job)
        refused = refuse_step(state is not None, step, cancel)
        if refused:
            return refused
        started = self._start_step(state, job, step, on_line)
        if isinstance(started, StepOutcome):  # it could not start
            return started
        deadline = None if step.timeout is None else time.monotonic() + step.timeout
        reason = "error"
        try:
            reason = started.pump(deadline, cancel)
        finally:
            started.end(abandoned=reason == "error")
        started.flush()
        if reason != "exited":
            what = f"step timed out after {step.timeout:g}s" if reason == "timeout" else "canceled"
            return StepOutcome(None, reason, f"{what}; {started.stopped}")
        return started.exited()

    @abc.abstractmethod
    def _step_state(self, job: JobSpec):
        """The prepared job's state, or None when a step cannot run (not prepared, cleaned up)."""

    @abc.abstractmethod
    def _start_step(
        self, state, job: JobSpec, step: Step, on_line: Callable[[str], None]
    ) -> StepRun | StepOutcome:
        """Start the step, its output going to on_line; an "error" outcome when it cannot."""
