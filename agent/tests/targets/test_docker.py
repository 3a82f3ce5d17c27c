"""Docker target specifics, against the real engine (`docker ps -a` by label, the filesystem)."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import tarfile
import textwrap
import threading

import pytest
from target_harness import JOB_IMAGE, host_processes_with, run_steps, token
from workflow_agent.targets import _jobdir
from workflow_agent.targets.base import LABEL_INSTANCE, LABEL_JOB, LABEL_RUN, TargetError


def test_container_is_labelled_and_runs_the_job_image_with_the_job_env(docker_harness):
    h = docker_harness
    target = h.target()
    job = h.job("true", env={"ONLY_THIS": "1"})
    target.prepare(job)
    try:
        [container] = h.containers(job)
        labels = container.labels
        assert labels[LABEL_JOB] == job.job_id
        assert labels[LABEL_RUN] == job.run_id
        assert labels[LABEL_INSTANCE] == h.instance
        assert container.attrs["Config"]["Image"] == JOB_IMAGE
        assert container.status == "running"
        env = dict(e.split("=", 1) for e in container.attrs["Config"]["Env"])
        assert env["ONLY_THIS"] == "1"
        # PATH: the image's default; PULUMI_ENV: the job runtime's file.
        assert set(env) <= {"ONLY_THIS", "PATH", "PULUMI_ENV"}
        mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
        assert set(mounts) == {"/mnt/workflow", "/PULUMI_ENV"}
        for mount in mounts.values():
            assert mount["Type"] == "bind" and mount["Source"].startswith(str(h.base))
        assert container.attrs["Config"]["WorkingDir"] == "/"  # as upstream's runner [RE]
        assert not container.attrs["HostConfig"]["Privileged"]
    finally:
        target.cleanup(job)
    assert h.containers(job) == []
    assert h.leftovers(job) == []


def test_missing_local_image_with_pull_disabled_is_a_clear_error(docker_harness):
    h = docker_harness
    target = h.target(pull_image=False)
    job = h.job("true", image="local/wfa-targets-does-not-exist:1")
    with pytest.raises(TargetError) as err:
        target.prepare(job)
    assert str(err.value) == (
        "image local/wfa-targets-does-not-exist:1 is not present on the Docker host and "
        "pull_image is false (pull it first, or set pull_image: true)"
    )
    target.cleanup(job)
    assert h.leftovers(job) == []


def test_pull_failure_is_a_clear_error_and_never_shows_the_password(docker_harness, caplog):
    h = docker_harness
    target = h.target(pull_image=True)
    password = "hunter2-wfa-targets-registry-password"
    job = h.job(
        "true",
        image="registry.wfa-targets.invalid/team/job:1",
        image_credentials=("robot", password),
    )
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TargetError) as err:
        target.prepare(job)
    text = str(err.value)
    assert text.startswith("cannot pull image registry.wfa-targets.invalid/team/job:1: ")
    assert password not in text
    assert password not in caplog.text
    assert password not in repr(job)
    target.cleanup(job)
    assert h.leftovers(job) == []


def test_image_without_a_shell_fails_prepare_clearly_and_cleans_up(docker_harness):
    h = docker_harness
    empty = io.BytesIO()
    with tarfile.open(fileobj=empty, mode="w") as tar:
        info = tarfile.TarInfo("README")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"hi\n"))
    name = "local/wfa-targets-no-shell:test"
    h.client.api.import_image_from_data(empty.getvalue(), repository=name.split(":")[0], tag="test")
    try:
        target = h.target()
        job = h.job("true", image=name)
        with pytest.raises(TargetError, match=f"cannot start the job container from {name}"):
            target.prepare(job)
        target.cleanup(job)
        assert h.leftovers(job) == []
    finally:
        h.client.images.remove(name, force=True)


def test_background_child_holding_the_output_does_not_hang_the_step(docker_harness):
    h = docker_harness
    target = h.target()
    tok = token()
    job = h.job(f"sleep {tok} & echo done", "echo next")
    target.prepare(job)
    try:
        res = run_steps(target, job)
        assert [o.succeeded for o in res.outcomes] == [True, True]
        assert res.lines == [["done"], ["next"]]
    finally:
        target.cleanup(job)
    assert host_processes_with(tok) == []
    assert h.leftovers(job) == []


def test_step_that_kills_its_own_group_reports_the_signal_code(docker_harness):
    h = docker_harness
    target = h.target()
    job = h.job("echo bye; kill -s KILL 0")
    target.prepare(job)
    try:
        out = run_steps(target, job).outcomes[0]
    finally:
        target.cleanup(job)
    assert (out.exit_code, out.reason, out.succeeded) == (137, "exited", False)


def test_root_owned_files_are_removed_with_the_job_dir(docker_harness):
    """Steps run as root in the container; the throwaway root container clears what they
    wrote when the agent's user cannot (exercised directly, since these tests run as root)."""
    h = docker_harness
    target = h.target()
    job = h.job("mkdir -p deep/er && touch deep/er/f .hidden && chmod 500 deep")
    target.prepare(job)
    jd = None
    try:
        assert run_steps(target, job).outcomes[0].succeeded
        [jd] = [d for d in _jobdir.find(h.base, h.instance) if d.owner()["job_id"] == job.job_id]
        target._remove_as_root(jd, JOB_IMAGE)
        assert list(jd.work.iterdir()) == []
    finally:
        target.cleanup(job)
    assert h.leftovers(job) == []


