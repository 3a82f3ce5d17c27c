"""The behaviour every target owes the agent, each against the real backend (see conftest)."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace

import pytest
from target_harness import run_steps, token

BASH = "bash"  # a JobDefinition `shell`: every job image here and every host has it


def test_three_steps_share_files_and_cleanup_leaves_nothing(harness):
    target = harness.target()
    job = harness.job(
        "echo one; echo to-stderr >&2",
        "printf 'made by step 2\\n' > handoff.txt",
        "cat handoff.txt",
    )
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert [o.succeeded for o in res.outcomes] == [True, True, True], res.outcomes
    assert res.lines[0] == ["one", "to-stderr"]
    assert res.lines[1] == []
    assert res.lines[2] == ["made by step 2"]
    assert harness.leftovers(job) == []
    target.cleanup(job)  # idempotent
    assert harness.leftovers(job) == []


def test_failing_step_reports_its_exit_code(harness):
    target = harness.target()
    job = harness.job("echo before; exit 3", "touch never-created")
    target.prepare(job)
    try:
        res = run_steps(target, job)
        assert len(res.outcomes) == 1
        out = res.outcomes[0]
        assert (out.exit_code, out.reason, out.succeeded) == (3, "exited", False)
        assert res.lines[0] == ["before"]
    finally:
        target.cleanup(job)
    assert harness.leftovers(job) == []


def test_output_without_final_newline_and_blank_lines(harness):
    target = harness.target()
    job = harness.job("printf 'a\\n\\nb\\r\\nlast'")
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert res.lines[0] == ["a", "", "b", "last"]


def _cancel_on(marker, cancel, lines, harness=None, tok=None, job=None):
    """on_line that sets `cancel` once `marker` is printed (and `sleep <tok>` is running).

    Waiting for the sleep avoids a race in the test itself: a TERM that lands between the
    shell's fork and the child's exec is swallowed by the child's inherited trap.
    """

    def wait_then_cancel() -> None:
        deadline = time.monotonic() + 60
        while not harness.running(tok, job) and time.monotonic() < deadline:
            time.sleep(0.05)
        cancel.set()

    def on_line(line: str) -> None:
        lines.append(line)
        if line == marker:
            if harness is None:
                cancel.set()
            else:
                threading.Thread(target=wait_then_cancel, daemon=True).start()

    return on_line


def test_cancel_mid_step_terms_the_step_and_its_children(harness):
    """The step traps TERM and records it: cancel reached it, and nothing of it is left."""
    target = harness.target(grace=60.0)
    tok = token()
    job = harness.job(
        f"trap 'echo got-term; touch terminated; exit 0' TERM; sleep {tok} & echo started; wait",
        "cat terminated",
        timeout=300,
    )
    target.prepare(job)
    try:
        cancel = threading.Event()
        lines: list[str] = []
        on_line = _cancel_on("started", cancel, lines, harness, tok, job)
        out = target.run_step(job, job.steps[0], on_line, cancel)
        assert (out.reason, out.exit_code) == ("canceled", None), out
        assert lines == ["started", "got-term"]
        assert harness.running(tok, job) == []
        # The trap ran to the end: the shared dir holds its file (read by a fresh step).
        check: list[str] = []
        after = target.run_step(job, job.steps[1], check.append, threading.Event())
        assert after.succeeded and check == [], (after, check)
    finally:
        target.cleanup(job)
    assert harness.leftovers(job) == []


def test_cancel_kills_a_step_that_ignores_term(harness):
    target = harness.target(grace=1.0)
    tok = token()
    job = harness.job(f"trap '' TERM; echo started; sleep {tok}; echo not-reached", timeout=300)
    target.prepare(job)
    try:
        cancel = threading.Event()
        lines: list[str] = []
        out = target.run_step(job, job.steps[0], _cancel_on("started", cancel, lines), cancel)
        assert out.reason == "canceled" and out.exit_code is None
        assert lines == ["started"]
        assert harness.running(tok, job) == []
    finally:
        target.cleanup(job)
    assert harness.leftovers(job) == []


def test_cancel_before_the_step_runs_nothing(harness):
    target = harness.target()
    job = harness.job("touch ran")
    target.prepare(job)
    try:
        cancel = threading.Event()
        cancel.set()
        out = target.run_step(job, job.steps[0], [].append, cancel)
        assert out.reason == "canceled"
        lines: list[str] = []
        probe = harness.job("test -e ran && echo ran || echo absent", job_id=job.job_id)
        target.run_step(job, probe.steps[0], lines.append, threading.Event())
        assert lines == ["absent"]
    finally:
        target.cleanup(job)


def test_step_timeout_kills_the_step(harness):
    target = harness.target(grace=2.0)
    tok = token()
    job = harness.job(f"echo started; sleep {tok}", timeout=1.5)
    target.prepare(job)
    try:
        res = run_steps(target, job)
        out = res.outcomes[0]
        assert (out.reason, out.exit_code, out.succeeded) == ("timeout", None, False)
        assert res.lines[0] == ["started"]
        assert harness.running(tok, job) == []
    finally:
        target.cleanup(job)
    assert harness.leftovers(job) == []


def test_no_time_left_means_the_step_does_not_start(harness):
    target = harness.target()
    job = harness.job("echo should-not-run", timeout=0)
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert res.outcomes[0].reason == "timeout"
    assert res.lines[0] == []


def test_environment_is_exactly_the_job_env(harness, monkeypatch):
    """The agent's own environment never reaches a step; JobSpec.env does, verbatim."""
    monkeypatch.setenv("WFA_TARGETS_AGENT_ONLY", "must-not-leak")
    target = harness.target()
    odd = 'quote\' "double" $dollar `tick` back\\slash\nsecond line\n'
    job = harness.job(
        r"env | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' | sort",
        'printf "%s|" "$WFA_ODD"',
        env={"WFA_ALLOWLISTED": "present", "WFA_ODD": odd},
    )
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    names = set(res.lines[0])
    assert "WFA_TARGETS_AGENT_ONLY" not in names
    assert {"WFA_ALLOWLISTED", "WFA_ODD"} <= names
    # Whatever else is there comes from the shell, the image or the target's documented
    # defaults (HOME, PATH), never from the agent.
    extra = {n for n in names - {"WFA_ALLOWLISTED", "WFA_ODD"} if not harness.extra_env_ok(n)}
    assert extra == set()
    assert res.lines[1] == (odd + "|").split("\n")


