"""jobs.Watch: heartbeat and status-check schedule, cancellation, health activity.

The service is scripted at the transport (agent_helpers.Script); time is a FakeClock, so five
minutes of schedule run in microseconds. Full job runs are in tests/system.
"""

import logging

import pytest
from agent_helpers import Script, make_client, ok
from workflow_agent.clock import FakeClock
from workflow_agent.health import Health
from workflow_agent.jobdef import Claim
from workflow_agent.jobs import Cancel, JobRunner, Watch

CLAIM = Claim("job-1", "jobtok", "run-1", "dep-1")


class NoTarget:
    """Watch never touches the target."""


def watch_for(script, clock, claim=CLAIM, **cfg):
    client = make_client(script, clock, request_retry_count=0, **cfg)
    health = Health(3600, clock)
    runner = JobRunner(client.cfg, client, NoTarget(), instance="i", clock=clock, health=health)
    cancel = Cancel()
    return Watch(runner, claim, cancel, logging.getLogger("t")), cancel, health


def run_for(watch, clock, seconds, script):
    """Drive the watch's schedule for `seconds` of fake time; return (time, call) pairs."""
    start = clock.monotonic()
    seen = []
    while clock.monotonic() - start <= seconds:
        before = len(script.requests)
        delay = watch.tick()
        for req in script.requests[before:]:
            seen.append((round(clock.monotonic() - start), req.url.path.rsplit("/", 1)[-1]))
        clock.advance(delay)
    return seen


@pytest.mark.parametrize(
    ("interval", "heartbeats", "statuses"),
    [
        ("30s", [0, 30, 60, 90, 120], [30, 60, 90, 120]),
        ("10s", list(range(0, 121, 10)), list(range(10, 121, 10))),
        ("2m", [0, 30, 60, 90, 120], [120]),
    ],
)
def test_schedule(interval, heartbeats, statuses):
    clock = FakeClock()
    script = Script(lambda r: ok("running") if r.method == "GET" else ok({}))
    watch, cancel, _ = watch_for(script, clock, job_status_loop_interval=interval)
    seen = run_for(watch, clock, 120, script)
    assert [t for t, what in seen if what == "heartbeat"] == heartbeats
    assert [t for t, what in seen if what == "status"] == statuses
    assert not cancel.is_set()


def test_heartbeat_and_status_requests():
    clock = FakeClock()
    script = Script(lambda r: ok("running") if r.method == "GET" else ok({}))
    watch, _, _ = watch_for(script, clock)
    run_for(watch, clock, 30, script)
    hb, status = script.requests[0], script.requests[2]
    assert (hb.method, hb.url.path) == ("POST", "/api/workflow/jobs/job-1/heartbeat")
    assert hb.headers["Authorization"] == "token jobtok"
    assert (status.method, status.url.path) == ("GET", "/api/deployments/dep-1/status")
    assert status.headers["Authorization"].startswith("token pul-")


@pytest.mark.parametrize("status", ["failed", "canceled", "cancelled", {"status": "failed"}])
def test_failed_or_canceled_status_cancels_the_job(status):
    clock = FakeClock()
    script = Script(lambda r: ok(status) if r.method == "GET" else ok({}))
    watch, cancel, _ = watch_for(script, clock)
    run_for(watch, clock, 30, script)
    assert cancel.is_set() and "the service reports the job" in cancel.reason


@pytest.mark.parametrize("status", ["running", "accepted", "succeeded", 5, None, ["failed"]])
def test_other_statuses_do_not_cancel(status):
    clock = FakeClock()
    script = Script(lambda r: ok(status) if r.method == "GET" else ok({}))
    watch, cancel, _ = watch_for(script, clock)
    run_for(watch, clock, 60, script)
    assert not cancel.is_set()


def test_successful_calls_advance_health_activity_failures_do_not():
    clock = FakeClock()
    script = Script(ok({}))
    watch, _, health = watch_for(script, clock)
    clock.advance(5)
    watch.tick()
    assert health.last_activity == clock.time()
    script.answers = [ok(status=503)]
    clock.advance(30)
    watch.tick()
    assert health.last_activity == clock.time() - 30


def test_lease_jobs_heartbeat_but_have_no_deployment_status():
    clock = FakeClock()
    script = Script(ok({}))
    claim = Claim("job-2", "jt", "run", "acct-1", type="insights_scan")
    watch, _, _ = watch_for(script, clock, claim=claim)
    seen = run_for(watch, clock, 90, script)
    assert {what for _, what in seen} == {"heartbeat"}


def test_cancel_records_the_first_reason():
    cancel = Cancel()
    cancel.set("first")
    cancel.set("second")
    assert cancel.reason == "first" and cancel.event.is_set()
