"""The agent's local HTTP server: /healthz, /readyz (extension), /metrics (extension)."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from workflow_agent.health import Health
from workflow_agent.metrics import CONTENT_TYPE, Metrics

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            self._json(*self.server.health.healthz())
        elif path == "/readyz":
            self._json(*self.server.health.readyz())
        elif path == "/metrics":
            self._send(200, self.server.metrics.render(), CONTENT_TYPE)
        else:
            self._json(404, {"error": "not found"})

    def _json(self, status: int, body: dict) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the http.server API
        log.debug("http: " + format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], health: Health, metrics: Metrics) -> None:
        self.health = health
        self.metrics = metrics
        super().__init__(address, _Handler)


class HttpServer:
    """Serves in a background thread. Port 0 picks a free port (see `.port`)."""

    def __init__(self, host: str, port: int, health: Health, metrics: Metrics) -> None:
        self._server = _Server((host, port), health, metrics)
        self.host = host
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="http", kwargs={"poll_interval": 0.5}
        )
        self._thread.daemon = True

    def start(self) -> None:
        self._thread.start()
        log.info("http server listening on %s:%d", self.host or "0.0.0.0", self.port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
