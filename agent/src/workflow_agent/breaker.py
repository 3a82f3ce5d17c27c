"""The circuit breaker in front of every protocol call (circuit_breaker_failures/_timeout)."""

from __future__ import annotations

import logging
import threading

from workflow_agent.clock import Clock
from workflow_agent.errors import CircuitOpenError

log = logging.getLogger("workflow_agent.client")  # its messages are the client's


class Breaker:
    """Closed → (N consecutive failed calls) → open for `timeout` → half-open: one probe call."""

    def __init__(self, failures: int, timeout: float, clock: Clock, metrics=None) -> None:
        self.threshold = failures
        self.timeout = timeout
        self.clock = clock
        self.metrics = metrics
        self.state = "closed"
        self.failures = 0
        self.opened_at = 0.0
        self._probing = False
        self._lock = threading.Lock()

    def before(self, route: str, bypass: bool) -> bool:
        """Admit a call or raise CircuitOpenError. True when the call is the half-open probe."""
        with self._lock:
            if self.state == "closed" or bypass:
                return False
            remaining = self.opened_at + self.timeout - self.clock.monotonic()
            if self.state == "open" and remaining > 0:
                raise CircuitOpenError(remaining, route)
            if self._probing:
                raise CircuitOpenError(1.0, route)
            self.state = "half-open"
            self._probing = True
            log.info("circuit breaker half-open: probing with %s", route)
            return True

    def success(self) -> None:
        with self._lock:
            if self.state != "closed":
                log.info("circuit breaker closed")
            self.state, self.failures, self._probing = "closed", 0, False
            self._gauge()

    def failure(self, probe: bool) -> None:
        with self._lock:
            self.failures += 1
            if probe or self._probing:
                self._probing = False
                self._open()
            elif self.state == "closed" and self.failures >= self.threshold:
                self._open()

    def release(self, probe: bool) -> None:
        """A probe ended without a verdict (aborted): let another call probe."""
        with self._lock:
            if probe:
                self._probing = False

    def _open(self) -> None:
        self.state = "open"
        self.opened_at = self.clock.monotonic()
        log.warning(
            "circuit breaker open after %d failed calls; pausing for %.0fs",
            self.failures,
            self.timeout,
        )
        if self.metrics is not None:
            self.metrics.breaker_trips.inc()
        self._gauge()

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.breaker_open.set(0 if self.state == "closed" else 1)
