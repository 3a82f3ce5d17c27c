"""`deploy_target: kubernetes`: one Pod per job in the agent's namespace; steps run by exec.

Uses the official kubernetes client: in-cluster config when the agent runs in a pod (namespace
from the service account), otherwise the kubeconfig (KUBECONFIG or ~/.kube/config, namespace of
the current context, else `default`).

**The pod.** `pulumi-workflow-runner-<job id>`, labels `app.kubernetes.io/component=
pulumi-workflow`, `app.kubernetes.io/name=workflow-runner` and the job, run and instance labels;
one container `pulumi-workflow` from the job image running a /bin/sh keepalive loop in `/`
(as upstream's runner), with `/mnt/workflow` (an emptyDir) as the job's volume. The container
runs the image's own user (`job_security_profile: image`, root in pulumi/pulumi; the `baseline`
Pod Security level allows it) with seccomp RuntimeDefault; `restricted` meets the `restricted`
level: runAsNonRoot with uid/gid 1000, no privilege escalation, all capabilities dropped.
Settings (`_k8spod`): PULUMI_AGENT_SERVICE_ACCOUNT_NAME, PULUMI_AGENT_NUM_CPUS,
PULUMI_AGENT_MEM_QUANTITY (bare numbers: `_k8spod.requests_from_env`; upstream's Helm draft
values 1000 and 4000000000 are 1 CPU and 4 GB, its Fargate notes' 4 is 4Gi),
WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY,
PULUMI_AGENT_DEBUG_POD, and the strategic merge patch in /mnt/worker-pod.json
(WORKFLOW_AGENT_WORKER_POD_PATCH to move it), which may override any of the defaults.
prepare() watches the pod until its container runs; an image that cannot be pulled, a bad
container config, or not running within the start timeout fails the job with a TargetError.

**Steps: exec into the long-lived container** (chosen over a generated script whose per-step
markers are parsed from the pod log). Per-step control is the reason: a step's timeout or
cancel signals exactly that step's process group (TERM, grace, KILL, through a second exec),
the exit code comes straight from the step, and later steps still run in the same container
with the files (and background processes) of earlier ones, exactly as with docker. The job's
environment travels over the exec's stdin, never in the pod spec, and so does the claim's OIDC
token: written once to /mnt/pulumi/pulumi.oidc (an in-memory emptyDir, mode 0600) after the
pod starts; each step's wrapper exports it as PULUMI_OIDC_TOKEN. PULUMI_ENV names /PULUMI_ENV
when the container's user may create it there, else /mnt/workflow/PULUMI_ENV on the job's
volume; the executor and (`job_ca_bundle`) the CA bundle are copied into
/mnt/workflow/.pulumi-deploy/ over an exec's stdin (docs/protocol.md, "Job runtime"). A
log-parsing runner could
only stop the whole pod, and step markers in a log can be forged by step output. The cost is
pods/exec in the RBAC, and a step whose exec connection breaks (API server restart) is
reported as an error.

**Cleanup** deletes the pod with the grace period and watches until it is gone, unless
PULUMI_AGENT_DEBUG_POD (or `debug_keep_runner`) keeps it. **Orphans**: on start,
`cleanup_orphans()` deletes pods labelled with this instance that belong to no live job.

**Job registry credentials** (`image.credentials`) become a per-job pull Secret
(`<pod>-pull`, kubernetes.io/dockerconfigjson, for the image's registry) that the pod names in
`imagePullSecrets`; the Secret is owned by the pod, so it goes with it even when the agent dies,
and cleanup deletes it too. The password never sits in the pod spec or a log line.

**RBAC** (namespaced Role, API group ""), exactly what this module calls, and what
tests/targets/test_kubernetes.py runs a job with (in a namespace enforcing `restricted`):

    pods:       create, list, watch, delete
    pods/exec:  create, get    (the websocket exec is authorized as `get` on clusters before
                                1.31's AuthorizePodWebsocketUpgradeCreatePermission, `create` after)
    secrets:    create, patch, delete   (the per-job pull Secret: created, given its owner, deleted;
                                never read)

Nothing on pods/log or configmaps: logs arrive over exec, and worker-pod.json is a file
(mounted from a ConfigMap by the deployment, not read through the API).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream as k8s_stream

from workflow_agent.targets import _execpump, _k8spod, _stepwrap
from workflow_agent.targets.base import (
    EXECUTOR_DIR,
    EXECUTOR_ENV,
    EXECUTOR_NAME,
    LABEL_INSTANCE,
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
from workflow_agent.trust import JOB_CA_VARS

if TYPE_CHECKING:
    from workflow_agent.config import AgentConfig

log = logging.getLogger(__name__)

GRACE_SECONDS = 30.0
START_TIMEOUT = 300.0
DELETE_WAIT = 120.0
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
# Waiting reasons that will not fix themselves in time for this job.
FATAL_WAITING = {
    "ErrImagePull": "cannot pull the image",
    "ImagePullBackOff": "cannot pull the image",
    "InvalidImageName": "invalid image name",
    "ErrImageNeverPull": "the image is not on the node and the pull policy is Never",
    "CreateContainerConfigError": "invalid container configuration",
    "CreateContainerError": "cannot create the container",
    "RunContainerError": "cannot start the container",
}
_STDOUT, _STDERR = 1, 2


@dataclass
class _Job:
    name: str
    runtime: dict[str, str] = field(default_factory=dict)
    pull_secret: str = ""


class _PodStep(_execpump.ExecStep):
    def __init__(self, read, parser, *, ws, pod: str, **kw) -> None:
        super().__init__(read, parser, **kw)
        self._ws = ws
        self._pod = pod
        self._code: int | None = None

    def close(self) -> None:
        self._code = _returncode(self._ws)  # the exec's exit status, once it has closed
        with contextlib.suppress(Exception):
            self._ws.close()

    def unreported(self) -> StepOutcome:
        if self._code is not None:
            return StepOutcome(self._code, "exited", "the step's process group was killed")
        return StepOutcome(None, "error", f"lost the exec connection to pod {self._pod}")


class KubernetesTarget(BaseTarget):
    def __init__(
        self,
        cfg: AgentConfig,
        instance: str,
        *,
        namespace: str | None = None,
        env: Mapping[str, str] | None = None,
        api_client: client.ApiClient | None = None,
        grace: float = GRACE_SECONDS,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self._cfg = cfg
        self._instance = instance
        self._grace = grace
        self._start_timeout = start_timeout
        self._settings = _k8spod.Settings.from_env(os.environ if env is None else env)
        if self._settings.cpus or self._settings.memory:
            log.info(
                "worker pods request cpu %s, memory %s",
                self._settings.cpus or "(unset)",
                self._settings.memory or "(unset)",
            )
        default_ns = "default"
        if api_client is None:
            api_client, default_ns = _load_config()
        self._ns = namespace or default_ns
        self._api = client.CoreV1Api(api_client)
        # kubernetes.stream() swaps the request function of the client it is given while it
        # connects: exec gets its own client, and one exec connects at a time.
        self._exec_api = client.CoreV1Api(client.ApiClient(api_client.configuration))
        self._exec_lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    @property
    def namespace(self) -> str:
        return self._ns

    # --- prepare ---------------------------------------------------------------------------

    def prepare(self, job: JobSpec) -> None:
        pod = _k8spod.render_pod(
            job,
            self._instance,
            self._settings,
            pull_image=self._cfg.pull_image,
            grace=self._grace,
            profile=self._cfg.job_security_profile,
        )
        name = pod["metadata"]["name"]
        pull_secret = ""
        if job.image_credentials:
            pull_secret = f"{name}-pull"
            self._create_pull_secret(pull_secret, job)
            pod["spec"].setdefault("imagePullSecrets", []).append({"name": pull_secret})
        try:
            created = self._api.create_namespaced_pod(self._ns, pod)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            if pull_secret:  # no pod owns it yet
                self._delete_pull_secret(pull_secret)
            if isinstance(exc, ApiException):
                why = f"cannot create pod {name} in namespace {self._ns}: {_reason(exc)}"
            else:
                why = f"cannot reach the Kubernetes API to create pod {name}: {exc}"
            raise TargetError(why) from None
        with self._lock:
            self._jobs[job.job_id] = _Job(name, pull_secret=pull_secret)
        if pull_secret:
            self._own_pull_secret(pull_secret, name, created.metadata.uid)
        log.info("job %s: pod %s/%s created", job.job_id, self._ns, name)
        self._wait_running(name, job.image)
        if job.oidc_token:
            self._write_token(name, job.oidc_token)
        runtime = {PULUMI_ENV_VAR: self._make_pulumi_env(name)}
        if job.executor:
            path = f"{_k8spod.WORKDIR}/{EXECUTOR_DIR}/{EXECUTOR_NAME}"
            with open(job.executor, "rb") as fh:
                self._write_file(name, fh.read(), path, "executor")
            runtime[EXECUTOR_ENV] = path
        if job.ca_bundle:
            path = f"{_k8spod.WORKDIR}/{EXECUTOR_DIR}/ca-certificates.crt"
            self._write_file(name, job.ca_bundle, path, "CA bundle")
            runtime.update(dict.fromkeys(JOB_CA_VARS, path))
        with self._lock:
            self._jobs[job.job_id].runtime = runtime

    def _create_pull_secret(self, name: str, job: JobSpec) -> None:
        username, password = job.image_credentials
        auth = base64.b64encode(f"{username}:{password}".encode()).decode()
        config = {
            "auths": {
                _registry(job.image): {"username": username, "password": password, "auth": auth}
            }
        }
        body = {
            "metadata": {
                "name": name,
                "labels": {LABEL_INSTANCE: _k8spod.label_value(self._instance)},
            },
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
        }
        try:
            self._api.create_namespaced_secret(self._ns, body)
        except ApiException as exc:
            raise TargetError(f"cannot create the pull Secret {name}: {_reason(exc)}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TargetError(f"cannot reach the Kubernetes API to create {name}: {exc}") from None

    def _own_pull_secret(self, name: str, pod: str, uid: str) -> None:
        """The pod owns its pull Secret: the garbage collector deletes it with the pod."""
        owner = {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}
        try:
            self._api.patch_namespaced_secret(
                name, self._ns, {"metadata": {"ownerReferences": [owner]}}
            )
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("pull Secret %s: cannot make pod %s its owner: %s", name, pod, exc)

    def _delete_pull_secret(self, name: str) -> None:
        try:
            self._api.delete_namespaced_secret(name, self._ns)
        except ApiException as exc:
            if exc.status != 404:
                log.warning("could not delete the pull Secret %s: %s", name, _reason(exc))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("could not delete the pull Secret %s: %s", name, exc)

    def _write_file(self, name: str, data: bytes, path: str, what: str) -> None:
        """A file into the job's volume, over the stdin of an exec: no host path can reach a
        pod. Its directory is writable by any user (the executor works beside itself)."""
        script = (
            'd=${1%/*}; mkdir -p -- "$d" && chmod 0777 "$d" 2>/dev/null; '
            'head -c "$2" > "$1" && chmod 0755 "$1"'
        )
        argv = ["/bin/sh", "-c", script, "sh", path, str(len(data))]
        code = self._exec_stdin(name, argv, data, f"copy the {what} into")
        if code != 0:
            raise TargetError(f"cannot copy the {what} to {path} in pod {name} (exit {code})")

    def _exec_stdin(self, name: str, argv: list[str], data: bytes, doing: str) -> int | None:
        """Run `argv` in the job container with `data` on its stdin; its exit code. TargetError
        ("cannot <doing> pod <name>: ...") when the exec itself fails."""
        try:
            ws = self._connect(name, argv, stdin=True)
            for at in range(0, len(data), 1 << 20):
                ws.write_stdin(data[at : at + (1 << 20)])
            ws.run_forever(timeout=300)
            code = _returncode(ws)
            ws.close()
        except Exception as exc:  # ApiException, websocket and socket errors alike
            raise TargetError(f"cannot {doing} pod {name}: {exc}") from None
        return code

    def _make_pulumi_env(self, name: str) -> str:
        """/PULUMI_ENV when the container's user may create it, else the job volume's."""
        fallback = _k8spod.WORKDIR + "/PULUMI_ENV"
        script = f"(: >> {PULUMI_ENV_PATH}) 2>/dev/null || exit 3; chmod 0666 {PULUMI_ENV_PATH}"
        code = self._exec_short(name, ["/bin/sh", "-c", script])
        return PULUMI_ENV_PATH if code == 0 else fallback

    def _write_token(self, name: str, token: str) -> None:
        """The OIDC token into the pod's in-memory volume, over the stdin of an exec."""
        argv = ["/bin/sh", "-c", WRITE_TOKEN_SCRIPT, "workflow-token", OIDC_TOKEN_PATH]
        code = self._exec_stdin(
            name, argv, token.encode() + b"\n", "write the job's OIDC token into"
        )
        if code != 0:
            raise TargetError(
                f"cannot write the job's OIDC token to {OIDC_TOKEN_PATH} in pod {name} "
                f"(exit code {code})"
            )

    def _wait_running(self, name: str, image: str) -> None:
        deadline = time.monotonic() + self._start_timeout
        last = "no status yet"
        for kind, pod in self._pod_events(name, deadline):
            if pod is None or kind == "DELETED":
                raise TargetError(f"pod {name} was deleted before it started")
            verdict, last = start_verdict(pod, image)
            if verdict == "running":
                return
            if verdict == "failed":
                raise TargetError(f"pod {name}: {last}")
        raise TargetError(f"pod {name} did not start within {self._start_timeout:g}s: {last}")

    def _pod_events(self, name: str, deadline: float):
        """("LIST" | "ADDED" | "MODIFIED" | "DELETED", V1Pod or None when absent) until
        `deadline`. Each (re)connection lists the pod first, then watches from that version,
        so a dropped watch (API server restart, expired resource version) loses nothing."""
        selector = f"metadata.name={name}"
        w = watch.Watch()
        try:
            while time.monotonic() < deadline:
                try:
                    listing = self._api.list_namespaced_pod(
                        self._ns, field_selector=selector, _request_timeout=60
                    )
                    yield "LIST", (listing.items[0] if listing.items else None)
                    remaining = deadline - time.monotonic()
                    for event in w.stream(
                        self._api.list_namespaced_pod,
                        self._ns,
                        field_selector=selector,
                        resource_version=listing.metadata.resource_version,
                        timeout_seconds=max(1, int(min(remaining, 60))),
                    ):
                        yield event["type"], event["object"]
                        if time.monotonic() >= deadline:
                            return
                except ApiException as exc:
                    if exc.status in (401, 403):
                        raise TargetError(f"cannot watch pod {name}: {_reason(exc)}") from None
                    if exc.status != 410:  # 410: the watch expired; start a new one at once
                        log.debug("watch of pod %s: %s; retrying", name, _reason(exc))
                        time.sleep(1)
                except (urllib3.exceptions.HTTPError, OSError) as exc:
                    log.debug("watch of pod %s broke: %s; retrying", name, exc)
                    time.sleep(1)
        finally:
            w.stop()

    # --- steps -----------------------------------------------------------------------------

    def _step_state(self, job: JobSpec) -> _Job | None:
        with self._lock:
            return self._jobs.get(job.job_id)

    def _start_step(self, state: _Job, job: JobSpec, step: Step, on_line) -> StepRun | StepOutcome:
        marker = _stepwrap.new_marker()
        parser = _stepwrap.StepStream(marker, on_line)
        argv = _stepwrap.wrapper_argv(
            step.run,
            marker,
            env_from_stdin=True,
            shell=job.shell_or_default,
            workdir=step.workdir,
            prelude=_stepwrap.runtime_prelude(OIDC_TOKEN_PATH if job.oidc_token else ""),
        )
        env = {**job.env, **state.runtime}
        try:
            ws = self._connect(state.name, argv, stdin=True)
            ws.write_stdin(_stepwrap.env_lines(env, marker))
        except Exception as exc:  # ApiException, websocket and socket errors alike
            return StepOutcome(None, "error", f"cannot exec in pod {state.name}: {exc}")

        def read(timeout: float):
            try:
                if ws.is_open():
                    ws.update(timeout=timeout)
                data = ws.read_channel(_STDOUT, 0) + ws.read_channel(_STDERR, 0)
            except Exception as exc:  # a broken websocket ends the output like EOF
                log.debug("exec stream of pod %s broke: %s", state.name, exc)
                return _execpump.END
            if not data and not ws.is_open():
                return _execpump.END
            return data

        return _PodStep(
            read,
            parser,
            grace=self._grace,
            signal=lambda pgid, sig: self._kill(state.name, pgid, sig),
            alive=lambda pgid: self._exec_short(state.name, _stepwrap.alive_argv(pgid)) == 0,
            ws=ws,
            pod=state.name,
        )

    def _connect(self, name: str, argv: list[str], *, stdin: bool):
        with self._exec_lock:
            return k8s_stream(
                self._exec_api.connect_get_namespaced_pod_exec,
                name,
                self._ns,
                container=_k8spod.CONTAINER,
                command=argv,
                stdin=stdin,
                stdout=True,
                stderr=True,
                tty=False,
                binary=True,
                _preload_content=False,
            )

    def _kill(self, name: str, pgid: int, sig: str) -> None:
        self._exec_short(name, _stepwrap.kill_argv(pgid, sig))

    def _exec_short(self, name: str, argv: list[str]) -> int | None:
        """Run a helper command (kill) in the job container; its exit code, None if unknown."""
        try:
            ws = self._connect(name, argv, stdin=False)
            ws.run_forever(timeout=30)
            code = _returncode(ws)
            ws.close()
            return code
        except Exception as exc:  # the pod may be gone: the caller treats None as "unknown"
            log.debug("exec %s in %s failed: %s", argv[3:], name, exc)
            return None

    # --- cleanup ---------------------------------------------------------------------------

    def cleanup(self, job: JobSpec) -> None:
        with self._lock:
            state = self._jobs.pop(job.job_id, None)
        if state is None:
            return
        try:
            if self._settings.debug_pod or self._cfg.debug_keep_runner:
                log.warning("job %s: keeping pod %s/%s (debug)", job.job_id, self._ns, state.name)
                return
            self._delete(state.name)
            if state.pull_secret:
                self._delete_pull_secret(state.pull_secret)
        except Exception:  # cleanup never raises: the agent must move on to the next job
            log.exception("job %s: cleanup failed", job.job_id)

    def _delete(self, name: str) -> bool:
        """Delete the pod with the grace period and watch until it is gone."""
        try:
            self._api.delete_namespaced_pod(
                name, self._ns, grace_period_seconds=max(1, int(round(self._grace)))
            )
        except ApiException as exc:
            if exc.status == 404:
                return True
            log.warning("could not delete pod %s: %s", name, _reason(exc))
            return False
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("could not delete pod %s: %s", name, exc)
            return False
        deadline = time.monotonic() + self._grace + DELETE_WAIT
        try:
            for kind, pod in self._pod_events(name, deadline):
                if pod is None or kind == "DELETED":
                    return True
        except TargetError as exc:
            log.warning("%s", exc)
            return False
        waited = int(self._grace + DELETE_WAIT)
        log.warning("pod %s still exists %ss after its deletion", name, waited)
        return False

    def cleanup_orphans(self) -> int:
        with self._lock:
            live = {s.name for s in self._jobs.values()}
        try:
            pods = self._api.list_namespaced_pod(
                self._ns, label_selector=_k8spod.selector(self._instance)
            ).items
        except ApiException as exc:
            log.warning("cannot list pods for orphan cleanup: %s", _reason(exc))
            return 0
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("cannot list pods for orphan cleanup: %s", exc)
            return 0
        count = 0
        for pod in pods:
            name = pod.metadata.name
            if name in live:
                continue
            log.info("deleting orphaned pod %s/%s", self._ns, name)
            if self._delete(name):
                count += 1
        return count


