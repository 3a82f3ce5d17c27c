"""End to end: real `workflow-agent run` processes against the real emulator, process target.

No timed assertions: every wait is a generous deadline; long-running steps wait on gate files
that the test creates when it is ready.
"""

from __future__ import annotations

import signal
import subprocess

from agent_harness import WAIT, wait_for

SECRET = "s3cr3t-value-42"


def gate_step(gate, name="wait", then="echo released"):
    """A step that runs until the test creates `gate`."""
    return {"name": name, "run": f"while [ ! -e '{gate}' ]; do sleep 0.1; done; {then}"}


def metrics_once(agent, *lines):
    """/metrics once it shows every line: the emulator derives a job's end from its last step
    report, which the agent sends before it counts the job in its own metrics."""

    def shown():
        _, text = agent.get("/metrics")
        return text if all(line in text for line in lines) else None

    return wait_for(shown, what=f"/metrics showing {lines}")


def step_status(job, index):
    return next(s["status"] for s in job["steps"] if s["index"] == index)


def test_agent_completes_jobs_through_the_process_target(emu, make_agent):
    agent = make_agent(env_forward_allowlist=["WFA_FORWARDED"]).start(
        env={"WFA_FORWARDED": "from-host", "WFA_NOT_FORWARDED": "hidden"}
    )
    good = emu.create_job(
        steps=[
            {"name": "hello", "run": 'echo "hello $PLAIN $SECRET_ONE"; echo note > f.txt'},
            {"name": "env", "run": 'cat f.txt; echo "fwd=$WFA_FORWARDED nf=$WFA_NOT_FORWARDED"'},
            {"name": "many", "run": "i=0; while [ $i -lt 250 ]; do echo line$i; i=$((i+1)); done"},
        ],
        env={"PLAIN": "plain", "SECRET_ONE": {"secret": SECRET}},
    )
    bad = emu.create_job(
        steps=[
            {"name": "fails", "run": "echo about to fail; exit 3"},
            {"name": "never", "run": "echo should not run"},
        ]
    )
    done = {j["id"]: j for j in emu.wait_jobs([good, bad], timeout=WAIT)}

    ok = done[good]
    assert ok["status"] == "succeeded"
    assert [s["status"] for s in ok["steps"]] == ["succeeded"] * 3
    logs = {s["name"]: s["logs"] for s in ok["steps"]}
    assert logs["hello"] == ["hello plain [secret]"]
    assert logs["env"] == ["note", "fwd=from-host nf="]
    assert logs["many"] == [f"line{i}" for i in range(250)]

    failed = done[bad]
    assert failed["status"] == "failed"
    assert [s["status"] for s in failed["steps"]] == ["failed", "not-started"]
    assert failed["steps"][0]["logs"][0] == "about to fail"
    assert "exit code 3" in failed["steps"][0]["logs"][-1]
    assert "exit code 3" in failed["reason"]

    status, health = agent.get("/healthz")
    assert status == 200 and health["status"] == "healthy"
    assert set(health) == {"status", "currentTime", "lastActivity"}
    assert agent.get("/readyz") == (200, {"status": "ready"})
    metrics_once(
        agent,
        'workflow_agent_jobs_total{result="succeeded",type="deployment"} 1.0',
        'workflow_agent_jobs_total{result="failed",type="deployment"} 1.0',
    )
    [seen] = emu.agents()
    assert seen["id"].endswith("/agent")  # <hostname>/<WORKFLOW_AGENT_INSTANCE>
    assert seen["user_agent"].startswith("workflow-agent/")

    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0


