"""`deploy_target: process` (extension): steps run as child processes of the agent.

For hosts without Docker or Kubernetes (macOS runners, small VMs).

**No isolation beyond the agent's own user.** A job runs with the agent's uid and gid, sees the
host's filesystem, network and processes, and can read anything the agent's user can read (the
agent's config file with the pool token included, unless the file is owned by another user).
Use it only for trusted workloads, on hosts dedicated to the agent, with the agent running as an
unprivileged user. What it does give you:

- Each job gets a fresh directory `<shared_volume_directory or OS temp>/workflow-agent-job-*/work`
  (mode 0700). Steps run there (or in their `workingDir`, relative to it), one after another,
  with `<shell> -c <step>` (the job's `shell`, default /bin/sh, looked up on the job's PATH), so
  files persist between steps. The directory is deleted when the job ends.
- The claim's OIDC token is in `pulumi.oidc` (mode 0600) next to `work/`, named by
  `PULUMI_OIDC_TOKEN_FILE`.
- The environment is exactly the job's (`JobSpec.env`: job variables, allowlisted host
  variables, DOCKER_HOST), plus `HOME` (the job directory) and a plain `PATH`
  (`/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin`, with `/opt/homebrew/bin` first on macOS);
  a job variable of the same name wins, so allowlist `PATH` to hand the agent's PATH on.
  Nothing else from the agent's environment reaches a step.
- Every step starts its own session and process group. Timeout and cancel send SIGTERM to the
  whole group, wait the grace period, then send SIGKILL. Whatever a step left running in its
  group is killed the same way when the job ends. A program that starts its own session
  (`setsid`, daemons) leaves the group and escapes this: there is no cgroup here.
- The process groups are recorded in the job's `owner.json`, so an agent restarted after a crash
  kills what its previous run left (checked against the process start time, so a recycled pid
  is never signalled) and deletes the directories (`cleanup_orphans`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from workflow_agent.targets import _jobdir, _procs
from workflow_agent.targets._lines import LineSplitter
from workflow_agent.targets.base import (
    OIDC_TOKEN_ENV,
    BaseTarget,
    JobSpec,
    Step,
    StepOutcome,
    StepRun,
    TargetError,
)

if TYPE_CHECKING:
    from workflow_agent.config import AgentConfig

log = logging.getLogger(__name__)

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
if sys.platform == "darwin":
    DEFAULT_PATH = "/opt/homebrew/bin:" + DEFAULT_PATH
GRACE_SECONDS = 10.0
# After a step's shell exits, background children may still hold its output pipe; read what they
# print for this long, then report the step (Docker's exec does the same with 2 s).
DRAIN_SECONDS = 2.0
_TICK = 0.1


@dataclass
class _Job:
    jobdir: _jobdir.JobDir
    groups: list[dict] = field(default_factory=list)


class _ProcessStep(StepRun):
    """A step's shell, in its own process group, its output on one pipe."""

    def __init__(self, proc: subprocess.Popen, splitter: LineSplitter, grace: float) -> None:
        self._proc = proc
        self._splitter = splitter
        self._grace = grace
        self.stopped = f"process group {proc.pid} terminated"

    def pump(self, deadline: float | None, cancel: threading.Event) -> str:
        # Output printed while the step shuts down (a trap on TERM) still reaches the log.
        proc, splitter = self._proc, self._splitter
        fd = proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        eof = False
        exited_at = None
        reason = None
        term_at = None
        killed = False
        try:
            while True:
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if reason is None:
                    if exited_at is not None and (eof or now - exited_at >= DRAIN_SECONDS):
                        return "exited"
                    if cancel.is_set():
                        reason = "canceled"
                    elif deadline is not None and now >= deadline:
                        reason = "timeout"
                    if reason is not None:
                        term_at = now
                        _procs.signal_group(proc.pid, signal.SIGTERM)
                else:
                    gone = exited_at is not None and not _procs.group_alive(proc.pid)
                    if gone and (eof or now - exited_at >= DRAIN_SECONDS):
                        return reason
                    if not killed and now - term_at >= self._grace:
                        _procs.signal_group(proc.pid, signal.SIGKILL)
                        killed = True
                    if killed and now - term_at >= self._grace + 30:
                        log.warning("process group %s survived SIGKILL for 30s", proc.pid)
                        return reason
                wait = _TICK
                if reason is None and deadline is not None:
                    wait = max(0.0, min(wait, deadline - now))
                if eof:
                    if reason is None:
                        cancel.wait(wait)
                    else:
                        time.sleep(wait)
                    continue
                if sel.select(wait):
                    data = os.read(fd, 65536)
                    if data:
                        splitter.feed(data)
                    else:
                        eof = True
                        sel.unregister(fd)
        finally:
            sel.close()

    def end(self, abandoned: bool) -> None:
        proc = self._proc
        if abandoned:
            _procs.terminate_group(proc.pid, self._grace, proc.poll)
        with contextlib.suppress(OSError):
            proc.stdout.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)

    def flush(self) -> None:
        self._splitter.flush()

    def exited(self) -> StepOutcome:
        code = self._proc.returncode
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return StepOutcome(128 - code, "exited", f"terminated by {name}")
        return StepOutcome(code, "exited")


