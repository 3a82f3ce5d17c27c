"""A small real HTTP server that plays the service and misbehaves on cue.

It speaks enough of docs/protocol.md for an agent to claim and run jobs, and each route can be
given a script of answers, used one per request, before it falls back to the normal answer.
An answer is a `Bad` (status, headers, body, and how the bytes go out: at once, trickled one
at a time, never, or the connection closed) — truncated JSON, wrong types, huge bodies and
slow lorises are all just answers. Every request is recorded with its body.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HUGE = 9 * 1024 * 1024  # over the agent's 8 MiB cap on response bodies
EXECUTOR = b"#!/bin/sh\necho executor\n"


@dataclass
class Bad:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # "send": normal; "trickle-body" / "trickle-headers": a byte every `every` seconds, for ever;
    # "silent": read the request, answer nothing; "close": close without a byte;
    # "chunked": `body` as one chunk, repeated until HUGE bytes went out (no Content-Length).
    mode: str = "send"
    every: float = 0.3
    name: str = ""
    # True: the request is first handled as usual (a log batch stored, say), then this answer
    # goes out instead of the real one: a server that did the work but mangled its reply.
    after_work: bool = False

    def __str__(self) -> str:
        return self.name or f"{self.mode} {self.status}"


def json_answer(value: object, status: int = 200) -> Bad:
    return Bad(status, json.dumps(value).encode(), {"Content-Type": "application/json"})


@dataclass
class Request:
    method: str
    path: str
    body: bytes
    at: float
    route: str = ""

    def json(self):
        return json.loads(self.body) if self.body else None


class BadServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scripts: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        self.requests: list[Request] = []
        self.claims: collections.deque = collections.deque()  # claim bodies handed out, in order
        self.definitions: dict[str, object] = {}  # job id -> definition (dict) or a Bad
        self.logs: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> BadServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()

    def script(self, route: str, *answers: Bad) -> None:
        """Queue answers for a route: poll, ack, job_get, step_status, logs, heartbeat,
        deployment_status, executor, bg_token, bg_configuration."""
        with self.lock:
            self.scripts[route].extend(answers)

    def left(self, route: str) -> int:
        with self.lock:
            return len(self.scripts[route])

    def add_job(self, job_id: str, definition: object, token: str = "") -> None:
        """Queue a claim of `job_id`; its definition is a dict, or a Bad answer."""
        self.definitions[job_id] = definition
        self.claims.append(
            {
                "jobID": job_id,
                "jobToken": token or f"jt-{job_id}",
                "runID": f"run-{job_id}",
                "typeSpecificID": f"dep-{job_id}",
                "deploymentID": f"dep-{job_id}",
            }
        )

    def seen(self, method: str, path_prefix: str) -> list[Request]:
        with self.lock:
            return [
                r for r in self.requests if r.method == method and r.path.startswith(path_prefix)
            ]

    def outcome(self, job_id: str) -> dict | None:
        """The job's outcome as the service derives it from the step reports (there is no
        job-level status call): the first failed step fails it, with that step's last log line
        as the reason; steps 1..N of its definition all succeeded: succeeded; else None."""
        steps: dict[int, str] = {}
        for r in self.seen("PATCH", f"/api/workflow/jobs/{job_id}/"):
            parts = r.path.strip("/").split("/")
            if len(parts) == 6 and parts[4].isdigit() and r.body:
                steps[int(parts[4])] = json.loads(r.body).get("status")
        failed = sorted(i for i, status in steps.items() if status == "failed")
        if failed:
            lines = self.logs.get((job_id, str(failed[0]))) or [""]
            return {"status": "failed", "reason": lines[-1]}
        definition = self.definitions.get(job_id)
        count = len(definition["steps"]) - 1 if isinstance(definition, dict) else -1
        if count > 0 and all(steps.get(i) == "succeeded" for i in range(1, count + 1)):
            return {"status": "succeeded"}
        return None

    def unknown(self) -> list[str]:
        """Requests to routes the real service does not have (docs/protocol.md)."""
        with self.lock:
            return [f"{r.method} {r.path}" for r in self.requests if r.route == "unknown"]


class _Handler(BaseHTTPRequestHandler):
    server: BadServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _route(self, method: str, parts: list[str]) -> str:
        if parts == ["api", "deployments", "poll"]:
            return "poll"
        if parts == ["api", "deployments", "executor"]:
            return "executor"
        if parts == ["api", "background-activities", "token"]:
            return "bg_token"
        if parts == ["api", "background-activities", "configuration"]:
            return "bg_configuration"
        if parts == ["api", "agent-workflows", "deployment"]:
            return "ack"
        if len(parts) == 4 and parts[:2] == ["api", "deployments"] and parts[3] == "status":
            return "deployment_status"
        if parts[:3] == ["api", "workflow", "jobs"]:
            rest = parts[3:]
            if len(rest) == 1:
                return "job_get"
            if rest[1:] == ["heartbeat"]:
                return "heartbeat"
            if len(rest) == 3 and rest[2] == "status":
                return "step_status"
            if len(rest) == 3 and rest[2] == "logs":
                return "logs"
        return "unknown"

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        server = self.server
        path = self.path.split("?", 1)[0]
        with server.lock:
            route = self._route(self.command, path.strip("/").split("/"))
            server.requests.append(Request(self.command, path, body, time.monotonic(), route))
            script = server.scripts[route]
            answer = script.popleft() if script else None
        if answer is None or answer.after_work:
            normal = self._normal(route, path.strip("/").split("/"), body)
            answer = answer or normal
        self._send(answer)

    do_GET = do_POST = do_PATCH = _handle  # noqa: N815 - the http.server API

    def _normal(self, route: str, parts: list[str], body: bytes) -> Bad:
        server = self.server
        if route == "poll":
            if server.claims:
                return json_answer(server.claims.popleft())
            return Bad(204)
        if route == "job_get":
            definition = server.definitions.get(parts[3])
            if definition is None:
                return json_answer({"error": "no such job"}, 404)
            return definition if isinstance(definition, Bad) else json_answer(definition)
        if route == "logs":
            data = json.loads(body)
            stored = server.logs[(parts[3], parts[4])]
            if data["offset"] != len(stored):
                return json_answer({"error": "offset", "expectedOffset": len(stored)}, 409)
            stored.extend(line["l"] for line in data["lines"])
            return json_answer({"offset": len(stored)})
        if route == "deployment_status":
            return json_answer("running")
        if route == "executor":
            return Bad(200, EXECUTOR, {"Content-Type": "application/octet-stream", "ETag": '"1"'})
        if route == "bg_token":
            return json_answer({"token": "wkr-1", "expiration": "2099-01-01T00:00:00Z"})
        if route == "bg_configuration":
            return json_answer([])
        if route == "unknown":
            return json_answer({"error": "not found"}, 404)
        return json_answer({})

    def _send(self, answer: Bad) -> None:
        if answer.mode == "close":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if answer.mode == "silent":
            self.close_connection = True
            self.server.stopping.wait(600)
            return
        head = f"HTTP/1.1 {answer.status} Bad\r\n".encode()
        headers = dict(answer.headers)
        if answer.mode == "chunked":
            headers["Transfer-Encoding"] = "chunked"
        elif answer.status != 204:
            headers.setdefault("Content-Length", str(len(answer.body)))
        head += b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
        try:
            if answer.mode == "trickle-headers":
                self.close_connection = True
                self._trickle(head + b"X-Slow: " + b"a" * 100_000, answer.every)
                return
            self.wfile.write(head + b"\r\n")
            if answer.mode == "trickle-body":
                self.close_connection = True
                self._trickle(answer.body + b" " * 100_000, answer.every)
            elif answer.mode == "chunked":
                sent = 0
                chunk = f"{len(answer.body):x}\r\n".encode() + answer.body + b"\r\n"
                while sent < HUGE and not self.server.stopping.is_set():
                    self.wfile.write(chunk)
                    sent += len(answer.body)
                self.wfile.write(b"0\r\n\r\n")
            elif answer.status != 204:
                self.wfile.write(answer.body)
        except OSError:  # the agent gave up and closed the connection: what we want to see
            self.close_connection = True

    def _trickle(self, data: bytes, every: float) -> None:
        for i in range(len(data)):
            if self.server.stopping.wait(every):
                return
            self.wfile.write(data[i : i + 1])
