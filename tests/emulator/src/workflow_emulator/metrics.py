"""GET /metrics: request counts by route and status, claim latency, queue depth, agents online."""

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

disable_created_metrics()  # the *_created series only add noise to a test tool


class _StoreCollector:
    def __init__(self, store) -> None:
        self.store = store

    def collect(self):
        store = self.store
        depth = GaugeMetricFamily(
            "emulator_queue_depth", "Queued (unclaimed) jobs", labels=["pool", "type"]
        )
        for (pool_id, kind), n in sorted(store.queue_depth().items()):
            pool = store.pools.get(pool_id)
            depth.add_metric([pool["name"] if pool else pool_id, kind], n)
        yield depth
        jobs = GaugeMetricFamily("emulator_jobs", "Jobs by status", labels=["status"])
        for status, n in sorted(store.stats()["jobs"].items()):
            jobs.add_metric([status], n)
        yield jobs
        online = GaugeMetricFamily(
            "emulator_agents_online", "Agents seen within the online window", labels=["pool"]
        )
        for pool in store.pools.values():
            agents = store.list_agents(pool=pool, online_within=store.online_window)
            online.add_metric([pool["name"]], len(agents))
        yield online


class Metrics:
    def __init__(self, store) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "emulator_requests",
            "HTTP requests by route template, method and status code",
            ["route", "method", "code"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "emulator_request_duration_seconds",
            "Request handling time",
            ["route"],
            registry=self.registry,
        )
        self.claim_latency = Histogram(
            "emulator_claim_latency_seconds",
            "Time from a job's creation to its claim",
            ["type"],
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, float("inf")),
        )
        self.faults = Counter(
            "emulator_faults_injected", "Injected faults by kind", ["kind"], registry=self.registry
        )
        self.registry.register(_StoreCollector(store))

    def claimed(self, job: dict, wait: float) -> None:
        self.claim_latency.labels(job["type"]).observe(max(wait, 0.0))

    def request(self, route: str, method: str, code: str, seconds: float) -> None:
        self.requests.labels(route, method, code).inc()
        self.duration.labels(route).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