def start_verdict(pod, image: str) -> tuple[str, str]:
    """("running" | "failed" | "waiting", a one-line description) for a V1Pod."""
    status = pod.status
    phase = (status.phase if status else None) or "Pending"
    for cs in (status.container_statuses if status else None) or []:
        if cs.name != _k8spod.CONTAINER:
            continue
        if cs.state and cs.state.running:
            return "running", "running"
        waiting = cs.state.waiting if cs.state else None
        if waiting and waiting.reason in FATAL_WAITING:
            what = FATAL_WAITING[waiting.reason]
            msg = " ".join((waiting.message or "").split())
            return "failed", f"{what} ({image}): {waiting.reason}: {msg}".rstrip(": ")
        terminated = cs.state.terminated if cs.state else None
        if terminated:
            return "failed", (
                f"the {_k8spod.CONTAINER} container exited ({terminated.reason}, exit code "
                f"{terminated.exit_code}) before any step ran (does the image have /bin/sh?)"
            )
        if waiting:
            return "waiting", f"{phase}: {waiting.reason or 'waiting'}"
    if phase in ("Failed", "Succeeded"):
        return "failed", f"pod {phase.lower()} before any step ran: {status.message or ''}".strip()
    for cond in (status.conditions if status else None) or []:
        if cond.type == "PodScheduled" and cond.status == "False":
            return "waiting", f"not scheduled: {cond.reason}: {cond.message}"
    return "waiting", phase


