"""Process target specifics, against real child processes, /proc and the filesystem."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from dataclasses import replace

import pytest
from target_harness import host_processes_with, make_config, run_steps, token
from workflow_agent.targets import _jobdir, _procs
from workflow_agent.targets.base import TargetError
from workflow_agent.targets.process import DEFAULT_PATH, ProcessTarget


def test_home_is_the_job_dir_and_path_is_plain(process_harness):
    target = process_harness.target()
    job = process_harness.job('echo "$HOME"; pwd; echo "$PATH"')
    target.prepare(job)
    try:
        workdir = target.workdir(job)
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert res.lines[0] == [str(workdir), str(workdir), DEFAULT_PATH]
    assert workdir.parent.parent == process_harness.base
    assert not workdir.exists()


def test_job_env_wins_over_the_defaults(process_harness):
    target = process_harness.target()
    job = process_harness.job('echo "$HOME $PATH"', env={"HOME": "/nowhere", "PATH": "/x:/bin"})
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert res.lines[0] == ["/nowhere /x:/bin"]


def test_job_dir_is_private(process_harness):
    target = process_harness.target()
    job = process_harness.job("true")
    target.prepare(job)
    try:
        root = target.workdir(job).parent
        assert root.stat().st_mode & 0o777 == 0o700
        assert target.workdir(job).stat().st_mode & 0o777 == 0o700
    finally:
        target.cleanup(job)


def test_background_child_holding_the_output_does_not_hang_the_step(process_harness):
    """The shell exits; its background child keeps stdout open. The step still ends (after the
    drain window) and cleanup kills the child."""
    target = process_harness.target()
    tok = token()
    job = process_harness.job(f"sleep {tok} & echo done")
    target.prepare(job)
    try:
        res = run_steps(target, job)
        assert res.outcomes[0].succeeded and res.lines[0] == ["done"]
        assert host_processes_with(tok) != []  # left running between steps, like in a container
    finally:
        target.cleanup(job)
    assert host_processes_with(tok) == []
    assert process_harness.leftovers(job) == []


def test_step_killed_by_a_signal_reports_128_plus_n(process_harness):
    target = process_harness.target()
    job = process_harness.job("echo x; kill -KILL $$")
    target.prepare(job)
    try:
        out = run_steps(target, job).outcomes[0]
    finally:
        target.cleanup(job)
    assert (out.exit_code, out.reason, out.succeeded) == (137, "exited", False)
    assert "SIGKILL" in out.detail


def test_a_raising_callback_does_not_leave_the_step_running(process_harness):
    target = process_harness.target(grace=1.0)
    tok = token()
    job = process_harness.job(f"echo hello; sleep {tok}")

    def on_line(line: str) -> None:
        raise RuntimeError("log shipping broke")

    target.prepare(job)
    try:
        with pytest.raises(RuntimeError):
            target.run_step(job, job.steps[0], on_line, threading.Event())
        assert host_processes_with(tok) == []
    finally:
        target.cleanup(job)


def test_unprepared_job_is_an_error_outcome(process_harness):
    target = process_harness.target()
    job = process_harness.job("true")
    out = target.run_step(job, job.steps[0], [].append, threading.Event())
    assert out.reason == "error" and "not prepared" in out.detail


def test_unusable_shared_volume_directory_is_a_clear_error(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    cfg = make_config(deploy_target="process", shared_volume_directory=str(not_a_dir))
    target = ProcessTarget(cfg, "wfa-targets-test")
    from target_harness import ProcessHarness

    job = ProcessHarness(tmp_path).job("true")
    with pytest.raises(TargetError, match=f"cannot create a job directory under {not_a_dir}"):
        target.prepare(job)


CRASHING_AGENT = textwrap.dedent(
    """
    import os, sys, threading
    from workflow_agent.config import AgentConfig
    from workflow_agent.targets.base import JobSpec, Step
    from workflow_agent.targets.process import ProcessTarget

    base, instance, tok = sys.argv[1:4]
    cfg = AgentConfig(token="pul-test", deploy_target="process", shared_volume_directory=base)
    target = ProcessTarget(cfg, instance)
    step = Step(1, "s", f"sleep {tok} >/dev/null 2>&1 & echo started")
    job = JobSpec(job_id="crashed-job", run_id="r", image="", steps=(step,))
    target.prepare(job)
    target.run_step(job, step, print, threading.Event())
    os._exit(0)  # the agent dies without cleanup
    """
)


def test_orphans_of_a_crashed_agent_are_removed_on_start(process_harness):
    h = process_harness
    tok = token()
    proc = subprocess.run(
        [sys.executable, "-c", CRASHING_AGENT, str(h.base), h.instance, tok],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert proc.stdout.splitlines() == ["started"]
    assert host_processes_with(tok) != []
    assert len(_jobdir.find(h.base, h.instance)) == 1

    # Another instance's job on the same base dir is not ours to touch.
    other = h.target(instance=h.instance + "-other")
    other_job = h.job("true")
    other.prepare(other_job)
    try:
        assert h.target().cleanup_orphans() == 1
        assert host_processes_with(tok) == []
        assert _jobdir.find(h.base, h.instance) == []
        assert other.workdir(other_job).is_dir()
    finally:
        other.cleanup(other_job)


def test_orphan_cleanup_never_signals_a_recycled_pid(process_harness):
    """A recorded group whose leader has a different start time is someone else's now."""
    h = process_harness
    tok = token()
    stranger = subprocess.Popen(["sleep", tok], start_new_session=True)
    try:
        jd = _jobdir.create(h.base, h.instance, h.job("true"))
        owner = jd.owner()
        owner.update(
            boot_id=_procs.boot_id(),
            groups=[{"pgid": stranger.pid, "start": "not-its-start-time"}],
        )
        jd.write_owner(owner)
        assert h.target().cleanup_orphans() == 1
        assert not jd.root.exists()
        # Had it been signalled, terminate_group would have waited for it to die.
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_live_jobs_are_not_orphans(process_harness):
    target = process_harness.target()
    job = process_harness.job("true")
    target.prepare(job)
    try:
        assert target.cleanup_orphans() == 0
        assert target.workdir(job).is_dir()
    finally:
        target.cleanup(job)