def test_debug_keep_runner_keeps_container_and_dir_until_orphan_cleanup(docker_harness):
    h = docker_harness
    target = h.target(cfg={"debug_keep_runner": True})
    job = h.job("echo kept > /mnt/workflow/file")
    target.prepare(job)
    assert run_steps(target, job).outcomes[0].succeeded
    target.cleanup(job)
    [container] = h.containers(job)
    assert container.status == "running"
    [kept] = _jobdir.find(h.base, h.instance)
    assert (kept.work / "file").read_text() == "kept\n"
    # The next agent start (same instance) clears what the debug run kept.
    assert h.target().cleanup_orphans() == 1
    assert h.leftovers(job) == []


CRASHING_AGENT = textwrap.dedent(
    """
    import os, sys, threading
    from workflow_agent.config import AgentConfig
    from workflow_agent.targets.base import JobSpec, Step
    from workflow_agent.targets.docker import DockerTarget

    base, instance, tok, image = sys.argv[1:5]
    cfg = AgentConfig(token="pul-test", shared_volume_directory=base, pull_image=False)
    target = DockerTarget(cfg, instance)
    step = Step(1, "s", f"sleep {tok} >/dev/null 2>&1 & echo started")
    job = JobSpec(job_id="crashed-job", run_id="r", image=image, steps=(step,))
    target.prepare(job)
    target.run_step(job, step, print, threading.Event())
    os._exit(0)  # the agent dies without cleanup
    """
)


def test_orphans_of_a_crashed_agent_are_removed_on_start(docker_harness):
    h = docker_harness
    tok = token()
    proc = subprocess.run(
        [sys.executable, "-c", CRASHING_AGENT, str(h.base), h.instance, tok, JOB_IMAGE],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["started"]
    assert len(h.containers()) == 1
    assert len(_jobdir.find(h.base, h.instance)) == 1
    assert host_processes_with(tok) != []

    other = h.target(instance=h.instance + "-other")
    other_job = h.job("true")
    other.prepare(other_job)
    try:
        assert h.target().cleanup_orphans() == 1
        assert h.containers() == []
        assert _jobdir.find(h.base, h.instance) == []
        assert host_processes_with(tok) == []
        assert len(h.containers(instance=h.instance + "-other")) == 1
    finally:
        other.cleanup(other_job)
    assert h.containers(instance=h.instance + "-other") == []


def test_live_jobs_are_not_orphans(docker_harness):
    h = docker_harness
    target = h.target()
    job = h.job("true")
    target.prepare(job)
    try:
        assert target.cleanup_orphans() == 0
        assert len(h.containers(job)) == 1
    finally:
        target.cleanup(job)


def test_a_stopped_container_makes_the_step_an_error_not_a_hang(docker_harness):
    h = docker_harness
    target = h.target()
    job = h.job("echo started; sleep 300", timeout=300)
    target.prepare(job)
    try:
        [container] = h.containers(job)
        cancel = threading.Event()

        def on_line(line: str) -> None:
            threading.Thread(target=container.kill, daemon=True).start()

        out = target.run_step(job, job.steps[0], on_line, cancel)
        assert out.reason in ("error", "exited") and not out.succeeded, out
    finally:
        target.cleanup(job)
    assert h.leftovers(job) == []


def test_make_target_builds_the_docker_target(docker_harness):
    from workflow_agent.targets import make_target
    from workflow_agent.targets.docker import DockerTarget

    assert isinstance(make_target(docker_harness.config(), "i"), DockerTarget)


def test_opt_ins_off_by_default_engine_and_restricted_profile(docker_harness):
    """job_docker hands the job the agent's engine (its socket); job_security_profile:
    restricted runs it as uid 1000 with no capabilities. By default: neither."""
    h = docker_harness
    probe = (
        "id -u; grep ^CapEff /proc/self/status | cut -f2; "
        '[ -S /var/run/docker.sock ] && echo "engine: $DOCKER_HOST" || echo "no engine"'
    )
    results = {}
    for name, cfg in {
        "default": {},
        "engine": {"job_docker": True},
        "restricted": {"job_security_profile": "restricted"},
    }.items():
        target = h.target(cfg=cfg)
        job = h.job(probe)
        target.prepare(job)
        try:
            results[name] = run_steps(target, job).lines[0]
        finally:
            target.cleanup(job)
    assert results["default"][0] == "0" and results["default"][2] == "no engine"
    assert results["engine"][2] == "engine: unix:///var/run/docker.sock"
    uid, caps, _ = results["restricted"]
    assert uid == "1000" and int(caps, 16) == 0


def test_oidc_token_reaches_its_file_through_the_keepalive_not_an_exec(docker_harness):
    """The keepalive writes the token from its attached stdin before it says it is ready: the
    file is there once prepare returns, no exec ran for it, and the token is in neither the
    container's log nor its config."""
    h = docker_harness
    target = h.target()
    secret = f"eyJ0eXAiOiJKV1QifQ.{token()}"
    job = h.job("true", oidc_token=secret)
    target.prepare(job)
    try:
        [container] = h.containers(job)
        assert container.attrs["ExecIDs"] is None  # nothing exec'd yet
        check = container.exec_run(["/bin/sh", "-c", "stat -c %a /mnt/pulumi/pulumi.oidc"])
        assert check.output.decode().strip() == "600"
        read = container.exec_run(["cat", "/mnt/pulumi/pulumi.oidc"])
        assert read.output.decode() == secret
        assert secret not in container.logs().decode()
        assert secret not in h.inspect(job)
    finally:
        target.cleanup(job)
    assert h.leftovers(job) == []
