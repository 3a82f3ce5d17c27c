"""A job's life over the wire: definition, steps, logs, heartbeats, outcome, cancel, timeouts.

There is no job-level status call [RE]: the job's outcome follows from its step reports."""

from emu_helpers import STEPS


def test_full_lifecycle_as_the_agent_drives_it(emu, agent):
    job_id = emu.create_job(
        STEPS,
        image={"reference": "local/job:1", "credentials": {"username": "u", "password": "pw"}},
        env={"PLAIN": "v", "SECRET_ONE": {"secret": "s3cr3t"}},
        timeout="30m",
    )
    claim = agent.claim()
    assert agent.ack(claim).status_code == 200
    job = agent.job(claim)
    d = job.definition().json()
    assert d["os"] == "linux" and d["architecture"] == "amd64"
    assert d["image"] == {
        "reference": "local/job:1",
        "credentials": {"username": "u", "password": {"secret": "pw"}},
    }
    assert d["timeout"] == "30m0s"
    assert d["env"] == {"PLAIN": "v", "SECRET_ONE": {"secret": "s3cr3t"}}
    assert d["steps"] == [{"name": "checkout", "run": ""}, *STEPS]  # step 0 is reserved

    assert job.step(1, "running").status_code == 200
    assert agent.status(claim).json() == "running"
    assert job.logs(1, 0, ["a", "b"]).json() == {"offset": 2}
    assert job.logs(1, 2, ["c"]).json() == {"offset": 3}
    assert job.heartbeat().status_code == 200
    assert job.step(1, "succeeded").status_code == 200
    assert job.step(2, "running").status_code == 200
    assert job.logs(2, 0, ["deployed"]).json() == {"offset": 1}
    assert agent.status(claim).json() == "running"
    assert job.step(2, "succeeded").status_code == 200  # the last step: the job succeeded
    assert agent.status(claim).json() == "succeeded"

    view = emu.job(job_id)
    assert view["status"] == "succeeded"
    assert view["agent"] == "host-1/1"
    assert view["heartbeats"] == 1
    assert [(s["index"], s["name"], s["status"], s["logs"]) for s in view["steps"]] == [
        (1, "build", "succeeded", ["a", "b", "c"]),
        (2, "deploy", "succeeded", ["deployed"]),
    ]
    # The admin view never shows secret values.
    assert view["env"] == {"PLAIN": "v", "SECRET_ONE": "[secret]"}
    assert view["image"]["credentials"]["password"] == "[secret]"
    assert emu.wait_jobs([job_id], timeout=5)[0]["status"] == "succeeded"


def test_log_offsets_gap_and_repeat_are_409_with_expected_offset(emu, agent):
    emu.create_job(STEPS)
    job = agent.job(agent.claim())
    assert job.logs(1, 0, ["one", "two"]).status_code == 200
    gap = job.logs(1, 5, ["x"])
    assert gap.status_code == 409
    assert gap.json()["expectedOffset"] == 2 and "error" in gap.json()
    repeat = job.logs(1, 0, ["one", "two"])  # a batch that landed but whose answer was lost
    assert repeat.status_code == 409
    assert repeat.json()["expectedOffset"] == 2
    assert job.logs(1, 2, []).json() == {"offset": 2}  # an empty batch at the right offset
    assert job.logs(2, 0, ["other step"]).json() == {"offset": 1}  # offsets are per step


def test_step_reports_are_idempotent_and_final(emu, agent):
    emu.create_job(STEPS)
    job = agent.job(agent.claim())
    assert job.step(1, "running").status_code == 200
    assert job.step(1, "running").status_code == 200
    assert job.step(1, "failed").status_code == 200
    assert job.step(1, "failed").status_code == 200
    again = job.step(1, "succeeded")
    assert again.status_code == 409 and "already failed" in again.json()["error"]