class ProcessTarget(BaseTarget):
    def __init__(self, cfg: AgentConfig, instance: str, *, grace: float = GRACE_SECONDS) -> None:
        self._base = _jobdir.base_dir(cfg.shared_volume_directory)
        self._instance = instance
        self._grace = grace
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------

    def prepare(self, job: JobSpec) -> None:
        jd = _jobdir.create(self._base, self._instance, job)
        jd.write_owner({**jd.owner(), "boot_id": _procs.boot_id(), "groups": []})
        with self._lock:
            self._jobs[job.job_id] = _Job(jd)
        if job.oidc_token:
            try:
                _jobdir.write_private(jd.oidc_token, job.oidc_token)
            except OSError as exc:
                raise TargetError(f"cannot write the job's OIDC token: {exc.strerror}") from None
        log.info("job %s: working directory %s", job.job_id, jd.work)

    def workdir(self, job: JobSpec):
        """The directory the job's steps run in (None before prepare / after cleanup)."""
        state = self._jobs.get(job.job_id)
        return state.jobdir.work if state else None

    def environment(self, job: JobSpec, workdir) -> dict[str, str]:
        env = {"HOME": str(workdir), "PATH": DEFAULT_PATH}
        if job.oidc_token:
            env[OIDC_TOKEN_ENV] = str(_jobdir.JobDir(workdir.parent).oidc_token)
        return {**env, **job.env}

    def _step_state(self, job: JobSpec) -> _Job | None:
        with self._lock:
            return self._jobs.get(job.job_id)

    def _start_step(self, state: _Job, job: JobSpec, step: Step, on_line) -> StepRun | StepOutcome:
        work = state.jobdir.work
        cwd = work / step.workdir  # an absolute workdir replaces `work`
        if not cwd.is_dir():
            return StepOutcome(None, "error", f"working directory {step.workdir} does not exist")
        shell = job.shell_or_default
        try:
            proc = subprocess.Popen(
                [shell, "-c", step.run],
                cwd=cwd,
                env=self.environment(job, work),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # setsid: own session and process group (pgid == pid)
            )
        except OSError as exc:
            return StepOutcome(None, "error", f"cannot start {shell}: {exc.strerror or exc}")
        self._record_group(state, proc.pid)
        return _ProcessStep(proc, LineSplitter(on_line), self._grace)

    def cleanup(self, job: JobSpec) -> None:
        with self._lock:
            state = self._jobs.pop(job.job_id, None)
        if state is None:
            return
        try:
            for group in state.groups:
                if _procs.group_alive(group["pgid"]):
                    log.info("job %s: stopping leftover process group %s", job.job_id, group)
                    _procs.terminate_group(group["pgid"], self._grace)
            _jobdir.remove(state.jobdir)
        except Exception:  # cleanup never raises: the agent must move on to the next job
            log.exception("job %s: cleanup failed", job.job_id)

    def cleanup_orphans(self) -> int:
        with self._lock:
            live = {s.jobdir.root for s in self._jobs.values()}
        count = 0
        for jd in _jobdir.find(self._base, self._instance):
            if jd.root in live:
                continue
            owner = jd.owner()
            same_boot = owner.get("boot_id", "") == _procs.boot_id()
            for group in owner.get("groups", []) if same_boot else []:
                if _is_ours(group):
                    log.info("orphan job %s: stopping process group %s", owner.get("job_id"), group)
                    _procs.terminate_group(group["pgid"], self._grace)
            if _jobdir.remove(jd):
                count += 1
                log.info("removed orphaned job directory %s", jd.root)
        return count

    # --- bookkeeping -------------------------------------------------------------------------

    def _record_group(self, state: _Job, pgid: int) -> None:
        state.groups.append({"pgid": pgid, "start": _procs.start_signature(pgid)})
        try:
            state.jobdir.write_owner({**state.jobdir.owner(), "groups": state.groups})
        except OSError as exc:  # only orphan cleanup after a crash depends on it
            log.warning("could not record process group %s: %s", pgid, exc)


def _is_ours(group: dict) -> bool:
    """Is the recorded group still the one we started (not a recycled pid)?"""
    pgid = group.get("pgid")
    if not isinstance(pgid, int) or pgid <= 1 or not _procs.group_alive(pgid):
        return False
    current = _procs.start_signature(pgid)
    # Leader gone but members left: a pgid is not reused while its group has members.
    return current is None or current == group.get("start")
