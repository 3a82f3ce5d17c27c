"""A restart, clean or a kill, loses nothing: pools, tokens, jobs, claims, logs, agents, clock."""

import os
import stat

from emu_helpers import STEPS, Agent
from workflow_emulator.testing import Emulator


def _populate(emu):
    pool = emu.create_pool("restart-pool")
    queued = emu.create_job(STEPS)
    running = emu.create_job(STEPS)
    agent = Agent(emu, hostname="keeper", instance="7")
    claim = agent.claim()
    assert claim["jobID"] == queued
    agent.ack(claim)
    job = agent.job(claim)
    job.step(1, "running")
    job.logs(1, 0, ["before restart"])
    agent.close()
    emu.advance_clock(5)
    return pool, queued, running, claim


def _check(emu, pool, queued, running, claim):
    assert emu.job(queued)["status"] == "running"
    assert emu.job(queued)["agent"] == "keeper/7"
    agent = Agent(emu, hostname="keeper", instance="7")
    try:
        job = agent.job(claim)
        assert job.logs(1, 1, ["after restart"]).json() == {"offset": 2}  # offsets survived
        assert job.logs(1, 0, ["dup"]).status_code == 409
        assert agent.status(claim).json() == "running"  # the deployment is still known
        # The pool made before the restart still authenticates, and the queue kept its order.
        other = Agent(emu, token=pool["token"], hostname="x")
        assert other.poll().status_code == 204
        other.close()
        assert agent.claim()["jobID"] == running
    finally:
        agent.close()
    assert emu.job(queued)["steps"][0]["logs"] == ["before restart", "after restart"]
    assert emu.stats()["clock_offset"] == 5
    assert {a["id"] for a in emu.agents(online_within=None)} >= {"keeper/7"}
    assert emu.stats()["duplicate_claims"] == []


def test_clean_restart_loses_nothing(emu):
    state = _populate(emu)
    emu.restart()
    _check(emu, *state)


def test_kill_9_loses_nothing(tmp_path):
    with Emulator(state_dir=tmp_path) as emu:
        state = _populate(emu)
        emu.kill()
        emu.start()
        _check(emu, *state)


def test_state_file_is_0600(emu):
    mode = stat.S_IMODE(os.stat(emu.state_file).st_mode)
    assert mode == 0o600
    assert emu.pool_token.encode() not in emu.state_file.read_bytes()  # only hashes are stored
