"""Time as the agent sees it, injectable so that time-based logic is tested without sleeping."""

from __future__ import annotations

import threading
import time


class Clock:
    """Wall time, monotonic time and interruptible waits."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait up to `seconds` for `event`; True when it was set (the wait was interrupted)."""
        return event.wait(max(0.0, seconds))


class FakeClock(Clock):
    """A clock for tests: waits return at once and move time forward; nothing sleeps."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start
        self.waits: list[float] = []

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, event: threading.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        self.waits.append(seconds)
        self.now += max(0.0, seconds)
        return event.is_set()
