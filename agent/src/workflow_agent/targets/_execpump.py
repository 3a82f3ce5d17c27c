"""One step exec'd into a long-lived job container: stream its output, enforce timeout/cancel.

Shared by the docker and kubernetes targets; they differ only in how bytes are read and how a
short helper command (`kill`) is exec'd. The step runs under the `_stepwrap` wrapper, whose
first line names its process group.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from workflow_agent.targets._stepwrap import StepStream
from workflow_agent.targets.base import StepOutcome, StepRun

log = logging.getLogger(__name__)

END = object()  # read() returns it once the exec's output stream has ended
# After the wrapper reported the exit code, background children may still hold the output
# stream open; Docker closes it 2 s after the exec'd process exits, so wait as long.
DRAIN_SECONDS = 2.0
TICK = 0.1
ALIVE_EVERY = 0.5
KILL_WAIT = 30.0


def pump(
    read: Callable[[float], object],
    parser: StepStream,
    *,
    deadline: float | None,
    cancel: threading.Event,
    grace: float,
    signal: Callable[[int, str], None],
    alive: Callable[[int], bool],
) -> str:
    """Feed output to `parser` until the step ends. Returns "exited", "timeout" or "canceled".

    On timeout or cancel: `signal(pgid, "TERM")`, keep streaming what the step prints while it
    shuts down, `signal(pgid, "KILL")` after `grace` seconds; return once `alive(pgid)` is false.
    """
    ended = False
    done_at = None
    reason = None
    term_at = 0.0
    killed = False
    next_alive_check = 0.0
    while True:
        now = time.monotonic()
        if reason is None:
            if ended:
                return "exited"
            if parser.rc is not None:
                done_at = done_at or now
                if now - done_at >= DRAIN_SECONDS:
                    return "exited"
            elif cancel.is_set():
                reason = "canceled"
            elif deadline is not None and now >= deadline:
                reason = "timeout"
            if reason is not None:
                term_at = now
                if parser.pid is None:  # the wrapper prints its pid first: wait a little for it
                    ended = _read_pid(read, parser)
                if parser.pid is not None:
                    signal(parser.pid, "TERM")
        else:
            if now >= next_alive_check:
                next_alive_check = now + ALIVE_EVERY
                if parser.pid is None or not alive(parser.pid):
                    return reason
            if not killed and now - term_at >= grace:
                signal(parser.pid, "KILL")
                killed = True
            if killed and now - term_at >= grace + KILL_WAIT:
                log.warning("step process group %s survived SIGKILL for %ss", parser.pid, KILL_WAIT)
                return reason
        if ended:
            if reason is None:
                cancel.wait(TICK)
            else:
                time.sleep(TICK)
            continue
        wait = TICK
        if reason is None and deadline is not None:
            wait = max(0.0, min(wait, deadline - now))
        data = read(wait)
        if data is END:
            ended = True
        elif data:
            parser.feed(data)


def _read_pid(read, parser: StepStream, limit: float = 10.0) -> bool:
    """Read until the wrapper's pid line arrives; True when the stream ended instead."""
    deadline = time.monotonic() + limit
    while parser.pid is None and time.monotonic() < deadline:
        data = read(TICK)
        if data is END:
            return True
        if data:
            parser.feed(data)
    return False


class ExecStep(StepRun):
    """A step exec'd under the wrapper. Subclasses say how the exec's streams close and what a
    step that ended without reporting its exit code ended with."""

    def __init__(
        self,
        read: Callable[[float], object],
        parser: StepStream,
        *,
        grace: float,
        signal: Callable[[int, str], None],
        alive: Callable[[int], bool],
    ) -> None:
        self._read = read
        self.parser = parser
        self._grace = grace
        self._signal = signal
        self._alive = alive

    def pump(self, deadline: float | None, cancel: threading.Event) -> str:
        return pump(
            self._read,
            self.parser,
            deadline=deadline,
            cancel=cancel,
            grace=self._grace,
            signal=self._signal,
            alive=self._alive,
        )

    def end(self, abandoned: bool) -> None:
        if abandoned and self.parser.pid:
            self._signal(self.parser.pid, "KILL")
        self.close()

    def flush(self) -> None:
        self.parser.flush()

    def exited(self) -> StepOutcome:
        if self.parser.rc is not None:
            return StepOutcome(self.parser.rc, "exited")
        return self.unreported()

    def close(self) -> None:
        """Close the exec's streams."""

    def unreported(self) -> StepOutcome:
        """The outcome when the wrapper ended without reporting (its group was killed...)."""
        raise NotImplementedError
