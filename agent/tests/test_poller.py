"""poller: idle waits and jitter, Retry-After, auth back-off, breaker pauses, slots, single_run.

The service is scripted at the transport (agent_helpers.Script); the job runner is a recorder
(job execution is covered by tests/system against the real emulator).
"""

import email.utils

import pytest
from agent_helpers import Script, config, make_client, ok
from workflow_agent.clock import FakeClock
from workflow_agent.health import Health
from workflow_agent.metrics import Metrics
from workflow_agent.poller import Agent, auth_backoff, idle_wait

CLAIM = {"jobID": "j1", "jobToken": "jt", "runID": "r1", "typeSpecificID": "d1"}


class Recorder:
    def __init__(self, result="succeeded"):
        self.claims = []
        self.result = result

    def run(self, claim, cancel):
        self.claims.append((claim, cancel))
        return self.result


def agent_for(script, *, rng=lambda: 0.0, result="succeeded", **cfg):
    clock = FakeClock()
    metrics = Metrics()
    client = make_client(script, clock, metrics, **{"request_retry_count": 0, **cfg})
    health = Health(client.cfg.effective_health_threshold.total_seconds(), clock, metrics)
    runner = Recorder(result)
    agent = Agent(client.cfg, client, runner, health=health, clock=clock, metrics=metrics, rng=rng)
    return agent, runner, clock, metrics


def polls(metrics, outcome):
    return metrics.value("workflow_agent_polls_total", {"outcome": outcome})


# --- pure schedule -----------------------------------------------------------------------------


def test_idle_wait_is_polling_interval_plus_small_jitter():
    cfg = config(polling_interval="1m")
    assert idle_wait(cfg, None, lambda: 0.0) == 60.0
    assert idle_wait(cfg, None, lambda: 1.0) == 65.0  # jitter ≤ min(10%, 5s)
    assert idle_wait(config(polling_interval="10s"), None, lambda: 1.0) == 11.0


def test_retry_after_supersedes_polling_interval_unless_overridden():
    assert idle_wait(config(), 15.0, lambda: 0.0) == 15.0
    assert idle_wait(config(polling_interval_override=True), 15.0, lambda: 0.0) == 60.0


def test_retry_after_is_capped_so_a_broken_server_cannot_park_the_slot():
    years = 99_999_999.0
    assert idle_wait(config(), years, lambda: 0.0) == 120.0  # request_retry_max_wait (2m)
    assert idle_wait(config(polling_interval="5m"), years, lambda: 0.0) == 300.0
    assert idle_wait(config(request_retry_max_wait="10m"), 400.0, lambda: 0.0) == 400.0
    assert idle_wait(config(), years, lambda: 1.0) == 125.0  # jitter on top, still ≤ 5s


def test_auth_backoff_doubles_and_caps():
    cfg = config(polling_interval="1m")
    assert [auth_backoff(cfg, n) for n in (1, 2, 3, 4, 5, 6)] == [60, 120, 240, 300, 300, 300]
    long = config(polling_interval="10m")
    assert auth_backoff(long, 3) == 600  # never shorter than polling_interval


# --- one poll ----------------------------------------------------------------------------------


def test_empty_poll_waits_and_counts_as_activity():
    agent, runner, clock, metrics = agent_for(Script(ok(status=204)))
    clock.advance(100)
    assert agent.slots[0].once() == 60.0
    assert agent.health.last_activity == clock.time()
    assert polls(metrics, "empty") == 1 and runner.claims == []


def test_204_retry_after_is_honoured_in_both_forms():
    agent, _, clock, _ = agent_for(Script(ok(status=204, **{"Retry-After": "12"})))
    assert agent.slots[0].once() == 12.0
    when = email.utils.formatdate(clock.time() + 40, usegmt=True)
    agent, _, _, _ = agent_for(Script(ok(status=204, **{"Retry-After": when})))
    assert agent.slots[0].once() == pytest.approx(40.0, abs=1)


def test_claim_is_run_and_recorded():
    script = Script(ok(CLAIM))
    agent, runner, clock, metrics = agent_for(script)
    assert agent.slots[0].once() == 0.0
    [(claim, cancel)] = runner.claims
    assert claim.job_id == "j1" and not cancel.is_set()
    assert script.paths == ["GET /api/deployments/poll"]
    assert polls(metrics, "claimed") == 1
    assert metrics.value("workflow_agent_last_claim_timestamp_seconds") == clock.time()
    assert agent.results == ["succeeded"]


def test_malformed_claim_is_a_poll_error_not_a_crash():
    agent, runner, _, metrics = agent_for(Script(ok({"jobID": 3})))
    assert agent.slots[0].once() == 60.0
    assert runner.claims == [] and polls(metrics, "error") == 1


@pytest.mark.parametrize("status", [401, 403])
def test_rejected_credentials_back_off_loudly(status, caplog):
    agent, _, _, metrics = agent_for(Script(ok({"error": "bad token"}, status=status)))
    slot = agent.slots[0]
    assert [slot.once() for _ in range(3)] == [60.0, 120.0, 240.0]
    assert polls(metrics, "error") == 3
    assert f"refused the agent's credentials (HTTP {status})" in caplog.text
    assert "ERROR" in caplog.text


def test_service_errors_wait_polling_interval():
    agent, _, _, metrics = agent_for(Script(ok(status=500)), circuit_breaker_failures=10)
    assert agent.slots[0].once() == 60.0
    assert polls(metrics, "error") == 1