def test_token_never_in_stderr_ps_or_job_env(emu, make_agent):
    agent = make_agent(log_level="debug", env_forward_allowlist=["PULUMI_AGENT_TOKEN"]).start(
        env={"PULUMI_AGENT_TOKEN": emu.pool_token}
    )
    job = emu.create_job(steps=[{"name": "env", "run": 'echo "tok=$PULUMI_AGENT_TOKEN"; env'}])
    [done] = emu.wait_jobs([job], timeout=WAIT)
    assert done["status"] == "succeeded"
    shipped = "\n".join(done["steps"][0]["logs"])
    assert "tok=" in shipped and emu.pool_token not in shipped
    ps = subprocess.run(
        ["ps", "-ww", "-o", "args=", "-p", str(agent.proc.pid)], capture_output=True, text=True
    )
    assert "workflow-agent" in ps.stdout or "workflow_agent" in ps.stdout
    assert emu.pool_token not in ps.stdout
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0
    assert "not forwarding PULUMI_AGENT_TOKEN" in agent.stderr
    assert emu.pool_token not in agent.stderr


def test_single_run_exit_codes(emu, make_agent):
    emu.create_job(steps=[{"name": "ok", "run": "true"}])
    ok_agent = make_agent("ok", single_run=True).start()
    assert ok_agent.wait() == 0
    emu.create_job(steps=[{"name": "no", "run": "exit 1"}])
    failing = make_agent("failing", single_run=True).start()
    assert failing.wait() == 1
    assert sorted(j["status"] for j in emu.jobs()) == ["failed", "succeeded"]


def test_sigterm_drains_the_running_job_and_claims_nothing_more(emu, make_agent, tmp_path):
    gate = tmp_path / "gate"
    agent = make_agent().start()
    running = emu.create_job(steps=[gate_step(gate)])
    wait_for(lambda: emu.job(running)["status"] == "running", what="job running")

    agent.signal(signal.SIGTERM)
    wait_for(lambda: agent.get("/readyz")[0] == 503, what="readyz 503")
    assert agent.get("/readyz") == (503, {"status": "draining"})
    later = emu.create_job(steps=[{"name": "later", "run": "true"}])
    assert agent.get("/healthz")[0] == 200  # draining is not unhealthy
    gate.touch()

    assert agent.wait() == 0
    assert emu.job(running)["status"] == "succeeded"
    assert emu.job(running)["steps"][0]["logs"] == ["released"]
    after = emu.job(later)
    assert after["status"] == "not-started" and after["claims"] == []


def test_drain_timeout_cancels_and_reports(emu, make_agent, tmp_path):
    agent = make_agent(drain_timeout="500ms").start()
    stuck = emu.create_job(steps=[gate_step(tmp_path / "never")])
    wait_for(lambda: emu.job(stuck)["status"] == "running", what="job running")
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0
    job = emu.job(stuck)
    assert job["status"] == "failed"
    assert "drain_timeout" in job["reason"]
    assert step_status(job, 1) == "failed"


def test_second_sigterm_cancels_now(emu, make_agent, tmp_path):
    agent = make_agent().start()
    stuck = emu.create_job(steps=[gate_step(tmp_path / "never")])
    wait_for(lambda: emu.job(stuck)["status"] == "running", what="job running")
    agent.signal(signal.SIGTERM)
    wait_for(lambda: agent.get("/readyz")[0] == 503, what="draining")
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0
    job = emu.job(stuck)
    assert job["status"] == "failed" and "the agent is stopping" in job["reason"]


def test_sigquit_cancels_now(emu, make_agent, tmp_path):
    agent = make_agent().start()
    stuck = emu.create_job(steps=[gate_step(tmp_path / "never")])
    wait_for(lambda: emu.job(stuck)["status"] == "running", what="job running")
    agent.signal(signal.SIGQUIT)
    assert agent.wait() == 0
    assert "the agent is stopping" in emu.job(stuck)["reason"]


def test_service_cancel_stops_the_step(emu, make_agent, tmp_path):
    agent = make_agent().start()
    stuck = emu.create_job(steps=[gate_step(tmp_path / "never"), {"name": "after", "run": "true"}])
    wait_for(lambda: emu.job(stuck)["status"] == "running", what="job running")
    emu.cancel(stuck, "canceled by test")
    wait_for(lambda: step_status(emu.job(stuck), 1) == "failed", what="step stopped")
    job = emu.job(stuck)
    assert job["status"] == "canceled"
    assert step_status(job, 2) == "not-started"
    assert "canceled" in job["steps"][0]["logs"][-1]
    wait_for(lambda: "job canceled" in agent.stderr, what="agent reports the cancel")
    # The slot is free again: the next job runs.
    nxt = emu.create_job(steps=[{"name": "next", "run": "echo next"}])
    assert emu.wait_jobs([nxt], timeout=WAIT)[0]["status"] == "succeeded"


