"""`deploy_target: docker`: one long-lived container per job, steps run in it with `docker exec`.

Talks to the engine with the Docker SDK, which honours DOCKER_HOST (and DOCKER_TLS_VERIFY,
DOCKER_CERT_PATH). Per job:

- **Image.** `pull_image: true` pulls the job image every time, with the job's registry
  credentials when it has them (passed to the engine, never logged); `false` uses the local
  image and fails the job with a clear TargetError when it is missing.
- **Container.** `workflow-agent-job-<job>-<random>` from the job image, labelled with the job id,
  run id and agent instance. Its entrypoint is replaced by a /bin/sh keepalive loop, with the
  engine's init (tini) as PID 1 to reap orphans; the loop's first line, read from the attached
  output, proves /bin/sh runs (an image without it fails the job with what the container said)
  and that the OIDC token, if any, is in place. The engine's own work dominates a job's start
  (create + start ≈ a bare `docker run`; each exec ≈ 50 ms more), so the only exec before
  the first step is the step's own.
  It runs as the image's own user (`job_security_profile: image`), or with `restricted` as
  uid/gid 1000 with no capabilities and no privilege escalation. Environment: `JobSpec.env`
  (job env, allowlisted host variables, DOCKER_HOST), plus PULUMI_ENV and
  PULUMI_DEPLOY_EXECUTOR. The per-job dir's `work/`
  (under `shared_volume_directory`, default the OS temp dir) is bind-mounted at /mnt/workflow;
  steps run in `/` (as upstream's runner does) unless they name a `workingDir`, and files
  persist between them. When the agent itself runs in a container, `shared_volume_directory`
  must exist at the same path on the Docker host, because the engine resolves bind mounts there.
- **Job runtime** (docs/protocol.md, "Job runtime"). `/PULUMI_ENV` is a file of the job dir,
  bind-mounted and writable by any user of the image; each step's wrapper loads it. The
  deployment executor is copied into `work/.pulumi-deploy/`. A tmpfs is mounted at /mnt/pulumi;
  the claim's OIDC token is written there (`pulumi.oidc`, mode 0600, as the container's user)
  by the keepalive itself, from its attached stdin, before its ready line: so it is in neither
  the container's config nor a host file, and costs no exec of its own; each step's wrapper
  exports it as PULUMI_OIDC_TOKEN.
- **Opt-ins.** `job_ca_bundle`: the agent's CA bundle, read-only at
  /etc/ssl/certs/ca-certificates.crt (the image's own store is replaced: the bundle holds the
  system's CAs too), named by SSL_CERT_FILE and its kin. `job_docker`: the agent's Docker
  engine, its socket at /var/run/docker.sock (DOCKER_HOST names it): a job that can start
  containers there is root on the Docker host. With a remote DOCKER_HOST, the job reaches that
  engine through the forwarded DOCKER_HOST instead.
- **Steps.** Each step is one `docker exec` of the /bin/sh wrapper in `_stepwrap` (output
  streamed line by line, stdout and stderr merged, exit code from the wrapper), which runs the
  step with the job's shell in its working directory. Timeout and
  cancel signal the step's process group through a second exec: TERM, then KILL after the grace
  period. Why not stop the container instead: stopping signals only PID 1, so the step would get
  no TERM of its own, and later steps would need a new container without the earlier steps'
  processes; why not kill from the host: with a remote DOCKER_HOST the exec'd pid is not ours to
  signal.
- **Cleanup.** The container is stopped (TERM, grace, KILL) and removed, then the per-job dir is
  deleted; files a root step left that the agent's user cannot delete are removed by a throwaway
  container of the same image running as root. `debug_keep_runner: true` keeps both and logs where.
- **Orphans.** `cleanup_orphans()` removes containers labelled with this instance that belong to
  no live job, and this instance's leftover per-job dirs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import docker
import docker.errors
from docker.types import Mount
from docker.utils import parse_repository_tag
from docker.utils.socket import frames_iter

from workflow_agent.targets import _execpump, _jobdir, _stepwrap
from workflow_agent.targets.base import (
    LABEL_INSTANCE,
    LABEL_JOB,
    LABEL_RUN,
    OIDC_TOKEN_DIR,
    OIDC_TOKEN_PATH,
    PULUMI_ENV_PATH,
    PULUMI_ENV_VAR,
    WRITE_TOKEN_SCRIPT,
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

WORKDIR = "/mnt/workflow"  # the per-job volume
STEP_DIR = "/"  # where steps run [RE: upstream's runner]
READY = b"workflow-agent: job container ready"
KEEPALIVE = f'echo "{READY.decode()}"; trap "exit 0" TERM; while :; do sleep 3600 & wait; done'
TOKEN_FAILED = "workflow-agent: cannot write the OIDC token"  # noqa: S105 - a message
# With an OIDC token: the keepalive first writes the line on its stdin to $1 (a subshell keeps
# the umask and the variable out of the loop), and only then says it is ready.
KEEPALIVE_WITH_TOKEN = (
    f'({WRITE_TOKEN_SCRIPT}) || {{ echo "{TOKEN_FAILED}"; exit 1; }}; {KEEPALIVE}'
)
GRACE_SECONDS = 10.0
JOB_CA_PATH = "/etc/ssl/certs/ca-certificates.crt"
ENGINE_SOCKET = "/var/run/docker.sock"
RESTRICTED_USER = "1000:1000"


@dataclass
class _Job:
    jobdir: _jobdir.JobDir
    container: object = None


class _ContainerStep(_execpump.ExecStep):
    def __init__(self, read, parser, *, api, exec_id: str, stream, **kw) -> None:
        super().__init__(read, parser, **kw)
        self._api = api
        self._exec_id = exec_id
        self._stream = stream

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stream.close()

    def unreported(self) -> StepOutcome:
        # The wrapper died without reporting: its group was killed, or the container stopped.
        try:
            info = self._api.exec_inspect(self._exec_id)
        except docker.errors.DockerException as exc:
            return StepOutcome(None, "error", f"the job container is gone: {_why(exc)}")
        code = info.get("ExitCode")
        if code is None or info.get("Running"):
            return StepOutcome(None, "error", "lost the step's output stream")
        return StepOutcome(code, "exited", "the step's process group was killed")


class DockerTarget(BaseTarget):
    def __init__(
        self,
        cfg: AgentConfig,
        instance: str,
        *,
        client: docker.DockerClient | None = None,
        grace: float = GRACE_SECONDS,
    ) -> None:
        self._cfg = cfg
        self._instance = instance
        self._grace = grace
        self._base = _jobdir.base_dir(cfg.shared_volume_directory)
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        if client is None:
            try:
                client = docker.from_env(timeout=120)
            except docker.errors.DockerException as exc:
                where = os.environ.get("DOCKER_HOST") or "the default socket"
                raise TargetError(f"cannot reach the Docker engine at {where}: {exc}") from None
        self._client = client

    # --- prepare ---------------------------------------------------------------------------

    def prepare(self, job: JobSpec) -> None:
        if self._cfg.pull_image:
            self._pull(job)
        jd = _jobdir.create(self._base, self._instance, job)
        # The container's user may not be root; 0700 on the job root keeps other host users out.
        jd.work.chmod(0o777)
        state = _Job(jd)
        with self._lock:
            self._jobs[job.job_id] = state
        labels = {
            **job.labels,
            LABEL_JOB: job.job_id,
            LABEL_RUN: job.run_id,
            LABEL_INSTANCE: self._instance,
        }
        name = f"{_jobdir.PREFIX}{_slug(job.job_id)}-{secrets.token_hex(3)}"
        # The low-level API: the models' create and reload would each add an inspect call.
        api = self._client.api
        runtime = _jobdir.place_runtime(jd, job, WORKDIR, ca_in_job=JOB_CA_PATH)
        mounts = [
            Mount(WORKDIR, str(jd.work), type="bind"),
            Mount(PULUMI_ENV_PATH, str(jd.pulumi_env), type="bind"),
        ]
        environment = {**job.env, PULUMI_ENV_VAR: PULUMI_ENV_PATH, **runtime}
        if job.oidc_token:
            mounts.append(Mount(OIDC_TOKEN_DIR, None, type="tmpfs"))
        if job.ca_bundle:
            mounts.append(Mount(JOB_CA_PATH, str(jd.ca_bundle), type="bind", read_only=True))
        if self._cfg.job_docker:
            socket_path = _engine_socket(os.environ.get("DOCKER_HOST", ""))
            if socket_path:
                mounts.append(Mount(ENGINE_SOCKET, socket_path, type="bind"))
                environment["DOCKER_HOST"] = "unix://" + ENGINE_SOCKET
        hardening = {}
        if self._cfg.job_security_profile == "restricted":
            hardening = {"cap_drop": ["ALL"], "security_opt": ["no-new-privileges"]}
        command = [KEEPALIVE]
        if job.oidc_token:
            command = [KEEPALIVE_WITH_TOKEN, "workflow-job", OIDC_TOKEN_PATH]
        try:
            cid = api.create_container(
                job.image,
                entrypoint=["/bin/sh", "-c"],
                command=command,
                # The token's way in. Not detached, the SDK sets StdinOnce with it: the end of
                # what we send then closes the keepalive's stdin, not our attachment.
                stdin_open=bool(job.oidc_token),
                name=name,
                labels=labels,
                environment=environment,
                working_dir=STEP_DIR,
                user=RESTRICTED_USER if hardening else None,
                host_config=api.create_host_config(mounts=mounts, init=True, **hardening),
                detach=not job.oidc_token,
            )["Id"]
            state.container = self._client.containers.prepare_model({"Id": cid, "Name": name})
            # Attached before the start, as `docker run` does: the keepalive's first line
            # proves /bin/sh runs in there ("running" alone may only be the init), and if the
            # container dies instead, what it printed says why.
            params = {"stdout": 1, "stderr": 1, "stream": 1, "stdin": int(bool(job.oidc_token))}
            output = api.attach_socket(cid, params=params)
            api.start(cid)
        except docker.errors.ImageNotFound:
            raise TargetError(
                f"image {job.image} is not present on the Docker host and pull_image is false "
                "(pull it first, or set pull_image: true)"
            ) from None
        except docker.errors.DockerException as exc:
            raise TargetError(
                f"cannot start the job container from {job.image}: {_why(exc)}"
            ) from None
        ready, printed = _wait_ready(output, job.oidc_token)
        if not ready and TOKEN_FAILED in printed:
            raise TargetError(f"cannot write the job's OIDC token to {OIDC_TOKEN_PATH}: {printed}")
        if not ready:
            raise TargetError(
                f"cannot start the job container from {job.image}: it exited at once "
                f"(does the image have /bin/sh?): {printed or '/bin/sh does not run'}"
            )
        log.info("job %s: container %s, work dir %s", job.job_id, name, jd.work)

    def _pull(self, job: JobSpec) -> None:
        image = job.image
        repo, tag = parse_repository_tag(image)
        auth = None
        password = ""
        if job.image_credentials:
            username, password = job.image_credentials
            auth = {"username": username, "password": password}
        try:
            for event in self._client.api.pull(
                repo, tag=tag or "latest", stream=True, decode=True, auth_config=auth
            ):
                if isinstance(event, dict) and event.get("error"):
                    raise TargetError(
                        f"cannot pull image {image}: {_redact(str(event['error']), password)}"
                    )
        except docker.errors.DockerException as exc:
            raise TargetError(
                f"cannot pull image {image}: {_redact(_why(exc), password)}"
            ) from None
        log.info("pulled image %s", image)

    # --- steps -----------------------------------------------------------------------------

    def _step_state(self, job: JobSpec) -> _Job | None:
        with self._lock:
            state = self._jobs.get(job.job_id)
        return state if state is not None and state.container is not None else None

    def _start_step(self, state: _Job, job: JobSpec, step: Step, on_line) -> StepRun | StepOutcome:
        marker = _stepwrap.new_marker()
        parser = _stepwrap.StepStream(marker, on_line)
        cid = state.container.id
        argv = _stepwrap.wrapper_argv(
            step.run,
            marker,
            shell=job.shell_or_default,
            workdir=step.workdir,
            prelude=_stepwrap.runtime_prelude(OIDC_TOKEN_PATH if job.oidc_token else ""),
        )
        try:
            exec_id = self._client.api.exec_create(cid, argv, workdir=STEP_DIR)["Id"]
            stream = self._client.api.exec_start(exec_id, stream=True)
        except docker.errors.DockerException as exc:
            return StepOutcome(None, "error", f"cannot exec in the job container: {_why(exc)}")
        chunks: queue.Queue = queue.Queue()
        reader = threading.Thread(target=_read_into, args=(stream, chunks), daemon=True)
        reader.start()

        def read(timeout: float):
            try:
                return chunks.get(timeout=timeout)
            except queue.Empty:
                return None

        return _ContainerStep(
            read,
            parser,
            grace=self._grace,
            signal=lambda pgid, sig: self._signal(cid, pgid, sig),
            alive=lambda pgid: self._alive(cid, pgid),
            api=self._client.api,
            exec_id=exec_id,
            stream=stream,
        )

    def _exec(self, cid: str, argv: list[str]) -> int | None:
        """Run a short helper command in the container; its exit code (None: could not)."""
        try:
            exec_id = self._client.api.exec_create(cid, argv)["Id"]
            self._client.api.exec_start(exec_id)  # returns once the command's output has ended
            return self._exit_code(exec_id)
        except docker.errors.DockerException as exc:
            log.debug("exec %s in %s failed: %s", argv[2:], cid[:12], exc)
        return None

    def _exit_code(self, exec_id: str) -> int | None:
        """An ended exec's exit code; its output ending may precede the engine's bookkeeping."""
        for _attempt in range(50):
            info = self._client.api.exec_inspect(exec_id)
            if not info.get("Running"):
                return info.get("ExitCode")
            time.sleep(0.02)
        return None

    def _signal(self, cid: str, pgid: int, sig: str) -> None:
        self._exec(cid, _stepwrap.kill_argv(pgid, sig))

    def _alive(self, cid: str, pgid: int) -> bool:
        return self._exec(cid, _stepwrap.alive_argv(pgid)) == 0

    # --- cleanup ---------------------------------------------------------------------------

    def cleanup(self, job: JobSpec) -> None:
        with self._lock:
            state = self._jobs.pop(job.job_id, None)
        if state is None:
            return
        try:
            if self._cfg.debug_keep_runner:
                name = state.container.name if state.container is not None else "(none)"
                log.warning(
                    "job %s: debug_keep_runner: keeping container %s and directory %s",
                    job.job_id,
                    name,
                    state.jobdir.root,
                )
                return
            if state.container is not None:
                self._remove_container(state.container)
            self._remove_dir(state.jobdir, job.image)
        except Exception:  # cleanup never raises: the agent must move on to the next job
            log.exception("job %s: cleanup failed", job.job_id)

    def _remove_container(self, container) -> None:
        try:
            container.stop(timeout=max(1, int(round(self._grace))))
        except docker.errors.NotFound:
            return
        except docker.errors.DockerException as exc:
            log.warning("could not stop container %s: %s", container.name, _why(exc))
        try:
            container.remove(v=True, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.DockerException as exc:
            log.warning("could not remove container %s: %s", container.name, _why(exc))

    def _remove_dir(self, jd: _jobdir.JobDir, image: str | None) -> bool:
        if _jobdir.remove(jd):
            return True
        if image:
            self._remove_as_root(jd, image)
        return _jobdir.remove(jd)

    def _remove_as_root(self, jd: _jobdir.JobDir, image: str) -> None:
        """Delete what a root step wrote into the work dir, from a throwaway root container."""
        try:
            self._client.containers.run(
                image,
                entrypoint=["/bin/sh", "-c"],
                command=["rm -rf /w/* /w/.[!.]* /w/..?*"],
                user="0",
                mounts=[Mount("/w", str(jd.work), type="bind")],
                labels={LABEL_INSTANCE: self._instance},
                remove=True,
            )
        except docker.errors.DockerException as exc:
            log.warning("could not clean %s with a root container: %s", jd.work, _why(exc))

    def cleanup_orphans(self) -> int:
        with self._lock:
            live = set(self._jobs)
            live_dirs = {s.jobdir.root for s in self._jobs.values()}
        orphans: set[str] = set()
        images: dict[str, str] = {}
        try:
            found = self._client.containers.list(
                all=True, filters={"label": f"{LABEL_INSTANCE}={self._instance}"}
            )
        except docker.errors.DockerException as exc:
            log.warning("cannot list containers for orphan cleanup: %s", _why(exc))
            found = []
        for container in found:
            job_id = container.labels.get(LABEL_JOB, "")
            if job_id in live:
                continue
            log.info("removing orphaned container %s (job %s)", container.name, job_id)
            with contextlib.suppress(docker.errors.NotFound):
                images[job_id] = container.attrs.get("Config", {}).get("Image", "")
            self._remove_container(container)
            if job_id:  # not a throwaway cleaner container
                orphans.add(job_id)
        for jd in _jobdir.find(self._base, self._instance):
            if jd.root in live_dirs:
                continue
            job_id = jd.owner().get("job_id", str(jd.root))
            if self._remove_dir(jd, images.get(job_id)):
                log.info("removed orphaned job directory %s", jd.root)
                orphans.add(job_id)
        return len(orphans)


def _read_into(stream, chunks: queue.Queue) -> None:
    try:
        for chunk in stream:
            chunks.put(chunk)
    except Exception as exc:  # a closed or broken socket ends the stream like EOF
        log.debug("exec stream ended: %s", exc)
    finally:
        chunks.put(_execpump.END)


def _engine_socket(docker_host: str) -> str:
    """The engine's unix socket on this host ("" for a remote engine)."""
    if not docker_host:
        return ENGINE_SOCKET
    return docker_host[len("unix://") :] if docker_host.startswith("unix://") else ""


