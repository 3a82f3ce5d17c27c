"""The protocol client: auth and identity headers, per-call timeout, retries, circuit breaker.

Every call to the service goes through `Client.call`. Transient failures (connection errors,
408, 429, 5xx) are retried `request_retry_count` times with exponential backoff from
`request_retry_wait`, capped at `request_retry_max_wait`; a `Retry-After` header (seconds or an
HTTP-date) replaces the computed wait, under the same cap. Other 4xx answers are not retried.
A call that still fails counts against the circuit breaker. Anything odd the server sends
(truncated or huge bodies, invalid JSON, an answer trickled a byte at a time) ends as a
`ServiceError`, never as a crash or a hang: each attempt has one deadline, `request_timeout`
from its start, for connecting, sending and reading the whole answer.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import platform
import socket
import ssl
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

# httpx imports its command line (click, rich, pygments: about 5 MB) whenever those happen to be
# installed; the agent never uses it. A None entry makes that optional import fail as if absent.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpcore  # noqa: E402
import httpx  # noqa: E402

from workflow_agent import __version__  # noqa: E402
from workflow_agent.clock import Clock  # noqa: E402
from workflow_agent.config import AgentConfig  # noqa: E402

log = logging.getLogger(__name__)

MAX_BODY = 8 * 1024 * 1024  # no legitimate answer comes close; a bigger one is a broken server
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))


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


@dataclass
class Reply:
    status: int
    headers: httpx.Headers
    data: Any  # parsed JSON, or None for an empty body


class TokenSource(Protocol):
    # Docstring bodies, not `...`: pycodestyle of ansible-core 2.17's sanity flags one-line
    # defs (E704), and the agent ships in the collection.
    def token(self) -> str:
        """The token to send."""

    def invalidate(self) -> bool:
        """Drop the token after a 401: True when a new token will be fetched."""

    def secrets(self) -> list[str]:
        """The strings to redact from logs."""


class StaticToken:
    """The pool token from the config."""

    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token

    def invalidate(self) -> bool:
        return False  # a static token cannot be renewed; the caller backs off

    def secrets(self) -> list[str]:
        return [self._token]


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or an HTTP-date); None if invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def backoff(attempt: int, wait: float, max_wait: float, retry_after: float | None) -> float:
    """The wait before retry number `attempt` (1-based)."""
    if retry_after is not None:
        return min(retry_after, max_wait)
    return min(wait * 2 ** (attempt - 1), max_wait)


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


class _Deadline(threading.local):
    """The monotonic time by which the calling thread's current attempt must be over."""

    at: float | None = None

    def left(self, timeout: float | None, error: type[Exception]) -> float | None:
        """`timeout` of one socket operation, capped at what is left of the attempt."""
        if self.at is None:
            return timeout
        remaining = self.at - time.monotonic()
        if remaining <= 0:
            raise error("request_timeout reached")
        return remaining if timeout is None else min(timeout, remaining)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore.NetworkStream:
        timeout = self._deadline.left(timeout, httpcore.ConnectTimeout)
        inner = self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sockets, each operation capped at the calling attempt's deadline.

    httpx's timeouts apply to each socket operation: a server that trickles its headers a byte
    at a time, each byte inside the read timeout, would hold a call for hours.
    """

    def __init__(self, inner: httpcore.NetworkBackend, deadline: _Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        timeout = self._deadline.left(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        timeout = self._deadline.left(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_unix_socket(path, timeout, socket_options)
        return _DeadlineStream(stream, self._deadline)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _enforce_deadlines(http: httpx.Client, deadline: _Deadline) -> None:
    """Put _DeadlineBackend under each of the client's connection pools (direct and proxies).

    httpx has no public way to choose httpcore's network backend; its pools keep it in
    `_network_backend` (httpx 0.27-0.28, httpcore 1.x; test_client proves it still works).
    """
    transports = [http._transport, *http._mounts.values()]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        if pool is None:  # a test's mock transport: no sockets
            continue
        if not hasattr(pool, "_network_backend"):
            log.warning("request_timeout applies per socket read only (unknown httpcore version)")
            continue
        if not isinstance(pool._network_backend, _DeadlineBackend):
            pool._network_backend = _DeadlineBackend(pool._network_backend, deadline)


def ssl_context(ca_bundle: str, env: Mapping[str, str]) -> ssl.SSLContext:
    """The system trust store and certifi's, plus SSL_CERT_FILE and `ca_bundle` when given."""
    import certifi  # an httpx dependency

    ctx = ssl.create_default_context(cafile=certifi.where())
    ctx.load_default_certs()
    for path in (env.get("SSL_CERT_FILE", ""), ca_bundle):
        if path:
            ctx.load_verify_locations(cafile=path)
    return ctx


