"""Liveness (`/healthz`) and readiness (`/readyz`) state of the agent.

`lastActivity` advances on every successful poll, status check or heartbeat. The agent is
unhealthy once `now - lastActivity > threshold`; it is not ready while draining.
"""

from __future__ import annotations

import threading
import time as _time

from workflow_agent.clock import Clock


def rfc3339(ts: float) -> str:
    return _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime(ts))


class Health:
    def __init__(self, threshold: float, clock: Clock | None = None, metrics=None) -> None:
        self.threshold = threshold
        self.clock = clock or Clock()
        self.metrics = metrics
        self._lock = threading.Lock()
        self.last_activity = self.clock.time()  # starting counts as progress
        self.draining = False
        if metrics is not None:
            metrics.health_threshold.set(threshold)
        self._publish()

    def touch(self) -> None:
        with self._lock:
            self.last_activity = self.clock.time()
        self._publish()

    def set_draining(self) -> None:
        self.draining = True
        if self.metrics is not None:
            self.metrics.draining.set(1)

    def _publish(self) -> None:
        if self.metrics is not None:
            self.metrics.last_activity.set(self.last_activity)

    def healthz(self) -> tuple[int, dict[str, str]]:
        now = self.clock.time()
        with self._lock:
            last = self.last_activity
        healthy = now - last <= self.threshold
        body = {
            "status": "healthy" if healthy else "unhealthy",
            "currentTime": rfc3339(now),
            "lastActivity": rfc3339(last),
        }
        return (200 if healthy else 503), body

    def readyz(self) -> tuple[int, dict[str, str]]:
        if self.draining:
            return 503, {"status": "draining"}
        return 200, {"status": "ready"}