def test_open_breaker_pauses_polling_until_the_probe():
    script = Script(ok(status=503))
    agent, _, clock, _ = agent_for(script, circuit_breaker_failures=2)
    slot = agent.slots[0]
    slot.once()
    slot.once()
    assert slot.once() == pytest.approx(600.0)  # refused by the breaker: no request
    assert len(script.requests) == 2
    clock.advance(600)
    script.answers = [ok(status=204)]
    assert slot.once() == 60.0
    assert agent.client.breaker.state == "closed"


# --- slots and workflow types ------------------------------------------------------------------


def kinds(agent):
    return [s.name for s in agent.slots]


def test_slots_and_enabled_types():
    agent, *_ = agent_for(Script(ok(status=204)))
    assert kinds(agent) == ["slot-1-deployment", "slot-1-lease"]
    agent, *_ = agent_for(Script(ok(status=204)), slots=3, enabled_workflow_types=["deployment"])
    assert kinds(agent) == ["slot-1-deployment", "slot-2-deployment", "slot-3-deployment"]
    agent, *_ = agent_for(Script(ok(status=204)), enabled_workflow_types=["policy_evaluation"])
    assert kinds(agent) == ["slot-1-lease"]


def test_lease_slot_asks_only_for_enabled_kinds():
    lease_claim = {**CLAIM, "type": "policy_evaluation"}
    script = Script(ok(lease_claim))
    agent, runner, *_ = agent_for(
        script, enabled_workflow_types=["deployment", "policy_evaluation"]
    )
    lease = agent.slots[1]
    lease.once()
    assert script.paths == ["POST /api/background-activities/worker/lease/acquire"]
    assert script.bodies() == [{"kinds": ["policy_evaluation"]}]
    assert runner.claims[0][0].type == "policy_evaluation"


def test_the_first_slot_polls_at_once_and_the_others_spread_over_polling_interval():
    draws = iter([0.5, 0.25, 0.75, 0.1])
    agent, *_ = agent_for(
        Script(ok(status=204)), rng=lambda: next(draws), slots=3, polling_interval="1m"
    )
    assert [(s.name, s.first_delay) for s in agent.slots] == [
        ("slot-1-deployment", 0.0),
        ("slot-1-lease", 0.0),
        ("slot-2-deployment", 30.0),
        ("slot-2-lease", 15.0),
        ("slot-3-deployment", 45.0),
        ("slot-3-lease", 6.0),
    ]


def test_a_slot_waits_its_first_delay_before_its_first_poll():
    script = Script(ok(status=204))
    agent, _, clock, _ = agent_for(script, rng=lambda: 0.5, slots=2, polling_interval="1m")
    slot = agent.slots[2]  # slot-2-deployment
    start = clock.time()

    def stop_after_first_poll(request):
        assert clock.time() - start == 30.0  # no poll before its first delay
        agent.stop_claiming.set()
        return ok(status=204)

    script.answers = [stop_after_first_poll]
    slot.loop()
    assert len(script.requests) == 1


def test_waits_after_errors_are_jittered_too():
    agent, *_ = agent_for(Script(ok(status=500)), rng=lambda: 1.0, circuit_breaker_failures=10)
    assert agent.slots[0].once() == 65.0


# --- single_run, drain and cancel --------------------------------------------------------------


@pytest.mark.parametrize(("result", "code"), [("succeeded", 0), ("failed", 1), ("canceled", 1)])
def test_single_run_exit_codes(result, code):
    agent, *_ = agent_for(Script(ok(CLAIM)), result=result, single_run=True)
    agent.slots[0].once()
    assert agent.stop_claiming.is_set()
    assert agent.exit_code() == code


def test_single_run_drained_before_any_job_exits_0():
    agent, *_ = agent_for(Script(ok(status=204)), single_run=True)
    agent.drain()
    assert agent.exit_code() == 0


def test_without_single_run_jobs_do_not_stop_the_agent():
    agent, *_ = agent_for(Script(ok(CLAIM)), result="failed")
    agent.slots[0].once()
    assert not agent.stop_claiming.is_set() and agent.exit_code() == 0


def test_drain_stops_claiming_and_readiness():
    agent, _, _, metrics = agent_for(Script(ok(status=204)))
    assert agent.health.readyz() == (200, {"status": "ready"})
    agent.drain()
    assert agent.stop_claiming.is_set()
    assert agent.health.readyz() == (503, {"status": "draining"})
    assert metrics.value("workflow_agent_draining") == 1
    agent.slots[0].loop()  # returns at once: no poll after the drain
    assert agent.client.breaker.failures == 0


def test_cancel_all_reaches_the_running_job():
    seen = {}

    class Canceling:
        def run(self, claim, cancel):
            agent.cancel_all("the agent is stopping")
            seen["reason"] = cancel.reason
            return "canceled"

    agent, *_ = agent_for(Script(ok(CLAIM)))
    agent.runner = Canceling()
    agent.slots[0].once()
    assert seen["reason"] == "the agent is stopping"


def test_a_claim_that_arrives_after_cancel_all_is_canceled_at_once():
    agent, runner, *_ = agent_for(Script(ok(CLAIM)))
    agent.cancel_all("the agent is stopping")
    agent.slots[0].once()
    assert runner.claims[0][1].reason == "the agent is stopping"


def test_a_poll_aborted_by_the_drain_is_not_an_error():
    agent, _, _, metrics = agent_for(Script(ok(status=503)), request_retry_count=3)
    agent.drain()
    assert agent.slots[0].once() == 0.0
    assert polls(metrics, "error") == 0
