"""process_job_user: steps run as another user through setpriv, with no capabilities left.

Switching users needs CAP_SETUID/CAP_SETGID: these run as root, with the host's `nobody` as the
job user (root here stands in for the agent the role's unit grants those capabilities). The
per-job cgroup needs a systemd unit with Delegate=yes: the Molecule default scenario covers it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import threading

import pytest
from target_harness import run_steps
from workflow_agent.targets.base import Step, TargetError
from workflow_agent.targets.process import ProcessTarget

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root (CAP_SETUID)"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing"),
]
JOB_USER = "nobody"


@pytest.fixture
def harness(process_harness, tmp_path):
    try:
        pwd.getpwnam(JOB_USER)
    except KeyError:
        pytest.skip(f"no {JOB_USER} user on this host")
    # The job user must reach its work/ below the base, like the role's 0711 data directories.
    process_harness.base.mkdir()
    for path in [process_harness.base, *process_harness.base.parents]:
        if path.stat().st_mode & 0o001 == 0:
            os.chmod(path, 0o711)  # noqa: S103 - pytest's tmp directories are 0700
    return process_harness


def target_with(harness, **kw) -> ProcessTarget:
    return ProcessTarget(harness.config(**kw), harness.instance, grace=5.0)


def test_steps_run_as_the_job_user_without_capabilities(harness):
    target = target_with(harness, process_job_user=JOB_USER)
    job = harness.job(
        "id -un; grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status; pwd",
        'mkdir -p sub && chmod 0500 sub && echo "$PULUMI_OIDC_TOKEN"',
        oidc_token="oidc-secret",
    )
    target.prepare(job)
    work = target.workdir(job)
    try:
        res = run_steps(target, job)
        assert stat.S_IMODE(work.parent.stat().st_mode) == 0o711
        assert work.stat().st_uid == pwd.getpwnam(JOB_USER).pw_uid
        assert stat.S_IMODE(work.stat().st_mode) == 0o700
    finally:
        target.cleanup(job)
    assert [o.exit_code for o in res.outcomes] == [0, 0], res.lines
    who, *caps, cwd = res.lines[0]
    assert who == JOB_USER
    assert len(caps) == 4 and all(c.split()[1] == "0000000000000000" for c in caps), caps
    assert cwd == str(work)
    assert res.lines[1] == ["oidc-secret"]
    # A read-only directory the job left is deleted with the rest.
    assert not work.parent.exists()


def test_job_user_must_exist_and_differ_from_the_agent(harness):
    with pytest.raises(TargetError, match="'no-such-wfa-user': no such user"):
        target_with(harness, process_job_user="no-such-wfa-user")
    with pytest.raises(TargetError, match="is the agent's own user"):
        target_with(harness, process_job_user="root")


def test_step_in_a_missing_workdir_fails(harness):
    target = target_with(harness, process_job_user=JOB_USER)
    job = harness.job("true")
    target.prepare(job)
    lines: list[str] = []
    try:
        step = Step(index=1, name="s", run="echo ran", workdir="missing")
        out = target.run_step(job, step, lines.append, threading.Event())
    finally:
        target.cleanup(job)
    # An agent that may not look inside the job user's work/ leaves the check to `env --chdir`
    # (exit 125); root here may look.
    assert out.reason == "error" or out.exit_code == 125, (out, lines)
    assert "ran" not in lines


def test_the_job_user_gets_the_executor_it_cannot_read_in_the_agents_cache(harness, tmp_path):
    """The agent's executor cache is the agent's (0700 here): the job user still gets its own
    copy in work/, runnable, and the job's runtime (PULUMI_ENV) works as that user."""
    cache = tmp_path / "agent-only"
    cache.mkdir(mode=0o700)
    executor = cache / "pulumi-deploy-executor-0123"
    executor.write_bytes(b'#!/bin/sh\necho "executor as $(id -un): $*"\n')
    executor.chmod(0o700)
    target = target_with(harness, process_job_user=JOB_USER)
    job = harness.job(
        '"$PULUMI_DEPLOY_EXECUTOR" update; echo "X=1" >> "$PULUMI_ENV"',
        'echo "X=$X"',
        executor=str(executor),
    )
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert [o.succeeded for o in res.outcomes] == [True, True], res
    assert res.lines[0] == [f"executor as {JOB_USER}: update"]
    assert res.lines[1][-1] == "X=1"