@pytest.mark.parametrize("bad", ["", "job/../../escape", "Weird Id!"])
def test_odd_job_ids_stay_inside_the_base_dir(harness, bad):
    target = harness.target()
    job = harness.job("pwd", job_id=bad or "x")
    target.prepare(job)
    try:
        res = run_steps(target, job)
        assert res.outcomes[0].succeeded
    finally:
        target.cleanup(job)
    assert harness.leftovers(job) == []
    assert not (harness.base.parent / "escape").exists()


def test_job_shell_and_step_working_directory(harness):
    """JobDefinition `shell` and `steps[].workingDir` [RE]: bash-only syntax works, a relative
    working directory is relative to the job's work directory, files still shared."""
    target = harness.target()
    job = harness.job("mkdir -p src/deep && echo made > src/deep/f", 'echo "$0"; cat f; pwd')
    job = replace(job, shell=BASH, steps=(job.steps[0], replace(job.steps[1], workdir="src/deep")))
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert [o.succeeded for o in res.outcomes] == [True, True], res
    assert res.lines[1][:2] == ["bash", "made"]
    assert res.lines[1][2].endswith("/src/deep")
    assert harness.leftovers(job) == []


def test_missing_working_directory_fails_the_step(harness):
    target = harness.target()
    job = harness.job("touch never")
    job = replace(job, steps=(replace(job.steps[0], workdir="no-such-dir"),))
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert not res.outcomes[0].succeeded
    said = " ".join([*res.lines[0], res.outcomes[0].detail])
    assert "no-such-dir" in said, res


