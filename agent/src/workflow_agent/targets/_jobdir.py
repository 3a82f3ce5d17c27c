"""Per-job directories under `shared_volume_directory` (default: the OS temp dir).

Layout: `<base>/workflow-agent-job-<job>-<random>/` (mode 0700) holds `owner.json` (instance,
job and run ids; the process target adds the process groups it started), `work/`, the
directory the steps run in, `PULUMI_ENV` (docker: mounted at /PULUMI_ENV), and (process target)
`pulumi.oidc`, the job's OIDC token. Keeping
the agent's bookkeeping next to, not inside, `work/` keeps the job's workspace clean;
`owner.json` is how a restarted agent recognises its orphans.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workflow_agent.targets.base import (
    EXECUTOR_DIR,
    EXECUTOR_ENV,
    EXECUTOR_NAME,
    JobSpec,
    TargetError,
)
from workflow_agent.trust import JOB_CA_VARS

log = logging.getLogger(__name__)

PREFIX = "workflow-agent-job-"
OWNER_FILE = "owner.json"


@dataclass(frozen=True)
class JobDir:
    root: Path

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def oidc_token(self) -> Path:
        return self.root / "pulumi.oidc"

    @property
    def pulumi_env(self) -> Path:
        return self.root / "PULUMI_ENV"

    @property
    def ca_bundle(self) -> Path:
        return self.root / "ca-certificates.crt"

    def owner(self) -> dict:
        try:
            data = json.loads((self.root / OWNER_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def write_owner(self, data: dict) -> None:
        tmp = self.root / (OWNER_FILE + ".tmp")
        tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.root / OWNER_FILE)


def write_private(path: Path, text: str) -> None:
    """Write `text` to a new file of mode 0600 (from its first byte)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def place_runtime(
    jd: JobDir, job: JobSpec, work_in_job: str, *, ca_in_job: str = "", copy: bool = True
) -> dict[str, str]:
    """Make the job's PULUMI_ENV file (empty, writable by whatever user the job runs as: the
    job dir around it is the agent's, 0700 or 0711), its CA bundle (`ca_bundle`, seen at
    `ca_in_job` in the job) and copy the executor into `work/` (`copy`). Returns the variables
    that name the executor and the bundle, `work/` being `work_in_job` in the job."""
    env = {}
    try:
        jd.pulumi_env.touch(mode=0o666)
        jd.pulumi_env.chmod(0o666)  # noqa: S103 - the job's user may be anyone; see above
        if job.ca_bundle:
            jd.ca_bundle.write_bytes(job.ca_bundle)
            jd.ca_bundle.chmod(0o644)
            env.update(dict.fromkeys(JOB_CA_VARS, ca_in_job or str(jd.ca_bundle)))
        if not job.executor:
            return env
        env[EXECUTOR_ENV] = f"{work_in_job}/{EXECUTOR_DIR}/{EXECUTOR_NAME}"
        if not copy:
            return env
        where = jd.work / EXECUTOR_DIR
        where.mkdir()
        where.chmod(0o777)  # noqa: S103 - the executor works beside itself, as the job's user
        shutil.copyfile(job.executor, where / EXECUTOR_NAME)
        (where / EXECUTOR_NAME).chmod(0o755)
    except OSError as exc:
        raise TargetError(f"cannot prepare the job directory {jd.root}: {exc}") from None
    return env


def base_dir(shared_volume_directory: str) -> Path:
    return Path(shared_volume_directory or tempfile.gettempdir())


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:40] or "job"


def create(base: Path, instance: str, job: JobSpec) -> JobDir:
    """Make the per-job dir and its owner record; TargetError when the base is unusable."""
    try:
        base.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{_slug(job.job_id)}-", dir=base))
    except OSError as exc:
        raise TargetError(
            f"cannot create a job directory under {base}: {exc.strerror or exc}"
        ) from None
    jd = JobDir(root)
    jd.work.mkdir(mode=0o700)
    jd.write_owner({"instance": instance, "job_id": job.job_id, "run_id": job.run_id})
    return jd


def find(base: Path, instance: str) -> list[JobDir]:
    """Every job dir under `base` that `instance` created."""
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    found = []
    for path in entries:
        if path.name.startswith(PREFIX) and path.is_dir() and not path.is_symlink():
            jd = JobDir(path)
            if jd.owner().get("instance") == instance:
                found.append(jd)
    return found


def _make_writable(func, path, _exc) -> None:
    # A step may leave read-only directories behind (chmod 0500, Go's module cache does this):
    # make the parent writable and retry once.
    parent = os.path.dirname(path)
    with contextlib.suppress(OSError):
        os.chmod(parent, stat.S_IRWXU)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, stat.S_IRWXU)
    func(path)


def remove(jd: JobDir) -> bool:
    """Delete the job dir; True when it is gone. Never raises."""
    try:
        if sys.version_info >= (3, 12):
            shutil.rmtree(jd.root, onexc=_make_writable)
        else:
            shutil.rmtree(jd.root, onerror=_make_writable)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove job directory %s: %s", jd.root, exc)
    return not jd.root.exists()