def _slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-.")[:40] or "job"


def _why(exc: Exception) -> str:
    if isinstance(exc, docker.errors.APIError) and exc.explanation:
        return " ".join(str(exc.explanation).split())
    return " ".join(str(exc).split())


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def _wait_ready(sock, token: str) -> tuple[bool, str]:
    """Hand the keepalive the OIDC token (when there is one) on the attached stdin, then read
    the attached output until it says it runs (True), or the container ends (False, with the end
    of what it printed). The attachment is closed either way."""
    seen = b""
    raw = getattr(sock, "_sock", sock)  # a SocketIO (unix socket) wraps the socket
    try:
        if token:
            raw.sendall(token.encode() + b"\n")
            if hasattr(raw, "shutdown_write"):  # paramiko (ssh://)
                raw.shutdown_write()
            else:
                raw.shutdown(socket.SHUT_WR)  # the end of stdin; the output goes on
        for _stream, chunk in frames_iter(sock, tty=False):
            seen = (seen + chunk)[-4096:]
            if READY in seen:
                return True, ""
    except Exception as exc:  # a broken attachment: the container's fate is unknown
        log.debug("attach stream ended: %s", exc)
    finally:
        for each in (sock, raw):
            with contextlib.suppress(Exception):  # SSH connections cannot be closed early
                each.close()
    return False, " ".join(seen.decode(errors="replace").split())[-500:]
