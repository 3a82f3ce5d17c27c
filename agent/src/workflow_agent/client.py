"""The protocol client: auth and identity headers, per-call timeout, retries, circuit breaker.

Every call to the service goes through `Client.call`. Transient failures (connection errors,
408, 429, 5xx) are retried `request_retry_count` times with exponential backoff from
`request_retry_wait`, capped at `request_retry_max_wait`; a `Retry-After` header (seconds or an
HTTP-date) replaces the computed wait, under the same cap. Other 4xx answers are not retried.
A call that still fails counts against the circuit breaker. Anything odd the server sends
(truncated or huge bodies, invalid JSON, an answer trickled a byte at a time) ends as a
`ServiceError`, never as a crash or a hang: each attempt has one deadline, `request_timeout`
from its start, for connecting, sending and reading the whole answer.

The breaker lives in breaker.py, the per-attempt deadline under httpx in deadline.py, and the
transports that put it under the sockets (direct and through proxies) in transport.py.
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

from workflow_agent import __version__, trust  # noqa: E402
from workflow_agent.breaker import Breaker  # noqa: E402
from workflow_agent.clock import Clock  # noqa: E402
from workflow_agent.config import AgentConfig  # noqa: E402
from workflow_agent.deadline import Deadline, DeadlineBackend  # noqa: E402
from workflow_agent.errors import AbortedError, ServiceError  # noqa: E402
from workflow_agent.transport import PoolTransport, pool, proxy_mounts  # noqa: E402

log = logging.getLogger(__name__)

MAX_BODY = 8 * 1024 * 1024  # no legitimate answer comes close; a bigger one is a broken server
MAX_RAW_BODY = 1024 * 1024 * 1024  # a download (the deployment executor: a Go binary, ~100 MB)
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))


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


def ssl_context(ca_bundle: str, env: Mapping[str, str]) -> ssl.SSLContext:
    """The system trust store and certifi's, plus SSL_CERT_FILE and `ca_bundle` when given."""
    first, *more = trust.sources(ca_bundle, env)
    ctx = ssl.create_default_context(cafile=first)
    ctx.load_default_certs()
    for path in more:
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
        self._deadline = Deadline()
        mounts = None
        if transport is None:  # real sockets (tests inject a mock transport)
            tls = ssl_context(cfg.ca_bundle, env)
            backend = DeadlineBackend(httpcore.SyncBackend(), self._deadline)
            transport = PoolTransport(pool(tls, backend))
            mounts = proxy_mounts(tls, backend)  # HTTPS_PROXY / HTTP_PROXY / NO_PROXY
        self._http = httpx.Client(
            base_url=cfg.service_url,
            headers=identity_headers(env),
            timeout=httpx.Timeout(self.timeout),
            transport=transport,
            mounts=mounts,
            follow_redirects=False,
        )
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
        headers: Mapping[str, str] | None = None,
        raw: bool = False,
        timeout: float | None = None,
    ) -> Reply:
        """Make one logical call. Pool auth unless `job_token` is given or `anonymous`.

        `raw`: the body is kept as bytes (a download, up to MAX_RAW_BODY), not parsed as JSON.
        `timeout` replaces request_timeout as the deadline of each attempt."""
        probe = self.breaker.before(route, bypass_breaker)
        retries = self.cfg.request_retry_count
        wait = self.cfg.request_retry_wait.total_seconds()
        max_wait = self.cfg.request_retry_max_wait.total_seconds()
        renewed = False
        attempt = 0
        try:
            while True:
                attempt += 1
                sent = {**(headers or {}), **self._auth(job_token, anonymous)}
                try:
                    reply = self._send(method, path, route, sent, json_body, raw, timeout)
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

    def _send(self, method, path, route, headers, json_body, raw=False, timeout=None) -> Reply:
        kwargs: dict[str, Any] = {"headers": headers}
        if json_body is not None:
            kwargs["content"] = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        # One deadline for the whole attempt: connect, send, headers and body (DeadlineBackend).
        self._deadline.at = time.monotonic() + (timeout or self.timeout)
        try:
            try:
                request = self._http.build_request(method, path, **kwargs)
                response = self._http.send(request, stream=True)
            except httpx.TransportError as exc:
                self._count(route, "error")
                raise ServiceError(f"{method} {route}: {_describe(exc)}", route=route) from None
            try:
                body = self._read(response, MAX_RAW_BODY if raw else MAX_BODY)
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
        if raw and response.status_code < 400:
            return Reply(response.status_code, response.headers, body)
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

    def _read(self, response: httpx.Response, limit: int = MAX_BODY) -> bytes:
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ServiceError(f"response too large ({declared} bytes)")
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ServiceError(f"response too large (over {limit} bytes)")
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
