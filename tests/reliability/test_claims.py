"""Claims: N jobs over M real agent processes give 0 double claims and 0 lost jobs, judged by the
emulator's own record (every claim it handed out, per job and per agent) and by every agent's
/metrics. CI: 2,000 jobs over 20 processes; `WFA_SOAK=1` (make soak): 10,000 over 50.
"""

from __future__ import annotations

import collections
import signal

from agent_harness import wait_for
from rel_harness import SOAK, assert_no_crash, metric, parse_metrics, start_fleet, wait_terminal

JOBS, AGENTS = (10_000, 50) if SOAK else (2_000, 20)
# Two slots per process: twice the pollers racing for each job, for the same memory.
SLOTS = 2
# Short intervals so that idle slots race for every job; the status loop is long because jobs
# last milliseconds (the first heartbeat still goes out at once).
SETTINGS = {
    "slots": SLOTS,
    "polling_interval": "200ms",
    "job_status_loop_interval": "30s",
    "request_retry_wait": "100ms",
    "request_retry_max_wait": "500ms",
}


def test_every_job_claimed_exactly_once_and_none_lost(emu, agents, tmp_path):
    agents += start_fleet(emu, tmp_path, AGENTS, **SETTINGS)
    emu.wait_agents(AGENTS)
    ids = emu.create_jobs(JOBS, steps=[{"name": "one", "run": "echo ok"}])
    assert len(set(ids)) == JOBS

    stats = wait_terminal(emu, JOBS, timeout=300 + JOBS * 0.5, what="claims run")

    # The emulator's record: one claim per job, every job succeeded with its one line of output.
    assert stats["duplicate_claims"] == []
    assert stats["claims"] == JOBS
    jobs = emu.jobs()
    assert len(jobs) == JOBS
    claims = collections.Counter(len(j["claims"]) for j in jobs)
    assert claims == {1: JOBS}, f"claims per job: {dict(claims)}"
    statuses = collections.Counter(j["status"] for j in jobs)
    assert statuses == {"succeeded": JOBS}, f"statuses: {dict(statuses)}"
    bad_logs = [j["id"] for j in jobs if [s["logs"] for s in j["steps"]] != [["ok"]]]
    assert bad_logs == [], f"{len(bad_logs)} jobs with lost or repeated output: {bad_logs[:5]}"
    by_agent = collections.Counter(j["agent"] for j in jobs)

    # An agent counts a job in its metrics just after its last step report, which is what
    # ended the job for the emulator: wait until every job is counted somewhere.
    def counted():
        return sum(
            metric(parse_metrics(a.get("/metrics")[1]), "workflow_agent_jobs_total") for a in agents
        )

    wait_for(lambda: counted() >= JOBS, what=f"{JOBS} jobs in the agents' metrics")

    # Each agent's own count matches what the emulator says it claimed: no job run twice, none
    # run without a claim.
    for agent in agents:
        samples = parse_metrics(agent.get("/metrics")[1])
        [agent_id] = [a for a in by_agent if a.endswith("/" + agent.name)] or [None]
        claimed = by_agent.get(agent_id, 0)
        assert metric(samples, "workflow_agent_jobs_total", result="succeeded") == claimed
        assert metric(samples, "workflow_agent_jobs_total", result="failed") == 0
        assert metric(samples, "workflow_agent_polls_total", outcome="claimed") == claimed
    assert sum(by_agent.values()) == JOBS
    # The work was shared: a fleet where one agent did everything would prove little.
    assert sum(1 for n in by_agent.values() if n > 0) >= AGENTS // 2

    for agent in agents:
        agent.signal(signal.SIGTERM)
    for agent in agents:
        assert agent.wait() == 0, agent.stderr[-2000:]
        assert_no_crash(agent)
