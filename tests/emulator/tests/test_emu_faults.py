"""Every fault mode, observed the way an agent would observe it: over HTTP."""

import email.utils
import time

import httpx
import pytest
from emu_helpers import STEPS, metric


def test_429_with_retry_after_seconds(emu, agent):
    emu.faults(rate_429=1.0, retry_after=7)
    resp = agent.poll()
    assert resp.status_code == 429
    assert resp.headers["retry-after"] == "7"
    assert "error" in resp.json()
    assert emu.stats()["faults"]["injected"] == {"429": 1}


def test_retry_after_as_http_date(emu, agent):
    emu.faults(rate_429=1.0, retry_after=120, retry_after_format="http-date")
    resp = agent.poll()
    when = email.utils.parsedate_to_datetime(resp.headers["retry-after"]).timestamp()
    assert 60 < when - time.time() <= 121


def test_503_with_and_without_retry_after(emu, agent):
    emu.faults(rate_503=1.0)
    resp = agent.poll()
    assert resp.status_code == 503 and "retry-after" not in resp.headers
    emu.faults(rate_503=1.0, retry_after=2.5, retry_after_on_503=True)
    resp = agent.poll()
    assert resp.status_code == 503 and resp.headers["retry-after"] == "3"  # whole seconds


def test_dropped_connection_sends_no_response(emu, agent):
    emu.faults(drop_rate=1.0)
    with pytest.raises(httpx.RemoteProtocolError):
        agent.poll()
    emu.faults()
    assert agent.poll().status_code == 204  # the next connection is served normally


def test_a_faulted_poll_claims_nothing(emu, agent):
    job = emu.create_job(STEPS)
    emu.faults(rate_503=1.0, budget=1)
    assert agent.poll().status_code == 503
    assert emu.job(job)["claims"] == []
    assert agent.claim()["jobID"] == job


def test_added_latency(emu, agent):
    emu.faults(latency=0.4)
    started = time.monotonic()
    assert agent.poll().status_code == 204
    # A lower bound only (the server sleeps at least this long); never an upper bound.
    assert time.monotonic() - started >= 0.4
    assert emu.stats()["faults"]["injected"]["latency"] == 1


def test_retry_after_on_204_polls_only(emu, agent):
    emu.faults(poll_retry_after=30)
    resp = agent.poll()
    assert resp.status_code == 204 and resp.headers["retry-after"] == "30"
    lease = agent.http.post("/api/background-activities/worker/lease/acquire")
    assert lease.status_code == 204 and lease.headers["retry-after"] == "30"
    emu.create_job(STEPS)
    claimed = agent.poll()
    assert claimed.status_code == 200 and "retry-after" not in claimed.headers


def test_budget_limits_the_number_of_injected_errors(emu, agent):
    emu.faults(rate_503=1.0, budget=3)
    codes = [agent.poll().status_code for _ in range(5)]
    assert codes == [503, 503, 503, 204, 204]
    assert emu.stats()["faults"]["budget_left"] == 0


def test_fractions_are_reproducible_with_a_seed(emu, agent):
    def run() -> list[int]:
        emu.faults(rate_429=0.3, rate_503=0.3, seed=42)
        return [agent.poll().status_code for _ in range(40)]

    first = run()
    assert first == run()
    assert {429, 503, 204} == set(first)


def test_paths_scope_and_admin_is_never_faulted(emu, agent):
    emu.faults(rate_503=1.0, paths=["/api/workflow/"])
    assert agent.poll().status_code == 204
    emu.faults(rate_503=1.0, drop_rate=0.0)
    assert emu.admin("GET", "/admin/stats").status_code == 200
    assert emu.admin("GET", "/metrics").status_code == 200
    assert emu.admin("GET", "/healthz").status_code == 200


def test_faults_show_in_metrics_and_reset_clears_them(emu, agent):
    route = {"code": "429", "method": "GET", "route": "/api/deployments/poll"}
    before = emu.metrics()
    emu.faults(rate_429=1.0)
    agent.poll()
    after = emu.metrics()
    injected = "emulator_faults_injected_total"
    assert metric(after, injected, kind="429") - metric(before, injected, kind="429") == 1
    assert (
        metric(after, "emulator_requests_total", **route)
        - metric(before, "emulator_requests_total", **route)
        == 1
    )
    emu.reset()
    assert agent.poll().status_code == 204


@pytest.mark.parametrize(
    "settings",
    [
        {"rate_429": 1.5},
        {"rate_429": 0.6, "rate_503": 0.6},
        {"drop_rate": "half"},
        {"latency": -1},
        {"latency": 3600},
        {"retry_after_format": "minutes"},
        {"paths": ["/admin/"]},
        {"paths": "/api/"},
        {"budget": -1},
        {"seed": 1.5},
        {"nonsense": 1},
        {"retry_after_on_503": "yes"},
    ],
)
def test_bad_fault_settings_are_400(emu, settings):
    resp = emu.admin("POST", "/admin/faults", settings)
    assert resp.status_code == 400 and resp.json()["error"]
    assert emu.stats()["faults"]["rate_429"] == 0.0  # nothing half-applied
