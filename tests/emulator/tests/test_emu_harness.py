"""workflow_emulator.testing.Emulator itself, and settings that need their own server."""

import pytest
from emu_helpers import STEPS, Agent
from workflow_emulator.testing import Emulator, EmulatorError


def test_short_heartbeat_timeout_expires_in_real_time(tmp_path):
    """The background sweep fails a silent deployment without any clock advance."""
    with Emulator(state_dir=tmp_path, heartbeat_timeout="1s") as emu:
        job_id = emu.create_job(STEPS)
        agent = Agent(emu)
        agent.claim()
        agent.close()
        assert emu.stats()["heartbeat_timeout"] == 1
        [job] = emu.wait_jobs([job_id], timeout=120)
        assert job["status"] == "failed" and job["reason"].startswith("no heartbeat for")


def test_heartbeats_keep_a_job_alive_across_the_timeout(tmp_path):
    with Emulator(state_dir=tmp_path, heartbeat_timeout="30s") as emu:
        job_id = emu.create_job(STEPS)
        agent = Agent(emu)
        job = agent.job(agent.claim())
        for _ in range(5):
            emu.advance_clock(20)
            assert job.heartbeat().status_code == 200
        assert emu.job(job_id)["status"] == "not-started"
        emu.advance_clock(31)
        assert emu.job(job_id)["status"] == "failed"
        agent.close()


def test_wait_jobs_names_unfinished_jobs_at_its_deadline(emu):
    job_id = emu.create_job(STEPS)
    with pytest.raises(TimeoutError, match=job_id):
        emu.wait_jobs([job_id], timeout=0.3)


def test_wait_agents_and_agents(emu, make_agent):
    for n in range(3):
        make_agent(hostname=f"w{n}").poll()
    assert sorted(a["id"] for a in emu.wait_agents(3, timeout=30)) == ["w0/1", "w1/1", "w2/1"]
    with pytest.raises(TimeoutError, match="3 agents online"):
        emu.wait_agents(4, timeout=0.3)


def test_create_job_errors_carry_the_server_message(emu):
    with pytest.raises(EmulatorError, match="steps must be a non-empty list"):
        emu.create_job([])


def test_restart_keeps_url_and_tokens(emu):
    url = emu.url
    job_id = emu.create_job(STEPS)
    emu.restart()
    assert emu.url == url
    assert emu.job(job_id)["status"] == "not-started"
    agent = Agent(emu)
    assert agent.claim()["jobID"] == job_id
    agent.close()


def test_start_failure_is_reported_with_the_log(tmp_path):
    emu = Emulator(state_dir=tmp_path, heartbeat_timeout="never")
    with pytest.raises(EmulatorError, match="heartbeat-timeout"):
        emu.start()
    assert not emu.running


def test_stop_is_idempotent_and_admin_after_stop_is_an_error(tmp_path):
    emu = Emulator(state_dir=tmp_path)
    emu.start()
    emu.stop()
    emu.stop()
    with pytest.raises(EmulatorError):
        emu.admin("GET", "/admin/stats")
    port = emu.port
    emu.start()  # and it comes back on the same port
    assert emu.running and emu.port == port
    emu.stop()
