"""Claims: exclusive and complete under concurrency, FIFO, scoped to the pool and the job type."""

import collections
import threading

import httpx
from emu_helpers import STEPS, Agent


def test_200_jobs_20_concurrent_pollers_no_duplicate_no_loss(emu):
    ids = emu.create_jobs(200, STEPS)
    assert len(set(ids)) == 200
    claims: list[tuple[str, str]] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(20)

    def poller(n: int) -> None:
        agent = Agent(emu, hostname=f"poller-{n}", instance="1")
        try:
            start.wait(timeout=60)
            while True:
                resp = agent.poll()
                if resp.status_code == 204:
                    return  # the queue was full at the start: empty now means all handed out
                if resp.status_code != 200:
                    errors.append(f"{resp.status_code} {resp.text}")
                    return
                with lock:
                    claims.append((resp.json()["jobID"], agent.id))
        except (httpx.HTTPError, threading.BrokenBarrierError) as err:
            errors.append(repr(err))
        finally:
            agent.close()

    threads = [threading.Thread(target=poller, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors
    counts = collections.Counter(job for job, _ in claims)
    assert [j for j, n in counts.items() if n > 1] == []  # 0 duplicates
    assert set(counts) == set(ids)  # 0 lost
    stats = emu.stats()
    assert stats["duplicate_claims"] == []
    assert stats["claims"] == 200
    assert sum(stats["claims_by_agent"].values()) == 200
    assert stats["queued"] == 0
    # The server's record agrees with what each client saw.
    seen = dict(claims)
    for job in emu.jobs():
        assert [c["agent"] for c in job["claims"]] == [seen[job["id"]]]
        assert job["agent"] == seen[job["id"]]


def test_claim_body_shape_and_fifo_order(emu, agent):
    first = emu.create_job(STEPS)
    second = emu.create_job(STEPS)
    claim = agent.claim()
    assert set(claim) == {
        "jobID",
        "jobToken",
        "oidcToken",
        "runID",
        "typeSpecificID",
        "deploymentID",
    }
    assert claim["jobID"] == first
    assert claim["typeSpecificID"] == claim["deploymentID"] != claim["jobID"]
    assert agent.claim()["jobID"] == second
    assert agent.poll().status_code == 204


def test_empty_queue_is_204_without_body(agent):
    resp = agent.poll()
    assert resp.status_code == 204
    assert resp.content == b""
    assert "retry-after" not in resp.headers


def test_pool_scoping(emu, make_agent):
    other = emu.create_pool("other")
    mine = emu.create_job(STEPS)
    theirs = emu.create_job(STEPS, pool="other")
    a = make_agent(hostname="a")
    b = make_agent(hostname="b", token=other["token"])
    assert a.claim()["jobID"] == mine
    assert a.poll().status_code == 204
    claim = b.claim()
    assert claim["jobID"] == theirs
    # A pool cannot see another pool's deployment.
    assert a.status(claim).status_code == 404
    assert b.status(claim).json() == "not-started"


def test_lease_acquire_hands_out_only_lease_types(emu, agent):
    dep = emu.create_job(STEPS)
    scan = emu.create_job(STEPS, type="insights_scan")
    policy = emu.create_job(STEPS, type="policy_evaluation")
    resp = agent.http.post(
        "/api/background-activities/worker/lease/acquire", json={"kinds": ["policy_evaluation"]}
    )
    assert resp.status_code == 200
    assert resp.json()["jobID"] == policy and resp.json()["type"] == "policy_evaluation"
    # No body: every lease type.
    resp = agent.http.post("/api/background-activities/worker/lease/acquire")
    assert resp.json()["jobID"] == scan and resp.json()["type"] == "insights_scan"
    assert agent.http.post("/api/background-activities/worker/lease/acquire").status_code == 204
    assert emu.job(scan)["status"] == "accepted"  # a lease has no separate ack
    assert agent.claim()["jobID"] == dep


def test_ack_is_idempotent_and_accepts(emu, agent):
    job = emu.create_job(STEPS)
    claim = agent.claim()
    assert emu.job(job)["status"] == "not-started"
    assert agent.ack(claim).status_code == 200
    assert agent.ack(claim).status_code == 200  # a retried ack
    assert emu.job(job)["status"] == "accepted"
    assert agent.status(claim).json() == "accepted"
    assert [e["event"] for e in emu.job(job)["events"]].count("accepted") == 1
