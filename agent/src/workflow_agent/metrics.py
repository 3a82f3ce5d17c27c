"""Prometheus metrics of one agent process (names: docs/agent-interfaces.md).

Each Metrics object has its own registry, so tests can build many agents in one process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from workflow_agent import __version__

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self, *, instance: str = "", deploy_target: str = "", slots: int = 1) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        p = "workflow_agent_"
        info = Gauge(
            p + "info", "Agent identity", ["version", "instance", "deploy_target"], registry=r
        )
        info.labels(__version__, instance, deploy_target).set(1)
        Gauge(p + "slots", "Configured job slots", registry=r).set(slots)
        self.busy_slots = Gauge(p + "busy_slots", "Slots running a job", ["type"], registry=r)
        self.jobs = Counter(p + "jobs", "Finished jobs", ["type", "result"], registry=r)
        self.polls = Counter(p + "polls", "Poll results", ["outcome"], registry=r)
        self.poll_duration = Histogram(
            p + "poll_duration_seconds", "Poll request latency", registry=r
        )
        self.requests = Counter(
            p + "requests", "HTTP calls to the service", ["route", "code"], registry=r
        )
        self.breaker_open = Gauge(
            p + "circuit_breaker_open", "1 while the breaker is open or half-open", registry=r
        )
        self.breaker_trips = Counter(
            p + "circuit_breaker_trips", "Times the circuit breaker opened", registry=r
        )
        self.last_claim = Gauge(
            p + "last_claim_timestamp_seconds", "Unix time of the last claim", registry=r
        )
        self.last_activity = Gauge(
            p + "last_activity_timestamp_seconds", "What /healthz judges", registry=r
        )
        self.draining = Gauge(p + "draining", "1 after SIGTERM", registry=r)
        # Exported so an alert can compare last_activity with the agent's own threshold.
        self.health_threshold = Gauge(
            p + "health_threshold_seconds", "Inactivity after which /healthz fails", registry=r
        )
        for workflow_type in ("deployment", "insights_scan", "policy_evaluation"):
            self.busy_slots.labels(workflow_type).set(0)
        for outcome in ("claimed", "empty", "error"):
            self.polls.labels(outcome)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """One sample's value (for tests and `agent_info`-style readers)."""
        return self.registry.get_sample_value(name, labels or {})