def user_agent() -> str:
    return f"workflow-agent/{__version__} ({sys.platform}; {platform.machine() or 'unknown'})"


def identity_headers(env: Mapping[str, str]) -> dict[str, str]:
    headers = {
        "User-Agent": user_agent(),
        "Accept": "application/json",
        "X-Agent-Hostname": socket.gethostname(),
        "X-Agent-Pid": str(os.getpid()),
    }
    if env.get("WORKFLOW_AGENT_INSTANCE"):
        headers["X-Agent-Instance"] = env["WORKFLOW_AGENT_INSTANCE"]
    return headers


class Client:
    def __init__(
        self,
        cfg: AgentConfig,
        *,
        tokens: TokenSource | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Clock | None = None,
        metrics=None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if env is None else env
        self.cfg = cfg
        self.clock = clock or Clock()
        self.metrics = metrics
        if tokens is None and cfg.token is not None:
            tokens = StaticToken(cfg.token.get_secret_value())
        self.tokens = tokens
        self.timeout = cfg.request_timeout.total_seconds()
        self.breaker = Breaker(
            cfg.circuit_breaker_failures,
            cfg.circuit_breaker_timeout.total_seconds(),
            self.clock,
            metrics,
        )
        verify: ssl.SSLContext | bool = True
        if transport is None:
            verify = ssl_context(cfg.ca_bundle, env)
        self._http = httpx.Client(
            base_url=cfg.service_url,
            headers=identity_headers(env),
            timeout=httpx.Timeout(self.timeout),
            transport=transport,
            verify=verify,
            trust_env=True,  # HTTPS_PROXY / HTTP_PROXY / NO_PROXY
            follow_redirects=False,
        )
        self._deadline = _Deadline()
        _enforce_deadlines(self._http, self._deadline)
        self._never = threading.Event()

    def close(self) -> None:
        self._http.close()

    # --- one call, with retries -----------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        *,
        route: str,
        json_body: Any = None,
        job_token: str | None = None,
        anonymous: bool = False,
        bypass_breaker: bool = False,
        cancel: threading.Event | None = None,
    ) -> Reply:
        """Make one logical call. Pool auth unless `job_token` is given or `anonymous`."""
        probe = self.breaker.before(route, bypass_breaker)
        retries = self.cfg.request_retry_count
        wait = self.cfg.request_retry_wait.total_seconds()
        max_wait = self.cfg.request_retry_max_wait.total_seconds()
        renewed = False
        attempt = 0
        try:
            while True:
                attempt += 1
                headers = self._auth(job_token, anonymous)
                try:
                    reply = self._send(method, path, route, headers, json_body)
                except ServiceError as exc:
                    if exc.status is not None:  # a bad answer, not a transient failure
                        self.breaker.success()
                        raise
                    error, retry_after = exc, None
                else:
                    if reply.status < 400:
                        self.breaker.success()
                        return reply
                    if (
                        reply.status in (401, 403)  # the poll's refusal is 403 [SPEC]
                        and not renewed
                        and job_token is None
                        and not anonymous
                        and self.tokens is not None
                        and self.tokens.invalidate()
                    ):
                        # The OIDC access token was refused: exchange a fresh one, once.
                        renewed = True
                        attempt -= 1
                        continue
                    error = self._status_error(method, path, route, reply)
                    if reply.status not in RETRY_STATUSES:
                        self.breaker.success()  # the service answered; the request was wrong
                        raise error
                    retry_after = parse_retry_after(
                        reply.headers.get("Retry-After"), self.clock.time()
                    )
                if attempt > retries:
                    self.breaker.failure(probe)
                    probe = False
                    raise error
                delay = backoff(attempt, wait, max_wait, retry_after)
                log.info("%s; retry %d/%d in %.1fs", error, attempt, retries, delay)
                if self.clock.wait(cancel or self._never, delay):
                    raise AbortedError(f"{method} {route}: aborted", route=route)
        except BaseException:
            self.breaker.release(probe)
            raise

    def _auth(self, job_token: str | None, anonymous: bool) -> dict[str, str]:
        if anonymous:
            return {}
        if job_token is not None:
            return {"Authorization": f"token {job_token}"}
        if self.tokens is None:
            raise ServiceError("no credentials configured")
        return {"Authorization": f"token {self.tokens.token()}"}

    def _send(self, method, path, route, headers, json_body) -> Reply:
        kwargs: dict[str, Any] = {"headers": headers}
        if json_body is not None:
            kwargs["content"] = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        # One deadline for the whole attempt: connect, send, headers and body (_DeadlineBackend).
        self._deadline.at = time.monotonic() + self.timeout
        try:
            try:
                request = self._http.build_request(method, path, **kwargs)
                response = self._http.send(request, stream=True)
            except httpx.TransportError as exc:
                self._count(route, "error")
                raise ServiceError(f"{method} {route}: {_describe(exc)}", route=route) from None
            try:
                body = self._read(response)
            except httpx.TransportError as exc:  # e.g. the connection closed mid-body
                self._count(route, "error")
                raise ServiceError(f"{method} {route}: {_describe(exc)}", route=route) from None
            except ServiceError as exc:
                exc.status = response.status_code
                exc.route = route
                self._count(route, str(response.status_code))
                raise
            finally:
                response.close()
        finally:
            self._deadline.at = None
        self._count(route, str(response.status_code))
        data: Any = None
        if body.strip():
            try:
                data = json.loads(body)
            except ValueError:
                if response.status_code < 400:
                    raise ServiceError(
                        f"{method} {route}: malformed response (not JSON, {len(body)} bytes)",
                        status=response.status_code,
                        route=route,
                    ) from None
                data = body[:200].decode("utf-8", "replace")
        return Reply(response.status_code, response.headers, data)

    def _read(self, response: httpx.Response) -> bytes:
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > MAX_BODY:
            raise ServiceError(f"response too large ({declared} bytes)")
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_BODY:
                    raise ServiceError(f"response too large (over {MAX_BODY} bytes)")
                chunks.append(chunk)
        except httpx.DecodingError as exc:
            raise ServiceError(f"undecodable response: {exc}") from None
        return b"".join(chunks)

    def _status_error(self, method: str, path: str, route: str, reply: Reply) -> ServiceError:
        detail = ""
        if isinstance(reply.data, dict) and isinstance(reply.data.get("error"), str):
            detail = reply.data["error"]
        elif isinstance(reply.data, str):
            detail = reply.data
        detail = " ".join(detail.split())[:200]
        text = f"{method} {route}: HTTP {reply.status}" + (f": {detail}" if detail else "")
        error = ServiceError(text, status=reply.status, route=route)
        error.body = reply.data
        return error

    def _count(self, route: str, code: str) -> None:
        if self.metrics is not None:
            self.metrics.requests.labels(route, code).inc()


def _describe(exc: httpx.TransportError) -> str:
    name = type(exc).__name__
    text = " ".join(str(exc).split())[:200]
    return f"{name}: {text}" if text else name
