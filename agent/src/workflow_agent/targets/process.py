"""`deploy_target: process` (extension): steps run as child processes of the agent.

For hosts without Docker or Kubernetes (macOS runners, small VMs).

**Isolation: a separate job user, or none.** With `process_job_user` set (the collection's
role sets it), steps run as that unprivileged user and, under systemd, in a cgroup per job
(`_isolate.py`): a job cannot read the agent's config or its /proc files, nor signal it. Without
it, a job runs with the agent's uid and gid and can read anything the agent's user can read (the
config file with the pool token included, unless another user owns it). Either way a job sees
the host's filesystem (read-only under the role's unit), network and processes: use it for
trusted workloads, on hosts dedicated to the agent. What it does give you:

- Each job gets a fresh directory `<shared_volume_directory or OS temp>/workflow-agent-job-*/work`
  (mode 0700). Steps run there (or in their `workingDir`, relative to it), one after another,
  with `<shell> -c <step>` (the job's `shell`, default /bin/sh, looked up on the job's PATH), so
  files persist between steps. The directory is deleted when the job ends.
- The job runtime (docs/protocol.md, "Job runtime"): a host has no container root, so the
  PULUMI_ENV file is `PULUMI_ENV` next to `work/` (each step logs `Loading PULUMI_ENV from
  <path>` once it holds variables), the deployment executor is copied into
  `work/.pulumi-deploy/`, and the claim's OIDC token is PULUMI_OIDC_TOKEN and the file
  `pulumi.oidc` (mode 0600) next to `work/`.
- The environment is exactly the job's (`JobSpec.env`: job variables, allowlisted host
  variables, DOCKER_HOST), plus `HOME` (the job directory) and a plain `PATH`
  (`/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin`, with `/opt/homebrew/bin` first on macOS);
  a job variable of the same name wins, so allowlist `PATH` to hand the agent's PATH on.
  The runtime's variables above win over the job's. Nothing else from the agent's environment
  reaches a step.
- Every step starts its own session and process group. Timeout and cancel send SIGTERM to the
  whole group, wait the grace period, then send SIGKILL. Whatever a step left running in its
  group is killed the same way when the job ends. A program that starts its own session
  (`setsid`, daemons) leaves the group: only the job's cgroup, where there is one, catches it.
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
from pathlib import Path
from typing import TYPE_CHECKING

from workflow_agent.targets import _isolate, _jobdir, _procs, _stepwrap
from workflow_agent.targets._lines import LineSplitter
from workflow_agent.targets.base import (
    EXECUTOR_DIR,
    EXECUTOR_NAME,
    OIDC_TOKEN_ENV,
    PULUMI_ENV_VAR,
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
    runtime: dict[str, str] = field(default_factory=dict, repr=False)
    groups: list[dict] = field(default_factory=list)
    cgroup: Path | None = None


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
        job_user = cfg.process_job_user
        self._user = _isolate.JobUser(job_user) if job_user else None
        self._cgroups = _isolate.JobCgroups() if sys.platform.startswith("linux") else None

    # --- lifecycle -------------------------------------------------------------------------

    def prepare(self, job: JobSpec) -> None:
        jd = _jobdir.create(self._base, self._instance, job)
        cgroup = self._cgroups.create(jd.root.name) if self._cgroups else None
        owner = {"boot_id": _procs.boot_id(), "groups": [], "cgroup": str(cgroup or "")}
        jd.write_owner({**jd.owner(), **owner})
        with self._lock:
            self._jobs[job.job_id] = _Job(jd, cgroup=cgroup)
        if self._user:
            self._user.make_work(jd.root, jd.work, jd.oidc_token, job.oidc_token)
        elif job.oidc_token:
            try:
                _jobdir.write_private(jd.oidc_token, job.oidc_token)
            except OSError as exc:
                raise TargetError(f"cannot write the job's OIDC token: {exc.strerror}") from None
        # work/ is the job user's: it writes the executor in itself, from stdin (the agent's
        # cache is the agent's to read, not the job user's).
        runtime = _jobdir.place_runtime(jd, job, str(jd.work), copy=not self._user)
        if self._user and job.executor:
            where = jd.work / EXECUTOR_DIR
            script = 'mkdir -m 0755 -- "$1" && cat > "$1/$2" && chmod 0755 -- "$1/$2"'
            try:
                data = Path(job.executor).read_bytes()
            except OSError as exc:
                raise TargetError(f"cannot read the executor {job.executor}: {exc}") from None
            self._user.run(["sh", "-c", script, "sh", str(where), EXECUTOR_NAME], data)
        runtime[PULUMI_ENV_VAR] = str(jd.pulumi_env)
        if job.oidc_token:
            runtime[OIDC_TOKEN_ENV] = job.oidc_token
        with self._lock:
            self._jobs[job.job_id].runtime = runtime
        log.info("job %s: working directory %s", job.job_id, jd.work)

    def workdir(self, job: JobSpec):
        """The directory the job's steps run in (None before prepare / after cleanup)."""
        state = self._jobs.get(job.job_id)
        return state.jobdir.work if state else None

    def environment(self, job: JobSpec, workdir) -> dict[str, str]:
        state = self._jobs.get(job.job_id)
        runtime = state.runtime if state else {}
        return {"HOME": str(workdir), "PATH": DEFAULT_PATH, **job.env, **runtime}

    def _step_state(self, job: JobSpec) -> _Job | None:
        with self._lock:
            return self._jobs.get(job.job_id)

    def _start_step(self, state: _Job, job: JobSpec, step: Step, on_line) -> StepRun | StepOutcome:
        work = state.jobdir.work
        cwd = work / step.workdir  # an absolute workdir replaces `work`
        try:
            missing = not cwd.is_dir()
        except PermissionError:  # inside the job user's work/: `env --chdir` checks it
            missing = False
        if missing:
            return StepOutcome(None, "error", f"working directory {step.workdir} does not exist")
        shell = job.shell_or_default
        # While PULUMI_ENV is empty (always before a step wrote to it) the wrapper has nothing to
        # load: the job's shell runs the step itself, one exec fewer. A shell that is not there
        # still gets the wrapper, whose /bin/sh says so in the step's output.
        direct = not self._user and _empty(state.jobdir.pulumi_env)
        try:
            proc = self._popen(state, job, step, cwd, direct=direct)
        except FileNotFoundError:
            proc = None
        except OSError as exc:
            return StepOutcome(None, "error", f"cannot start {shell}: {exc.strerror or exc}")
        if proc is None:
            try:
                proc = self._popen(state, job, step, cwd, direct=False)
            except OSError as exc:
                return StepOutcome(None, "error", f"cannot start {shell}: {exc.strerror or exc}")
        self._record_group(state, proc.pid)
        return _ProcessStep(proc, LineSplitter(on_line), self._grace)

    def _popen(
        self, state: _Job, job: JobSpec, step: Step, cwd: Path, *, direct: bool
    ) -> subprocess.Popen:
        shell = job.shell_or_default
        if direct:
            argv = [shell, "-c", step.run]
        else:
            # /bin/sh loads PULUMI_ENV's variables, then becomes the job's shell running the step.
            body = _stepwrap.runtime_prelude() + 'exec "$2" -c "$1"'
            argv = ["/bin/sh", "-c", body, "workflow-step", step.run, shell]
        if self._user:  # the agent may not enter work/: the step changes directory itself
            argv = [*self._user.prefix, self._user.env, f"--chdir={cwd}", *argv]
        if self._cgroups:
            argv = self._cgroups.wrap(state.cgroup, argv)
        return subprocess.Popen(
            argv,
            cwd=None if self._user else cwd,
            env=self.environment(job, state.jobdir.work),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # setsid: own session and process group (pgid == pid)
        )

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
            if state.cgroup:  # what left the process groups (setsid) ends here
                _isolate.JobCgroups.kill(state.cgroup)
            self._remove(state.jobdir)
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
            if owner.get("cgroup"):
                _isolate.JobCgroups.kill(Path(owner["cgroup"]))
            if self._remove(jd):
                count += 1
                log.info("removed orphaned job directory %s", jd.root)
        return count

    # --- bookkeeping -------------------------------------------------------------------------

    def _remove(self, jd: _jobdir.JobDir) -> bool:
        if self._user and jd.work.exists():  # work/'s content is the job user's to delete
            try:
                self._user.empty(jd.work)
                jd.work.rmdir()
            except (TargetError, OSError) as exc:
                log.warning("could not remove %s: %s", jd.work, exc)
        return _jobdir.remove(jd)

    def _record_group(self, state: _Job, pgid: int) -> None:
        state.groups.append({"pgid": pgid, "start": _procs.start_signature(pgid)})
        try:
            state.jobdir.write_owner({**state.jobdir.owner(), "groups": state.groups})
        except OSError as exc:  # only orphan cleanup after a crash depends on it
            log.warning("could not record process group %s: %s", pgid, exc)


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def _is_ours(group: dict) -> bool:
    """Is the recorded group still the one we started (not a recycled pid)?"""
    pgid = group.get("pgid")
    if not isinstance(pgid, int) or pgid <= 1 or not _procs.group_alive(pgid):
        return False
    current = _procs.start_signature(pgid)
    # Leader gone but members left: a pgid is not reused while its group has members.
    return current is None or current == group.get("start")