def _registry(image: str) -> str:
    """The registry an image reference pulls from, as a docker config names it."""
    parts = image.split("/", 1)
    if len(parts) == 2 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        return parts[0]
    return "https://index.docker.io/v1/"


def _returncode(ws) -> int | None:
    if ws.is_open():
        return None
    try:
        return ws.returncode
    except Exception:  # no status on the error channel: the connection broke
        return None


def _reason(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "{}")
        message = body.get("message") or exc.reason
    except (ValueError, AttributeError):
        message = exc.reason
    return f"{exc.status} {' '.join(str(message).split())}"


def _load_config() -> tuple[client.ApiClient, str]:
    """In-cluster config, else the kubeconfig; TargetError when neither works."""
    conf = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=conf)
        ns = Path(SA_NAMESPACE_FILE).read_text().strip() or "default"
        return client.ApiClient(conf), ns
    except (config.ConfigException, OSError):
        pass
    try:
        config.load_kube_config(client_configuration=conf)
        _contexts, active = config.list_kube_config_contexts()
        ns = (active or {}).get("context", {}).get("namespace") or "default"
        return client.ApiClient(conf), ns
    except (config.ConfigException, OSError, TypeError) as exc:
        where = os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise TargetError(
            f"no Kubernetes configuration: not running in a cluster, and the kubeconfig "
            f"({where}) cannot be used: {exc}"
        ) from None
