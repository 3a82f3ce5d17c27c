"""A recording HTTP proxy: forwards every request to the emulator unchanged and keeps both
directions (headers and bodies). It serves as the agent's HTTP_PROXY and as a TLS front
(test_agent_network.py), and the secrets test (tests/reliability) uses it to learn every
credential that went over the wire (job tokens, OIDC tokens, the exchanged access token) so
that it can look for each one everywhere else."""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Exchange:
    method: str
    target: str  # as sent: the absolute URL when the client used us as its proxy
    path: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int = 0  # 0 and no body until the upstream has answered
    response_body: bytes = b""


class Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Forward)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()

    def recorded(self) -> list[Exchange]:
        with self.lock:
            return list(self.exchanges)


class _Forward(BaseHTTPRequestHandler):
    server: Recorder
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        split = urllib.parse.urlsplit(self.path)
        target = split.path + (f"?{split.query}" if split.query else "")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in ("host", "proxy-connection")
        }
        # Recorded on arrival, so that a request is seen even if its client goes away.
        exchange = Exchange(self.command, self.path, target, dict(headers), body)
        with self.server.lock:
            self.server.exchanges.append(exchange)
        conn = http.client.HTTPConnection(*self.server.upstream, timeout=120)
        try:
            conn.request(self.command, target, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        exchange.status, exchange.response_body = resp.status, data
        self.send_response(resp.status)
        for key, value in resp.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = _forward  # noqa: N815 - the http.server API

    def log_message(self, *args) -> None:
        pass
