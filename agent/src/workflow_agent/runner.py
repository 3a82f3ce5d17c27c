"""`workflow-agent run`: wire the parts together, serve, poll, and stop cleanly on signals.

SIGTERM (or SIGINT) drains: no new claims at once, /readyz turns 503, running jobs may finish
for up to `drain_timeout`, then they are canceled and reported, and the agent exits 0.
SIGQUIT, or a second SIGTERM/SIGINT, cancels running jobs now.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import ssl
import threading
from datetime import timedelta

from workflow_agent import __version__, bootstrap
from workflow_agent.client import Client
from workflow_agent.clock import Clock
from workflow_agent.config import LoadedConfig
from workflow_agent.durations import format as format_duration
from workflow_agent.executor import ExecutorCache
from workflow_agent.health import Health
from workflow_agent.jobs import JobRunner
from workflow_agent.logsetup import setup as setup_logging
from workflow_agent.metrics import Metrics
from workflow_agent.oidc import OidcTokens
from workflow_agent.poller import Agent
from workflow_agent.redaction import Redactor
from workflow_agent.server import HttpServer
from workflow_agent.targets import make_target
from workflow_agent.targets._jobdir import base_dir

log = logging.getLogger("workflow_agent")

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
HTTP_HOST_ENV = "WORKFLOW_AGENT_HTTP_HOST"  # env-only: bind address of the local HTTP server
# Under shared_volume_directory (or the OS temp dir), shared by the agents of a host.
EXECUTOR_CACHE = "workflow-agent-executor"


def instance_name(env=None) -> str:
    env = os.environ if env is None else env
    return env.get("WORKFLOW_AGENT_INSTANCE") or f"{socket.gethostname()}-{os.getpid()}"


class Signals:
    """What the operator asked for; handlers only record it (they run on the main thread)."""

    def __init__(self) -> None:
        self.stops = 0
        self.quit = False
        self.wake = threading.Event()

    def on_stop(self, signum, frame) -> None:
        self.stops += 1
        self.wake.set()

    def on_quit(self, signum, frame) -> None:
        self.quit = True
        self.wake.set()

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self.on_stop)
        signal.signal(signal.SIGINT, self.on_stop)
        if hasattr(signal, "SIGQUIT"):
            signal.signal(signal.SIGQUIT, self.on_quit)


class Supervisor:
    """Turns signals into drain and cancel. `step` is called every half second (or on a signal)."""

    def __init__(self, agent: Agent, signals: Signals, drain_timeout: float, clock: Clock) -> None:
        self.agent = agent
        self.signals = signals
        self.drain_timeout = drain_timeout
        self.clock = clock
        self.deadline: float | None = None
        self.canceled = False

    def step(self) -> None:
        agent, signals = self.agent, self.signals
        if (signals.quit or signals.stops >= 2) and not self.canceled:
            log.warning("stopping now: canceling running jobs")
            agent.cancel_all("the agent is stopping")
            self.canceled = True
        elif signals.stops == 1 and self.deadline is None:
            self.deadline = self.clock.monotonic() + self.drain_timeout
            log.info(
                "signal received: draining (%d running, up to %s)",
                agent.busy(),
                format_duration(timedelta(seconds=self.drain_timeout)),
            )
            agent.drain()
        overdue = self.deadline is not None and self.clock.monotonic() >= self.deadline
        if overdue and not self.canceled:
            log.warning("drain_timeout reached: canceling running jobs")
            agent.cancel_all("the agent's drain_timeout was reached")
            self.canceled = True

    def wait(self) -> None:
        """Until every slot has ended."""
        while any(t.is_alive() for t in self.agent.threads):
            self.signals.wake.wait(0.5)
            self.signals.wake.clear()
            self.step()


def run(loaded: LoadedConfig) -> int:
    cfg = loaded.config
    redactor = Redactor([cfg.token.get_secret_value()] if cfg.token else [])
    for warning in setup_logging(
        level=cfg.log_level, fmt=cfg.log_format, use_syslog=cfg.syslog, redactor=redactor
    ):
        log.warning("%s", warning)
    for level, text in loaded.notices:
        log.log(logging.WARNING if level == "warning" else logging.INFO, "config: %s", text)
    instance = instance_name()
    log.info(
        "workflow-agent %s starting: instance %s, target %s, %d slot(s), service %s, config %s",
        __version__,
        instance,
        cfg.deploy_target,
        cfg.slots,
        cfg.service_url,
        loaded.source or "(environment)",
    )
    clock = Clock()
    metrics = Metrics(instance=instance, deploy_target=cfg.deploy_target, slots=cfg.slots)
    health = Health(cfg.effective_health_threshold.total_seconds(), clock, metrics)
    try:
        client = Client(cfg, clock=clock, metrics=metrics)
    except (OSError, ssl.SSLError) as exc:
        log.error("ca_bundle: cannot load %s: %s", cfg.ca_bundle or "SSL_CERT_FILE", exc)
        return EXIT_CONFIG
    if cfg.oidc_token_file:
        client.tokens = OidcTokens(cfg, client, redactor)
    try:
        target = make_target(cfg, instance)
    except Exception as exc:  # a missing SDK, an unreachable Docker engine or cluster
        log.error("cannot start the %s target: %s", cfg.deploy_target, exc)
        return EXIT_FAILED
    try:
        removed = target.cleanup_orphans()
        if removed:
            log.info("removed %d leftover(s) of earlier runs", removed)
    except Exception as exc:
        log.warning("cleanup of leftovers failed: %s", exc)
    host = os.environ.get(HTTP_HOST_ENV, "0.0.0.0")
    try:
        server = HttpServer(host, cfg.http_server_port, health, metrics)
    except OSError as exc:
        log.error("http_server_port: cannot listen on %s:%d: %s", host, cfg.http_server_port, exc)
        return EXIT_FAILED
    server.start()
    kinds = bootstrap.workflow_types(client, cfg)
    executors = ExecutorCache(client, base_dir(cfg.shared_volume_directory) / EXECUTOR_CACHE)
    runner = JobRunner(
        cfg,
        client,
        target,
        instance=instance,
        clock=clock,
        metrics=metrics,
        health=health,
        redactor=redactor,
        withheld=lambda: client.tokens.secrets() if client.tokens else [],
        executors=executors,
    )
    agent = Agent(cfg, client, runner, health=health, clock=clock, metrics=metrics, kinds=kinds)
    signals = Signals()
    signals.install()
    agent.start()
    try:
        Supervisor(agent, signals, cfg.drain_timeout.total_seconds(), clock).wait()
    finally:
        server.stop()
        client.close()
    code = agent.exit_code()
    log.info("stopped (exit %d)", code)
    return code
