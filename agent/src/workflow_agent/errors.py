"""The protocol client's errors: what a call to the service can end in besides an answer."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A call that did not produce a usable answer. `status` is None when no response came."""

    def __init__(self, message: str, *, status: int | None = None, route: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.route = route
        self.body: Any = None


class CircuitOpenError(ServiceError):
    """The breaker refused the call; try again in `retry_in` seconds."""

    def __init__(self, retry_in: float, route: str = "") -> None:
        super().__init__(f"circuit breaker open, next try in {retry_in:.0f}s", route=route)
        self.retry_in = retry_in


class AbortedError(ServiceError):
    """The caller's cancel event was set while the call waited to retry."""