def test_oidc_token_is_a_variable_and_a_private_file(harness):
    """The claim's oidcToken, as Pulumi Deployments gives it [DOC]: PULUMI_OIDC_TOKEN in every
    step's environment, and a 0600 file (docker and kubernetes: /mnt/pulumi/pulumi.oidc), yet in
    neither the container's config nor the pod's spec."""
    target = harness.target()
    token = f"eyJ0eXAiOiJKV1QifQ.eyJzdWIiOiJqb2IifQ.{uuid.uuid4().hex}"
    job = harness.job(
        'echo "$PULUMI_OIDC_TOKEN"',
        'f=/mnt/pulumi/pulumi.oidc; [ -e $f ] || f=../pulumi.oidc; stat -c %a "$f"; cat "$f"; echo',
        oidc_token=token,
    )
    target.prepare(job)
    try:
        res = run_steps(target, job)
        inspected = harness.inspect(job)
    finally:
        target.cleanup(job)
    assert [o.succeeded for o in res.outcomes] == [True, True], res
    assert res.lines[0] == [token]
    mode, content = res.lines[1]
    assert mode == "600" and content == token
    assert token not in inspected  # nor in the container's config or the pod's spec
    assert harness.leftovers(job) == []


def test_job_runtime_pulumi_env_executor_and_ca_bundle(harness, tmp_path):
    """The job runtime every target gives (docs/protocol.md, "Job runtime"): NAME=value lines a
    step appends to $PULUMI_ENV reach the later steps (with the `Loading PULUMI_ENV from` line);
    the executor is placed at $PULUMI_DEPLOY_EXECUTOR, runnable; the CA bundle is one file that
    SSL_CERT_FILE and its kin name."""
    target = harness.target()
    executor = tmp_path / "pulumi-deploy-executor"
    executor.write_bytes(b'#!/bin/sh\necho executor ran with "$@"\n')
    bundle = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    job = harness.job(
        'echo "GREETING=hello there" >> "$PULUMI_ENV"; echo \'QUOTED="q v"\' >> "$PULUMI_ENV"',
        'echo "$GREETING|$QUOTED"; "$PULUMI_DEPLOY_EXECUTOR" update',
        'cat "$SSL_CERT_FILE"; for v in CURL_CA_BUNDLE GIT_SSL_CAINFO REQUESTS_CA_BUNDLE '
        'NODE_EXTRA_CA_CERTS; do eval "test \\"\\$$v\\" = \\"$SSL_CERT_FILE\\"" || echo "$v"; done',
        executor=str(executor),
        ca_bundle=bundle,
    )
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert [o.succeeded for o in res.outcomes] == [True, True, True], res
    loading, *rest = res.lines[1]
    assert loading.startswith("[workflow-agent] Loading PULUMI_ENV from /")
    assert rest == ["hello there|q v", "executor ran with update"]
    assert res.lines[2][1:] == bundle.decode().splitlines()  # after its `Loading` line
    assert harness.leftovers(job) == []


def test_a_bad_pulumi_env_line_fails_the_next_step_without_showing_it(harness):
    target = harness.target()
    job = harness.job(
        'printf "GOOD=1\\nnot-a-variable-s3cret\\n" >> "$PULUMI_ENV"', "echo never printed"
    )
    target.prepare(job)
    try:
        res = run_steps(target, job)
    finally:
        target.cleanup(job)
    assert res.outcomes[0].succeeded and not res.outcomes[1].succeeded
    assert res.outcomes[1].exit_code == 2
    said = "\n".join(res.lines[1])
    assert "line 2 is not NAME=value" in said and "never printed" not in said
    assert "s3cret" not in said
