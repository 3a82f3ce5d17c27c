"""The process target's isolation: a separate job user, and a cgroup per job (Linux).

**Job user** (`process_job_user`). Steps run through `setpriv` as that user, with its groups,
and with the inheritable (hence ambient) capabilities cleared: the agent holds CAP_SETUID and
CAP_SETGID as ambient capabilities (systemd `AmbientCapabilities=`), which a uid change between
two unprivileged users keeps, so a step started without `--inh-caps=-all` could switch back to
the agent's user. The job's `work/` is made, its OIDC token written and `work/` emptied as the
job user too, so the agent needs neither CAP_CHOWN nor CAP_DAC_OVERRIDE.

**Cgroup per job.** Where the agent's own cgroup is delegated to it (systemd `Delegate=yes`),
each job gets a child cgroup that every step enters before it starts; at job end whatever is
left in it is killed, `setsid` daemons included. cgroup v2 kills with `cgroup.kill`, cgroup v1
(`name=systemd`) by signalling each member until none is left. Elsewhere (not run by systemd,
as in the tests) the job's processes stay in the agent's cgroup, as before; that is logged once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

from workflow_agent.targets.base import TargetError

log = logging.getLogger(__name__)

_CGROUP_ROOT = Path("/sys/fs/cgroup")
# Enters the cgroup whose cgroup.procs is $0, then runs the step: before anything of the job's
# runs, so no step can fork out of it first.
_ENTER = 'echo $$ > "$0" && exec "$@"'


class JobUser:
    """Runs commands as the job user (needs CAP_SETUID and CAP_SETGID)."""

    def __init__(self, name: str) -> None:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise TargetError(f"process_job_user {name!r}: no such user on this host") from None
        if entry.pw_uid == os.geteuid():
            raise TargetError(
                f"process_job_user {name!r} is the agent's own user: name an unprivileged other"
            )
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        self.name = name
        self.uid = entry.pw_uid
        self.env = shutil.which("env") or "/usr/bin/env"
        self.prefix = [
            setpriv,
            f"--reuid={name}",
            f"--regid={entry.pw_gid}",
            "--init-groups",
            "--inh-caps=-all",
            "--",
        ]

    def run(self, argv: list[str], stdin: str | bytes | None = None) -> None:
        """Run a helper command (not job code) as the job user; TargetError on failure."""
        if isinstance(stdin, str):
            stdin = stdin.encode()
        try:
            proc = subprocess.run(
                self.prefix + argv,
                input=stdin,
                capture_output=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise TargetError(f"cannot run {argv[0]} as {self.name}: {exc}") from None
        if proc.returncode != 0:
            out = (proc.stderr or proc.stdout).decode(errors="replace")
            detail = out.strip().splitlines()
            raise TargetError(
                f"{argv[0]} as {self.name} failed ({proc.returncode}): "
                f"{detail[-1] if detail else 'no output'}"
            )

    def make_work(self, root: Path, work: Path, oidc_token: Path, token: str) -> None:
        """Make `work` (and the OIDC token file) the job user's, inside the agent's `root`.

        The agent may not chown: for these two the job user makes them itself, while `root`
        (a random name in a directory no one else may list) is open to it, sticky.
        """
        work.rmdir()
        os.chmod(root, 0o1733)  # noqa: S103 - briefly: see above
        try:
            self.run(["mkdir", "-m", "0700", "--", str(work)])
            if token:  # through stdin, never argv
                self.run(["sh", "-c", 'umask 077 && cat > "$1"', "sh", str(oidc_token)], token)
        finally:
            os.chmod(root, 0o711)  # noqa: S103 - x only: the job user reaches work/, lists nothing

    def empty(self, work: Path) -> None:
        """Delete what is in `work` (read-only directories a step left included)."""
        if work.exists():
            script = 'chmod -R u+rwX -- "$1" 2>/dev/null; find "$1" -mindepth 1 -delete'
            self.run(["sh", "-c", script, "sh", str(work)])


class JobCgroups:
    """Child cgroups of the agent's own (delegated) cgroup, one per job."""

    def __init__(self) -> None:
        self.base = _own_cgroup()
        if self.base is None:
            log.info(
                "no delegated cgroup to write to (not a systemd unit with Delegate=yes): job "
                "processes stay in the agent's cgroup; one that calls setsid can outlive its job"
            )

    def create(self, name: str) -> Path | None:
        if self.base is None:
            return None
        path = self.base / name
        try:
            path.mkdir()
        except OSError as exc:
            raise TargetError(f"cannot create the job's cgroup {path}: {exc.strerror}") from None
        return path

    @staticmethod
    def wrap(cgroup: Path | None, argv: list[str]) -> list[str]:
        if cgroup is None:
            return argv
        return ["/bin/sh", "-c", _ENTER, str(cgroup / "cgroup.procs"), *argv]

    @staticmethod
    def kill(cgroup: Path, timeout: float = 10.0) -> bool:
        """Kill everything in `cgroup` and remove it; True when it is gone."""
        kill_file = cgroup / "cgroup.kill"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = _members(cgroup)
            if pids is None:  # already removed
                return True
            if not pids:
                try:
                    cgroup.rmdir()
                    return True
                except OSError:
                    pass  # a member just went: its exit is still being accounted
            elif kill_file.exists():
                kill_file.write_text("1")
            else:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        log.warning("cgroup %s still has members after %gs", cgroup, timeout)
        return False


def _members(cgroup: Path) -> list[int] | None:
    try:
        text = (cgroup / "cgroup.procs").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _own_cgroup() -> Path | None:
    """The agent's cgroup directory, if it was delegated to the agent (not root) to divide."""
    if os.geteuid() == 0:
        return None  # root may write anywhere: that proves no delegation
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    unified = _CGROUP_ROOT / "unified"  # cgroup v2 next to v1 (hybrid)
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            candidate = (unified if unified.is_dir() else _CGROUP_ROOT) / path.lstrip("/")
        elif "name=systemd" in controllers.split(","):
            candidate = _CGROUP_ROOT / "systemd" / path.lstrip("/")
        else:
            continue
        # Delegate=yes makes the unit's cgroup the agent user's; otherwise it is root's.
        if candidate.is_dir() and os.access(candidate, os.W_OK):
            return candidate
    return None
