"""Slots and their poll loops; drain and cancel.

Each slot is a thread that polls, runs the job it claims, and polls again. Deployment slots
call `GET /api/deployments/poll`; lease slots (insights_scan, policy_evaluation) call
`POST /api/background-activities/worker/lease/acquire`. `slots` (default 1, as upstream) gives
N slots of each enabled kind in one process.

Slots must not poll in step: bunched polls leave the queue unwatched between the bunches, and a
job waits for the next one. So the first slot polls at once (work that is waiting is claimed
without delay) and the others make their first poll at a random point within polling_interval;
every wait after that (idle, error, breaker) gets a random jitter, so that slots that failed
together (an outage) do not come back together.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

from workflow_agent.client import Client, parse_retry_after
from workflow_agent.clock import Clock
from workflow_agent.config import AgentConfig
from workflow_agent.errors import AbortedError, CircuitOpenError, ServiceError
from workflow_agent.health import Health
from workflow_agent.jobdef import BadPayload, Claim
from workflow_agent.jobs import Cancel, JobRunner

log = logging.getLogger(__name__)

LEASE_TYPES = ("insights_scan", "policy_evaluation")
MAX_JITTER = 5.0  # seconds
AUTH_BACKOFF_CAP = 300.0  # seconds; a rejected token is retried at least this often


def jittered(base: float, rng: Callable[[], float]) -> float:
    """`base` seconds plus a random 0..10% of it, at most MAX_JITTER."""
    return base + rng() * min(0.1 * base, MAX_JITTER)


def idle_wait(cfg: AgentConfig, retry_after: float | None, rng: Callable[[], float]) -> float:
    """How long an idle slot sleeps: polling_interval, or the server's Retry-After, + jitter.

    Retry-After is capped at max(polling_interval, request_retry_max_wait): a broken server's
    absurd value (years) must not park the slot.
    """
    base = cfg.polling_interval.total_seconds()
    if retry_after is not None and not cfg.polling_interval_override:
        base = min(retry_after, max(base, cfg.request_retry_max_wait.total_seconds()))
    return jittered(base, rng)


def auth_backoff(cfg: AgentConfig, failures: int) -> float:
    """The wait after the n-th consecutive 401/403: doubling from polling_interval, capped."""
    base = cfg.polling_interval.total_seconds()
    return min(base * 2 ** max(0, failures - 1), max(base, AUTH_BACKOFF_CAP))


class Slot:
    def __init__(self, agent: Agent, index: int, kind: str) -> None:
        self.agent = agent
        self.name = f"slot-{index}-{kind}"
        self.kind = kind  # "deployment" or "lease"
        self.cancel: Cancel | None = None
        self.auth_failures = 0
        interval = agent.cfg.polling_interval.total_seconds()
        self.first_delay = 0.0 if index == 1 else agent.rng() * interval

    def loop(self) -> None:
        agent = self.agent
        delay = self.first_delay
        while not agent.stop_claiming.is_set():
            if delay > 0 and agent.clock.wait(agent.stop_claiming, delay):
                break
            try:
                delay = self.once()
            except Exception:  # a bug must not silently kill a slot
                log.exception("%s: unexpected error", self.name)
                delay = jittered(agent.cfg.polling_interval.total_seconds(), agent.rng)
        log.debug("%s: stopped", self.name)

    def poll(self) -> tuple[Claim | None, float | None]:
        agent = self.agent
        started = agent.clock.monotonic()
        try:
            if self.kind == "deployment":
                reply = agent.client.call(
                    "GET", "/api/deployments/poll", route="poll", cancel=agent.stop_claiming
                )
                default_type = "deployment"
            else:
                kinds = [t for t in agent.kinds if t in LEASE_TYPES]
                reply = agent.client.call(
                    "POST",
                    "/api/background-activities/worker/lease/acquire",
                    route="lease_acquire",
                    json_body={"kinds": kinds},
                    cancel=agent.stop_claiming,
                )
                default_type = kinds[0]
        finally:
            if agent.metrics is not None:
                agent.metrics.poll_duration.observe(agent.clock.monotonic() - started)
        if reply.status != 200 or reply.data is None:
            retry_after = parse_retry_after(reply.headers.get("Retry-After"), agent.clock.time())
            return None, retry_after
        return Claim.parse(reply.data, default_type), None

    def once(self) -> float:
        """One poll, and the job if one was claimed. Returns the seconds to wait before the next."""
        agent = self.agent
        cfg = agent.cfg
        try:
            claim, retry_after = self.poll()
        except CircuitOpenError as exc:
            return jittered(exc.retry_in, agent.rng)
        except AbortedError:
            return 0.0  # draining: the loop ends
        except (ServiceError, BadPayload) as exc:
            agent.count_poll("error")
            status = getattr(exc, "status", None)
            if status in (401, 403):
                self.auth_failures += 1
                wait = jittered(auth_backoff(cfg, self.auth_failures), agent.rng)
                log.error(
                    "%s: the service refused the agent's credentials (HTTP %d); check the pool "
                    "token or OIDC settings. Retrying in %.0fs",
                    self.name,
                    status,
                    wait,
                )
                return wait
            log.warning("%s: poll failed: %s", self.name, exc)
            return jittered(cfg.polling_interval.total_seconds(), agent.rng)
        self.auth_failures = 0
        agent.health.touch()
        if claim is None:
            agent.count_poll("empty")
            return idle_wait(cfg, retry_after, agent.rng)
        agent.count_poll("claimed")
        if agent.metrics is not None:
            agent.metrics.last_claim.set(agent.clock.time())
        self.cancel = Cancel()
        if agent.cancel_reason:  # canceled while the claim was in flight
            self.cancel.set(agent.cancel_reason)
        try:
            result = agent.runner.run(claim, self.cancel)
        finally:
            self.cancel = None
        agent.job_done(result)
        return 0.0


class Agent:
    """All slots of one agent process."""

    def __init__(
        self,
        cfg: AgentConfig,
        client: Client,
        runner: JobRunner,
        *,
        health: Health,
        clock: Clock | None = None,
        metrics=None,
        rng: Callable[[], float] = random.random,
        kinds: list[str] | None = None,
    ) -> None:
        """`kinds`: the workflow types to claim (default: the configured ones)."""
        self.cfg = cfg
        self.client = client
        self.runner = runner
        self.health = health
        self.clock = clock or client.clock
        self.metrics = metrics
        self.rng = rng
        self.stop_claiming = threading.Event()
        self.cancel_reason = ""
        self.results: list[str] = []
        self._lock = threading.Lock()
        self.slots: list[Slot] = []
        self.kinds = list(cfg.enabled_workflow_types if kinds is None else kinds)
        for i in range(1, cfg.slots + 1):
            if "deployment" in self.kinds:
                self.slots.append(Slot(self, i, "deployment"))
            if any(t in self.kinds for t in LEASE_TYPES):
                self.slots.append(Slot(self, i, "lease"))
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for slot in self.slots:
            thread = threading.Thread(target=slot.loop, name=slot.name, daemon=True)
            thread.start()
            self.threads.append(thread)

    def count_poll(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.polls.labels(outcome).inc()

    def job_done(self, result: str) -> None:
        with self._lock:
            self.results.append(result)
        if self.cfg.single_run:
            log.info("single_run: stopping after one job (%s)", result)
            self.stop_claiming.set()

    def drain(self) -> None:
        """Stop claiming at once; in-flight jobs go on."""
        if not self.stop_claiming.is_set() or not self.health.draining:
            log.info("draining: no new claims; waiting for running jobs")
        self.health.set_draining()
        self.stop_claiming.set()

    def cancel_all(self, reason: str) -> None:
        self.cancel_reason = reason
        self.stop_claiming.set()
        for slot in self.slots:
            cancel = slot.cancel
            if cancel is not None:
                cancel.set(reason)

    def busy(self) -> int:
        return sum(1 for s in self.slots if s.cancel is not None)

    def exit_code(self) -> int:
        if self.cfg.single_run and self.results:
            return 0 if self.results[0] == "succeeded" else 1
        return 0
