"""client: headers, retry/backoff schedule, Retry-After, circuit breaker, bad answers.

The transport is the unit boundary here (httpx.MockTransport, see agent_helpers.Script): it
lets the exact retry schedule be checked with an injected clock and no sleeping.
"""

import email.utils
import re
import socket
import threading

import httpx
import pytest
from agent_helpers import TOKEN, Script, config, make_client, ok
from workflow_agent import __version__
from workflow_agent.client import (
    MAX_BODY,
    AbortedError,
    Client,
    ServiceError,
    backoff,
    parse_retry_after,
    ssl_context,
)
from workflow_agent.clock import FakeClock
from workflow_agent.errors import CircuitOpenError
from workflow_agent.metrics import Metrics


def call(client, path="/api/deployments/poll", **kw):
    return client.call("GET", path, route=kw.pop("route", "poll"), **kw)


# --- headers -----------------------------------------------------------------------------------


def test_pool_calls_carry_token_user_agent_and_identity():
    script = Script(ok(status=204))
    call(make_client(script, env={"WORKFLOW_AGENT_INSTANCE": "web-3"}))
    headers = script.requests[0].headers
    assert headers["Authorization"] == f"token {TOKEN}"
    assert re.fullmatch(
        rf"workflow-agent/{re.escape(__version__)} \([a-z0-9]+; \S+\)", headers["User-Agent"]
    )
    assert headers["X-Agent-Hostname"]
    assert headers["X-Agent-Pid"].isdigit()
    assert headers["X-Agent-Instance"] == "web-3"


def test_no_instance_header_without_the_env_var():
    script = Script(ok(status=204))
    call(make_client(script))
    assert "X-Agent-Instance" not in script.requests[0].headers


def test_job_token_replaces_the_pool_token_and_anonymous_sends_none():
    script = Script(ok({}))
    client = make_client(script)
    call(client, "/api/workflow/jobs/j1", job_token="jobtok-1")
    client.call("POST", "/api/oauth/token", route="oauth", json_body={"a": "b"}, anonymous=True)
    assert script.requests[0].headers["Authorization"] == "token jobtok-1"
    assert "Authorization" not in script.requests[1].headers


def test_json_bodies_and_bodies_without_content_type_are_parsed():
    script = Script(httpx.Response(200, content=b'{"a": 1}'))  # no Content-Type
    reply = make_client(script).call("POST", "/x", route="x", json_body={"k": "v"})
    assert reply.data == {"a": 1}
    assert script.bodies() == [{"k": "v"}]


# --- retries and backoff -----------------------------------------------------------------------


def test_default_schedule_two_retries_20s_then_40s():
    clock = FakeClock()
    script = Script(ok(status=503))
    with pytest.raises(ServiceError) as info:
        call(make_client(script, clock))
    assert info.value.status == 503
    assert len(script.requests) == 3
    assert clock.waits == [20.0, 40.0]


def test_backoff_doubles_and_is_capped_by_max_wait():
    clock = FakeClock()
    script = Script(ok(status=500))
    with pytest.raises(ServiceError):
        call(make_client(script, clock, request_retry_count=5))
    assert clock.waits == [20.0, 40.0, 80.0, 120.0, 120.0]
    assert [backoff(n, 1.0, 5.0, None) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]


def test_success_after_transient_failures():
    clock = FakeClock()
    script = Script(ok(status=502), httpx.ConnectError("refused"), ok({"fine": True}))
    assert call(make_client(script, clock)).data == {"fine": True}
    assert clock.waits == [20.0, 40.0]


@pytest.mark.parametrize("status", [408, 429, 500, 503, 599])
def test_transient_statuses_are_retried(status):
    script = Script(ok(status=status))
    with pytest.raises(ServiceError):
        call(make_client(script, request_retry_count=1))
    assert len(script.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 422])
def test_other_4xx_are_not_retried(status):
    clock = FakeClock()
    script = Script(ok({"error": "nope"}, status=status))
    with pytest.raises(ServiceError) as info:
        call(make_client(script, clock))
    assert len(script.requests) == 1 and clock.waits == []
    assert info.value.status == status
    assert str(info.value) == f"GET poll: HTTP {status}: nope"


def test_connection_errors_are_retried_and_counted_as_code_error():
    metrics = Metrics()
    script = Script(httpx.ConnectError("connection refused"))
    with pytest.raises(ServiceError) as info:
        call(make_client(script, metrics=metrics))
    assert info.value.status is None and "ConnectError" in str(info.value)
    assert len(script.requests) == 3
    assert metrics.value("workflow_agent_requests_total", {"route": "poll", "code": "error"}) == 3