def test_failed_step_fails_the_job_and_leaves_later_steps_not_started(emu, agent):
    job_id = emu.create_job(STEPS)
    claim = agent.claim()
    job = agent.job(claim)
    job.step(1, "running")
    job.logs(1, 0, ["compiling", "[workflow-agent] step failed: exit code 3"])
    job.step(1, "failed")
    view = emu.job(job_id)
    assert view["status"] == "failed" and view["result"] == "failed"
    assert view["reason"] == "step 1 (build) failed: [workflow-agent] step failed: exit code 3"
    assert [s["status"] for s in view["steps"]] == ["failed", "not-started"]
    assert agent.status(claim).json() == "failed"


def test_skipped_steps_count_as_done(emu, agent):
    job_id = emu.create_job(STEPS)
    job = agent.job(agent.claim())
    job.step(1, "succeeded")
    assert emu.job(job_id)["status"] != "succeeded"  # step 2 has not reported
    job.step(2, "skipped")
    assert emu.job(job_id)["status"] == "succeeded"


def test_step_0_is_not_needed_for_the_outcome(emu, agent):
    """The runner skips step 0 (reserved for the source checkout) and reports nothing for it."""
    job_id = emu.create_job(STEPS)
    job = agent.job(agent.claim())
    for index in (1, 2):
        job.step(index, "running")
        job.step(index, "succeeded")
    view = emu.job(job_id)
    assert view["status"] == "succeeded" and view["reason"] == ""


def test_cancel_a_running_job_reads_failed_on_the_wire_canceled_in_admin(emu, agent):
    job_id = emu.create_job(STEPS)
    claim = agent.claim()
    agent.ack(claim)
    job = agent.job(claim)
    job.step(1, "running")
    view = emu.cancel(job_id, "operator said so")
    assert view["status"] == "canceled" and view["reason"] == "operator said so"
    assert agent.status(claim).json() == "failed"
    # The agent stops the job and reports the step; the service's word stands.
    assert job.step(1, "failed").status_code == 200
    view = emu.job(job_id)
    assert view["status"] == "canceled" and view["result"] == "failed"
    again = emu.admin("POST", f"/admin/jobs/{job_id}/cancel")
    assert again.status_code == 409


def test_skip_reads_skipped_on_the_wire(emu, agent):
    job_id = emu.create_job(STEPS)
    claim = agent.claim()
    view = emu.cancel(job_id, "a fresher deployment is queued", status="skipped")
    assert view["status"] == "skipped"
    assert agent.status(claim).json() == "skipped"
    bad = emu.admin("POST", f"/admin/jobs/{emu.create_job(STEPS)}/cancel", {"status": "done"})
    assert bad.status_code == 400


def test_cancel_a_queued_job_is_never_delivered(emu, agent):
    first = emu.create_job(STEPS)
    second = emu.create_job(STEPS)
    emu.cancel(first)
    assert agent.claim()["jobID"] == second
    assert agent.poll().status_code == 204
    assert emu.job(first)["claims"] == []


def test_heartbeat_timeout_fails_a_deployment_and_never_redelivers(emu, agent):
    job_id = emu.create_job(STEPS)
    claim = agent.claim()
    job = agent.job(claim)
    emu.advance_clock(500)
    assert job.heartbeat().status_code == 200  # 500 s < 10 min: still alive, and renewed
    emu.advance_clock(500)
    assert emu.job(job_id)["status"] == "not-started"
    emu.advance_clock(101)  # 601 s without a heartbeat
    view = emu.job(job_id)
    assert view["status"] == "failed"
    assert view["reason"].startswith("no heartbeat for 10m")
    assert agent.status(claim).json() == "failed"
    assert agent.poll().status_code == 204  # never redelivered
    assert len(emu.job(job_id)["claims"]) == 1
    # A late agent is not turned away, but the job stays failed.
    assert job.heartbeat().status_code == 200
    assert job.step(1, "succeeded").status_code == 200
    assert job.step(2, "succeeded").status_code == 200
    view = emu.job(job_id)
    assert view["status"] == "failed" and view["result"] == "succeeded"


