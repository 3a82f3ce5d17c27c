"""The deployment executor's cache (workflow_agent.executor) against a real HTTP server on
loopback that answers as the service's route may: an executable with an ETag, 304s to a
matching If-None-Match, a new version, a 404, garbage."""

from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path

import pytest
from workflow_agent.client import Client
from workflow_agent.config import AgentConfig
from workflow_agent.executor import ExecutorCache, ExecutorError

POOL_TOKEN = "pul-" + "e" * 40


class Route:
    """What GET /api/deployments/executor answers, and what it was asked."""

    def __init__(self) -> None:
        self.body = b"#!/bin/sh\necho executor v1\n"
        self.status = 200
        self.etags = True
        self.requests: list[dict] = []

    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest() + '"'


@pytest.fixture
def route():
    state = Route()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            state.requests.append(
                {
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "if_none_match": self.headers.get("If-None-Match"),
                }
            )
            if state.status != 200:
                self.send_response(state.status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if state.etags and self.headers.get("If-None-Match") == state.etag():
                self.send_response(304)
                self.end_headers()
                return
            self.send_response(200)
            if state.etags:
                self.send_header("ETag", state.etag())
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            self.wfile.write(state.body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()


def cache(route, directory) -> ExecutorCache:
    cfg = AgentConfig(
        token=POOL_TOKEN, service_url=route.url, request_retry_count=0, request_timeout="5s"
    )
    return ExecutorCache(Client(cfg, env={}), directory)


def test_fetched_with_the_pool_token_once_per_version(route, tmp_path):
    executors = cache(route, tmp_path / "cache")
    first = executors.path()
    assert Path(first).read_bytes() == route.body
    assert executors.path() == first  # unchanged: a 304, the same file
    assert [r["auth"] for r in route.requests] == [f"token {POOL_TOKEN}"] * 2
    assert [r["path"] for r in route.requests] == ["/api/deployments/executor"] * 2
    assert route.requests[1]["if_none_match"] == route.etag()
    # The service's copy changes: the next job gets the new one, and the old copy goes.
    route.body = b"#!/bin/sh\necho executor v2\n"
    second = executors.path()
    assert second != first and Path(second).read_bytes() == route.body
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        ["executor.json", second.rsplit("/", 1)[1]]
    )
    # A restarted agent (a new cache object) knows the version it has: a 304 again.
    assert cache(route, tmp_path / "cache").path() == second
    assert route.requests[-1]["if_none_match"] == route.etag()


def test_without_etags_each_job_downloads_the_same_file(route, tmp_path):
    route.etags = False
    executors = cache(route, tmp_path)
    assert executors.path() == executors.path()
    assert [r["if_none_match"] for r in route.requests] == [None, None]


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (404, b"", "HTTP 404"),
        (200, b'{"error": "nope"}', "is not a Linux executable (HTTP 200, 17 bytes"),
        (200, b"<html>login</html>", "is not a Linux executable"),
        (200, b"", "is not a Linux executable (HTTP 200, 0 bytes)"),
    ],
)
def test_a_bad_answer_is_one_clear_error(route, tmp_path, status, body, said):
    route.status, route.body = status, body
    with pytest.raises(ExecutorError) as err:
        cache(route, tmp_path).path()
    assert said in str(err.value)
    assert "\n" not in str(err.value) and POOL_TOKEN not in str(err.value)
    assert not any(tmp_path.iterdir())  # nothing half-written is kept
