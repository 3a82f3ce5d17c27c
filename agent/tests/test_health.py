"""health: /healthz thresholds (injected clock) and /readyz; the real HTTP server on port 0."""

import json
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from agent_helpers import config
from workflow_agent.clock import FakeClock
from workflow_agent.health import Health
from workflow_agent.metrics import Metrics
from workflow_agent.server import HttpServer


def test_healthy_until_the_threshold_passes_without_activity():
    clock = FakeClock(1_700_000_000)
    h = Health(120, clock)
    clock.advance(120)
    status, body = h.healthz()
    assert status == 200
    assert body == {
        "status": "healthy",
        "currentTime": "2023-11-14T22:15:20Z",
        "lastActivity": "2023-11-14T22:13:20Z",
    }
    clock.advance(1)
    assert h.healthz()[0] == 503 and h.healthz()[1]["status"] == "unhealthy"
    h.touch()
    assert h.healthz()[0] == 200


@pytest.mark.parametrize(
    ("settings", "threshold"),
    [
        ({}, timedelta(minutes=2)),
        ({"polling_interval": "10s", "job_status_loop_interval": "45s"}, timedelta(seconds=90)),
        ({"polling_interval": "5m"}, timedelta(minutes=10)),
        ({"health_threshold": "7s"}, timedelta(seconds=7)),
    ],
)
def test_thresholds_from_config(settings, threshold):
    cfg = config(**settings)
    assert cfg.effective_health_threshold == threshold
    clock = FakeClock()
    h = Health(cfg.effective_health_threshold.total_seconds(), clock)
    clock.advance(threshold.total_seconds())
    assert h.healthz()[0] == 200
    clock.advance(0.5)
    assert h.healthz()[0] == 503


def test_activity_is_published_as_a_metric():
    clock = FakeClock()
    metrics = Metrics()
    h = Health(60, clock, metrics)
    clock.advance(5)
    h.touch()
    assert metrics.value("workflow_agent_last_activity_timestamp_seconds") == clock.time()
    assert metrics.value("workflow_agent_health_threshold_seconds") == 60


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - loopback test server
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


def test_http_server_endpoints_on_a_free_port(caplog):
    caplog.set_level("INFO")
    clock = FakeClock()
    metrics = Metrics(instance="host-1", deploy_target="process", slots=3)
    health = Health(60, clock, metrics)
    server = HttpServer("127.0.0.1", 0, health, metrics)
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert server.port > 0
        assert f"http server listening on 127.0.0.1:{server.port}" in caplog.text
        status, ctype, body = get(base + "/healthz")
        assert (status, ctype, json.loads(body)["status"]) == (200, "application/json", "healthy")
        clock.advance(61)
        assert get(base + "/healthz")[0] == 503
        assert json.loads(get(base + "/readyz")[2]) == {"status": "ready"}
        health.set_draining()
        assert get(base + "/readyz")[:1] == (503,)
        status, ctype, text = get(base + "/metrics")
        assert status == 200 and ctype.startswith("text/plain")
        for name in (
            'workflow_agent_info{deploy_target="process",instance="host-1",version=',
            "workflow_agent_slots 3.0",
            'workflow_agent_busy_slots{type="deployment"} 0.0',
            'workflow_agent_polls_total{outcome="empty"} 0.0',
            "workflow_agent_poll_duration_seconds_bucket",
            "workflow_agent_circuit_breaker_open 0.0",
            "workflow_agent_circuit_breaker_trips_total 0.0",
            "workflow_agent_last_claim_timestamp_seconds",
            "workflow_agent_last_activity_timestamp_seconds",
            "workflow_agent_draining 1.0",
            "workflow_agent_health_threshold_seconds 60.0",
        ):
            assert name in text
        assert get(base + "/nope")[0] == 404
    finally:
        server.stop()