def test_lease_expiry_requeues_for_another_runner(emu, make_agent):
    job_id = emu.create_job(STEPS, type="insights_scan")
    a, b = make_agent(hostname="a"), make_agent(hostname="b")
    lease = a.http.post("/api/background-activities/worker/lease/acquire").json()
    a.job(lease).logs(1, 0, ["partial"])
    emu.advance_clock(601)
    assert emu.job(job_id)["status"] == "not-started"
    again = b.http.post("/api/background-activities/worker/lease/acquire").json()
    assert again["jobID"] == job_id and again["jobToken"] != lease["jobToken"]
    assert a.job(lease).heartbeat().status_code == 401  # the old lease's token is dead
    assert b.job(again).logs(1, 0, ["fresh"]).json() == {"offset": 1}
    view = emu.job(job_id)
    assert [c["agent"] for c in view["claims"]] == ["a/1", "b/1"]
    assert view["steps"][0]["logs"] == ["fresh"]


def test_wrong_job_token_is_401_and_unknown_job_404(emu, agent):
    emu.create_job(STEPS)
    emu.create_job(STEPS)
    one, two = agent.claim(), agent.claim()
    forged = dict(one, jobToken=two["jobToken"])
    assert agent.job(forged).definition().status_code == 401
    assert agent.job(dict(one, jobID="job-nope")).definition().status_code == 404
    assert agent.job(one).definition().status_code == 200


def test_agent_registry_keys_and_online_window(emu, make_agent):
    a = make_agent(hostname="web-1", instance="3")
    b = make_agent(hostname="web-2", instance=None, pid=4242)
    a.poll()
    b.poll()
    agents = {x["id"]: x for x in emu.agents(online_within=60)}
    assert set(agents) == {"web-1/3", "web-2/4242"}
    assert agents["web-1/3"]["version"] == "9.9.9"
    assert agents["web-1/3"]["platform"] == "linux/amd64"
    assert agents["web-2/4242"]["pid"] == "4242" and agents["web-2/4242"]["instance"] is None
    emu.advance_clock(45)
    a.poll()
    emu.advance_clock(30)
    assert [x["id"] for x in emu.agents(online_within=60)] == ["web-1/3"]
    assert len(emu.agents(online_within=None)) == 2
    assert emu.agents(online_within=60, pool="default")[0]["pool"] == "default"
    assert emu.agents(online_within=60, pool=emu.create_pool("p2")["id"]) == []


def test_admin_job_listing_filters(emu, agent):
    a = emu.create_job(STEPS)
    b = emu.create_job(STEPS, type="policy_evaluation")
    emu.cancel(b)
    assert [j["id"] for j in emu.jobs("canceled")] == [b]
    assert [j["id"] for j in emu.jobs("not-started,canceled")] == [a, b]
    resp = emu.admin("GET", "/admin/jobs", params={"type": "deployment"})
    assert [j["id"] for j in resp.json()["jobs"]] == [a]


def test_service_env_gives_the_job_its_way_back(emu, agent):
    """A deployment calls the service back with PULUMI_ACCESS_TOKEN [DOC] (the job token here,
    as in HappyPumi) at the backend URL [RE]; the job's own env wins on a clash."""
    emu.create_job(STEPS, service_env=True, env={"PULUMI_BACKEND_URL": "http://mine"})
    emu.create_job(STEPS)
    first, second = agent.claim(), agent.claim()
    env = agent.job(first).definition().json()["env"]
    assert env == {
        "PULUMI_BACKEND_URL": "http://mine",
        "PULUMI_ACCESS_TOKEN": {"secret": first["jobToken"]},
    }
    assert agent.job(second).definition().json()["env"] == {}
    bad = emu.admin("POST", "/admin/jobs", {"steps": STEPS, "service_env": "yes"})
    assert bad.status_code == 400


def test_shell_and_working_dir_are_passed_through(emu, agent):
    steps = [{"name": "build", "run": "make", "workingDir": "src"}]
    emu.create_job(steps, **{"shell": "bash"})  # the JobDefinition field, not subprocess
    d = agent.job(agent.claim()).definition().json()
    assert d["shell"] == "bash"
    assert d["steps"][1] == {"name": "build", "run": "make", "workingDir": "src"}