def test_zero_retries():
    script = Script(ok(status=503))
    with pytest.raises(ServiceError):
        call(make_client(script, request_retry_count=0))
    assert len(script.requests) == 1


def test_cancel_aborts_the_retry_wait():
    stop = threading.Event()
    stop.set()
    script = Script(ok(status=503))
    with pytest.raises(AbortedError):
        call(make_client(script), cancel=stop)
    assert len(script.requests) == 1


# --- Retry-After -------------------------------------------------------------------------------


def test_retry_after_seconds_replaces_the_backoff():
    clock = FakeClock()
    script = Script(ok(status=429, **{"Retry-After": "7"}), ok({}))
    call(make_client(script, clock))
    assert clock.waits == [7.0]


def test_retry_after_http_date():
    clock = FakeClock()
    when = email.utils.formatdate(clock.time() + 45, usegmt=True)
    script = Script(ok(status=503, **{"Retry-After": when}), ok({}))
    call(make_client(script, clock))
    assert clock.waits == [45.0]


def test_retry_after_is_capped_by_max_wait():
    clock = FakeClock()
    script = Script(ok(status=429, **{"Retry-After": "3600"}), ok({}))
    call(make_client(script, clock))
    assert clock.waits == [120.0]


def test_invalid_retry_after_falls_back_to_backoff():
    clock = FakeClock()
    script = Script(ok(status=429, **{"Retry-After": "soon"}), ok({}))
    call(make_client(script, clock))
    assert clock.waits == [20.0]


def test_parse_retry_after_forms():
    now = 1_700_000_000.0
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after(email.utils.formatdate(now + 90, usegmt=True), now) == 90.0
    assert parse_retry_after(email.utils.formatdate(now - 90, usegmt=True), now) == 0.0
    for bad in (None, "", "-5", "1.5", "tomorrow", "Mon, 99 Foo 2024"):
        assert parse_retry_after(bad, now) is None


# --- circuit breaker ---------------------------------------------------------------------------


def test_breaker_opens_after_consecutive_failed_calls_and_half_opens():
    clock = FakeClock()
    metrics = Metrics()
    script = Script(ok(status=503))
    client = make_client(script, clock, metrics, request_retry_count=0)
    for _ in range(2):
        with pytest.raises(ServiceError):
            call(client)
    assert client.breaker.state == "open"
    assert metrics.value("workflow_agent_circuit_breaker_open") == 1
    assert metrics.value("workflow_agent_circuit_breaker_trips_total") == 1
    with pytest.raises(CircuitOpenError) as info:
        call(client)
    assert info.value.retry_in == pytest.approx(600.0)
    assert len(script.requests) == 2  # the open breaker sent nothing

    clock.advance(599)
    with pytest.raises(CircuitOpenError):
        call(client)
    clock.advance(1)
    script.answers = [ok(status=204)]
    assert call(client).status == 204  # the half-open probe
    assert client.breaker.state == "closed"
    assert metrics.value("workflow_agent_circuit_breaker_open") == 0


def test_failed_probe_reopens_the_breaker():
    clock = FakeClock()
    metrics = Metrics()
    script = Script(ok(status=500))
    client = make_client(script, clock, metrics, request_retry_count=0, circuit_breaker_failures=1)
    with pytest.raises(ServiceError):
        call(client)
    clock.advance(600)
    with pytest.raises(ServiceError) as info:
        call(client)  # the probe, which fails
    assert not isinstance(info.value, CircuitOpenError)
    assert client.breaker.state == "open"
    assert metrics.value("workflow_agent_circuit_breaker_trips_total") == 2
    with pytest.raises(CircuitOpenError):
        call(client)


def test_half_open_admits_a_single_probe():
    clock = FakeClock()
    client = make_client(Script(ok(status=500)), clock, circuit_breaker_failures=1)
    client.breaker.failure(probe=False)
    clock.advance(600)
    assert client.breaker.before("poll", bypass=False) is True
    with pytest.raises(CircuitOpenError):
        client.breaker.before("poll", bypass=False)


def test_breaker_counts_calls_not_attempts_and_resets_on_success():
    clock = FakeClock()
    script = Script(ok(status=503), ok(status=503), ok(status=503), ok({}), ok(status=503))
    client = make_client(script, clock, circuit_breaker_failures=2)
    with pytest.raises(ServiceError):
        call(client)  # three attempts, one failed call
    assert client.breaker.state == "closed" and client.breaker.failures == 1
    call(client)  # success resets the count
    assert client.breaker.failures == 0