def test_step_and_job_timeouts(emu, make_agent, tmp_path):
    make_agent().start()
    step_limited = emu.create_job(
        steps=[{"name": "slow", "run": "echo start; sleep 60", "timeout": "1s"}]
    )
    job_limited = emu.create_job(
        steps=[{"name": "slow", "run": "sleep 60", "timeout": "1h"}], timeout="1s"
    )
    done = {j["id"]: j for j in emu.wait_jobs([step_limited, job_limited], timeout=WAIT)}
    assert done[step_limited]["status"] == "failed"
    assert "step 1 (slow) timed out" in done[step_limited]["reason"]
    assert done[step_limited]["steps"][0]["logs"][0] == "start"
    assert done[job_limited]["status"] == "failed"
    assert "job timed out in step 1" in done[job_limited]["reason"]


def test_agent_rides_out_injected_faults(emu, make_agent):
    emu.faults(rate_429=0.2, rate_503=0.2, retry_after=0, seed=7, budget=40)
    make_agent(request_retry_count=6, circuit_breaker_failures=50).start()
    ids = emu.create_jobs(5, steps=[{"name": "s", "run": "echo one; echo two"}])
    done = emu.wait_jobs(ids, timeout=WAIT)
    assert [j["status"] for j in done] == ["succeeded"] * 5
    assert all(j["steps"][0]["logs"] == ["one", "two"] for j in done)


def test_oidc_mode(emu, make_agent, tmp_path):
    token_file = tmp_path / "oidc-token"
    token_file.write_text(emu.mint_oidc(org=emu.org))
    agent = make_agent(
        token="",
        oidc_token_file=str(token_file),
        organization_name=emu.org,
        runner_pool_id="default",
    ).start()
    job = emu.create_job(steps=[{"name": "s", "run": "echo via oidc"}])
    [done] = emu.wait_jobs([job], timeout=WAIT)
    assert done["status"] == "succeeded" and done["steps"][0]["logs"] == ["via oidc"]
    assert "oidc: exchanged the id token" in agent.stderr
    assert token_file.read_text() not in agent.stderr


def test_several_slots_run_jobs_side_by_side(emu, make_agent, tmp_path):
    gate = tmp_path / "gate"
    agent = make_agent(slots=3).start()
    ids = [emu.create_job(steps=[gate_step(gate)]) for _ in range(3)]
    wait_for(
        lambda: all(emu.job(i)["status"] == "running" for i in ids), what="3 jobs running at once"
    )
    status, metrics = agent.get("/metrics")
    assert 'workflow_agent_busy_slots{type="deployment"} 3.0' in metrics
    gate.touch()
    assert [j["status"] for j in emu.wait_jobs(ids, timeout=WAIT)] == ["succeeded"] * 3


def test_lease_poller_runs_insights_and_policy_jobs(emu, make_agent):
    agent = make_agent(enabled_workflow_types=["insights_scan", "policy_evaluation"]).start()
    deployment = emu.create_job(steps=[{"name": "d", "run": "true"}])
    scan = emu.create_job(steps=[{"name": "scan", "run": "echo scanning"}], type="insights_scan")
    policy = emu.create_job(steps=[{"name": "p", "run": "echo policy"}], type="policy_evaluation")
    done = {j["id"]: j for j in emu.wait_jobs([scan, policy], timeout=WAIT)}
    assert done[scan]["status"] == "succeeded" and done[scan]["steps"][0]["logs"] == ["scanning"]
    assert done[policy]["status"] == "succeeded"
    assert emu.job(deployment)["status"] == "not-started"  # deployments are not enabled here
    metrics_once(agent, 'workflow_agent_jobs_total{result="succeeded",type="insights_scan"} 1.0')
