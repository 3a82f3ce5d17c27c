"""Ship one step's output lines to the service in batches, with per-step offsets.

Offsets count lines from 0 per step. A 409 whose `expectedOffset` is past `offset` but not past
`offset + len(batch)` means an earlier try of the batch (or of its first lines: a queued batch
grows while the service is away) landed but its answer was lost: those lines count as
delivered, and only the rest is sent. The `offset`
of a 200 is adopted when it is a sane line count (0..MAX_OFFSET); anything else is a bad answer,
like a malformed one: the batch is sent again, and the 409 rule settles where it belongs. A batch
that fails transiently stays queued and goes out with the next flush, so lines are not lost
while the service is briefly away.
"""

from __future__ import annotations

import logging
import threading
import time as _time
from collections.abc import Callable

from workflow_agent.client import Client, ServiceError
from workflow_agent.clock import Clock

log = logging.getLogger(__name__)

BATCH_LINES = 100
FLUSH_INTERVAL = 1.0  # seconds between flushes while a step runs
MAX_LINE = 16 * 1024  # characters; longer lines are cut (a runaway line must not stall a job)
# Lines held while the service is unreachable; past this, new lines are counted, not kept, so a
# chatty step cannot exhaust the agent's memory during an outage.
MAX_PENDING = 50_000
# Offsets the service may hand back: a line count, so never negative, and never beyond what a
# service parses as a 32-bit number (no step prints two billion lines).
MAX_OFFSET = 2**31 - 1


def rfc3339(ts: float) -> str:
    millis = int(ts * 1000) % 1000
    return _time.strftime("%Y-%m-%dT%H:%M:%S", _time.gmtime(ts)) + f".{millis:03d}Z"


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_OFFSET


class LogShipper:
    def __init__(
        self,
        client: Client,
        job_id: str,
        job_token: str,
        step: int,
        *,
        redact: Callable[[str], str],
        clock: Clock | None = None,
        batch_lines: int = BATCH_LINES,
        interval: float = FLUSH_INTERVAL,
    ) -> None:
        self.client = client
        self.path = f"/api/workflow/jobs/{job_id}/{step}/logs"
        self.job_token = job_token
        self.redact = redact
        self.clock = clock or client.clock
        self.batch_lines = batch_lines
        self.interval = interval
        self.offset = 0  # lines the service has stored for this step
        self.dropped = 0  # lines the service refused for good, or that did not fit
        self.max_pending = MAX_PENDING
        self._overflow = 0  # lines not kept since the queue was last full
        self._pending: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._ship_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- producer side (the target's output reader) ----------------------------------------

    def add(self, line: str) -> None:
        text = line.rstrip("\r\n")
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE] + " [line truncated]"
        entry = {"t": rfc3339(self.clock.time()), "l": self.redact(text)}
        with self._lock:
            if len(self._pending) >= self.max_pending:
                self._overflow += 1
                self.dropped += 1
                return
            if self._overflow:
                note = f"[workflow-agent] {self._overflow} lines lost: the service was unreachable"
                self._pending.append({"t": entry["t"], "l": note})
                self._overflow = 0
            self._pending.append(entry)
            full = len(self._pending) >= self.batch_lines
        if full:
            self._wake.set()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    # --- shipping -----------------------------------------------------------------------------

    def flush(self) -> bool:
        """Ship everything queued. False when a batch failed transiently (it stays queued)."""
        with self._ship_lock:
            while True:
                with self._lock:
                    batch = self._pending[: self.batch_lines]
                if not batch:
                    return True
                settled, refused = self._ship(batch)
                with self._lock:
                    del self._pending[:settled]
                self.dropped += refused
                if settled < len(batch):
                    return False

    def _ship(self, batch: list[dict[str, str]], again: bool = True) -> tuple[int, int]:
        """Send `batch` at `self.offset`. Returns how many of its first lines are settled (stored
        by the service, or refused for good) and how many of those were refused."""
        try:
            reply = self.client.call(
                "POST",
                self.path,
                route="job_logs",
                json_body={"offset": self.offset, "lines": batch},
                job_token=self.job_token,
                bypass_breaker=True,
            )
        except ServiceError as exc:
            expected = exc.body.get("expectedOffset") if isinstance(exc.body, dict) else None
            if exc.status == 409 and _is_count(expected):
                landed = expected - self.offset
                if 0 < landed <= len(batch):
                    # An earlier try of this batch, or of its first lines (more were queued
                    # since), landed and its answer was lost: only the rest is still to send.
                    self.offset = expected
                    if landed == len(batch):
                        return landed, 0
                    settled, refused = self._ship(batch[landed:], again=False)
                    return landed + settled, refused
                if again:
                    log.warning(
                        "%s: service expects offset %d, not %d; resending",
                        self.path,
                        expected,
                        self.offset,
                    )
                    self.offset = expected
                    return self._ship(batch, again=False)
            if exc.status is not None and 400 <= exc.status < 500 and exc.status not in (408, 429):
                log.warning("%s: %d log lines refused: %s", self.path, len(batch), exc)
                return len(batch), len(batch)
            log.warning("%s: %d log lines not shipped yet: %s", self.path, len(batch), exc)
            return 0, 0
        stored = self.offset + len(batch)  # what the service holds, unless it says otherwise
        if isinstance(reply.data, dict) and "offset" in reply.data:
            stored = reply.data["offset"]
        if not _is_count(stored):
            # A bad answer, like a malformed one: the batch stays queued, and the 409 to its
            # resend says whether it landed.
            log.warning("%s: bad answer to a log batch: offset %.40r", self.path, stored)
            return 0, 0
        self.offset = stored
        return len(batch), 0

    # --- background flushing while the step runs ----------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"logs{self.path}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.clock.wait(self._wake, self.interval)
            self._wake.clear()
            self.flush()

    def close(self) -> None:
        """Stop the background flusher and ship what is left."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if not self.flush():
            with self._lock:
                lost = len(self._pending)
                self._pending.clear()
            self.dropped += lost
            log.warning("%s: %d log lines could not be delivered", self.path, lost)