def test_4xx_answers_do_not_trip_the_breaker():
    client = make_client(Script(ok(status=404)), circuit_breaker_failures=1)
    for _ in range(3):
        with pytest.raises(ServiceError):
            call(client)
    assert client.breaker.state == "closed"


def test_running_job_calls_bypass_the_open_breaker():
    clock = FakeClock()
    script = Script(ok(status=503))
    client = make_client(script, clock, request_retry_count=0, circuit_breaker_failures=1)
    with pytest.raises(ServiceError):
        call(client)
    assert client.breaker.state == "open"
    script.answers = [ok({})]
    reply = client.call(
        "POST", "/api/workflow/jobs/j/heartbeat", route="hb", job_token="t", bypass_breaker=True
    )
    assert reply.status == 200
    assert script.paths[-1] == "POST /api/workflow/jobs/j/heartbeat"


# --- bad answers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [b'{"jobID": "a", ', b"<html>oops</html>", b"\xff\xfe\x00", b"[1, 2"]
)
def test_malformed_success_bodies_are_a_clean_error(body):
    script = Script(httpx.Response(200, content=body))
    client = make_client(script, circuit_breaker_failures=1)
    with pytest.raises(ServiceError, match="malformed response") as info:
        call(client)
    assert info.value.status == 200
    assert len(script.requests) == 1
    assert client.breaker.state == "closed"


def test_huge_bodies_are_refused():
    script = Script(httpx.Response(200, content=b"[" + b"1," * (MAX_BODY // 2) + b"1]"))
    with pytest.raises(ServiceError, match="response too large"):
        call(make_client(script))


def test_error_bodies_that_are_not_json_still_give_a_message():
    script = Script(httpx.Response(404, content=b"no such thing\n\n"))
    with pytest.raises(ServiceError) as info:
        call(make_client(script))
    assert str(info.value) == "GET poll: HTTP 404: no such thing"


def test_a_body_cut_off_mid_stream_is_a_transient_failure():
    def cut(request):
        return httpx.Response(200, stream=_Broken())

    script = Script(cut, ok({"x": 1}))
    assert call(make_client(script, request_retry_count=1)).data == {"x": 1}
    assert len(script.requests) == 2


class _Broken(httpx.SyncByteStream):
    def __iter__(self):
        yield b'{"partial": '
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


# --- one deadline per attempt (real sockets: the deadline lives under httpx, in httpcore) ------


class _Trickler:
    """A TCP server that answers every request a byte at a time, each byte well inside the
    read timeout: in the headers, or in the body after complete headers."""

    def __init__(self, where: str) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        if where == "headers":
            self.answer, self.slow = head, b"X-Slow: " + b"a" * 100_000
        else:
            self.answer, self.slow = head + b"Content-Length: 100000\r\n\r\n", b" " * 100_000
        self.stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(self.answer)
                for i in range(len(self.slow)):
                    if self.stop.wait(0.1):
                        return
                    conn.sendall(self.slow[i : i + 1])
            except OSError:
                return  # the client gave up: what the test wants

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_trickled_answer_ends_at_request_timeout(where):
    """request_timeout bounds the whole attempt, not each socket read: without that, this call
    would last until the 100 000 trickled bytes are through (almost 3 hours)."""
    server = _Trickler(where)
    cfg = config(service_url=server.url, request_timeout="1s", request_retry_count=0)
    client = Client(cfg, env={})
    outcome: list[BaseException] = []

    def poll():
        try:
            call(client)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=poll, daemon=True)
    worker.start()
    worker.join(timeout=120)  # generous for a loaded machine; the call's own limit is 1s
    still_waiting = worker.is_alive()
    server.close()
    client.close()
    assert not still_waiting, "the call is still waiting for the trickled answer"
    [error] = outcome
    assert isinstance(error, ServiceError)
    assert error.status is None  # no usable answer: a transient failure, retried and counted
    assert "ReadTimeout" in str(error)


# --- TLS ---------------------------------------------------------------------------------------


def test_ca_bundle_that_cannot_be_read_is_an_error(tmp_path):
    with pytest.raises(OSError):
        ssl_context(str(tmp_path / "missing.pem"), {})


def test_ca_bundle_and_ssl_cert_file_are_loaded():
    import certifi

    ctx = ssl_context(certifi.where(), {"SSL_CERT_FILE": certifi.where()})
    assert ctx.cert_store_stats()["x509_ca"] > 0