def test_make_target_builds_the_process_target(tmp_path):
    from workflow_agent.targets import make_target

    cfg = make_config(deploy_target="process", shared_volume_directory=str(tmp_path))
    assert isinstance(make_target(cfg, "i"), ProcessTarget)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_no_step_process_outlives_cleanup_even_when_it_ignores_term(process_harness):
    target = process_harness.target(grace=1.0)
    tok = token()
    job = process_harness.job(f"(trap '' TERM; exec sleep {tok}) >/dev/null 2>&1 & echo ok")
    target.prepare(job)
    try:
        assert run_steps(target, job).outcomes[0].succeeded
    finally:
        target.cleanup(job)
    assert host_processes_with(tok) == []
    assert os.listdir(process_harness.base) == []


def test_a_shell_that_is_not_there_fails_the_step_with_its_name(process_harness):
    """Before any PULUMI_ENV line the step's shell starts without the wrapper; a shell that is not
    there still ends the step as the wrapper would: exit code 127, the shell's name said."""
    target = process_harness.target()
    job = replace(process_harness.job("true"), shell="no-such-sh")  # noqa: S604 - a job's field
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert [o.exit_code for o in res.outcomes] == [127], res
    assert any("no-such-sh" in line for line in res.lines[0]), res


def test_the_step_is_the_shell_itself_until_pulumi_env_has_lines(process_harness):
    """One exec fewer while there is nothing to load: the first step's own process is the job's
    shell; after a step wrote to PULUMI_ENV, the wrapper loads it (its `Loading` line)."""
    target = process_harness.target()
    job = process_harness.job(
        'cat /proc/$$/cmdline | tr "\\0" " "; echo; echo "A=1" >> "$PULUMI_ENV"', 'echo "A=$A"'
    )
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert [o.succeeded for o in res.outcomes] == [True, True], res
    assert res.lines[0][0].startswith("/bin/sh -c cat /proc"), res
    assert res.lines[1][0].startswith("[workflow-agent] Loading PULUMI_ENV from")
    assert res.lines[1][1:] == ["A=1"]
