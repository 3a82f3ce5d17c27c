"""A strict stand-in for the service: it serves only the routes the real service is known to
serve (conformance.ROUTES), answers in the published shapes, and records every request and what
is wrong with it: a route outside the documented and observed set (answered 404, as the real
service would), a body or header the record does not allow, a report about step 0 (the
reserved source-checkout slot, which the runner never runs).

It hands out queued jobs to a poller that presents the pool token (or a runner token from the
OIDC exchange), derives each job's outcome from its step reports (there is no job-level status
call), and answers the pool REST API from an in-memory list.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conformance import check_request, check_response, route_of

EXECUTOR = b"#!/bin/sh\necho 'executor stand-in'\n"


@dataclass
class Exchange:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 0
    answer: bytes = b""


@dataclass
class Job:
    id: str
    token: str
    definition: dict
    deployment_id: str = field(default_factory=lambda: f"dep-{uuid.uuid4().hex[:12]}")
    run_id: str = field(default_factory=lambda: f"run-{uuid.uuid4().hex[:12]}")
    steps: dict[int, str] = field(default_factory=dict)  # index -> last reported status
    logs: dict[int, list[str]] = field(default_factory=dict)
    heartbeats: int = 0

    @property
    def status(self) -> str:
        """The JobStatus the service would show, from the step reports alone."""
        if any(s == "failed" for s in self.steps.values()):
            return "failed"
        wanted = range(1, len(self.definition["steps"]))
        if all(self.steps.get(i) in ("succeeded", "skipped") for i in wanted):
            return "succeeded"
        return "running" if self.steps else "accepted"


class StrictServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, pool_token: str, org: str = "acme") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pool_token = pool_token
        self.org = org
        self.access_tokens: set[str] = set()  # runner tokens from the OIDC exchange
        self.admin_token = "pul-" + secrets.token_hex(20)  # for the pool REST API
        self.queue: list[Job] = []
        self.jobs: dict[str, Job] = {}
        self.pools: dict[str, dict] = {}
        self.exchanges: list[Exchange] = []
        self.violations: list[str] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> StrictServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()

    def add_job(self, steps: list[dict], **definition) -> Job:
        """Queue a deployment; `steps` are 1..N (step 0, the checkout slot, is added)."""
        job = Job(
            id=f"job-{uuid.uuid4().hex[:12]}",
            token=secrets.token_urlsafe(24),
            definition={
                "os": "linux",
                "architecture": "amd64",
                "image": {"reference": "local/none"},
                "timeout": "1h0m0s",
                "env": {},
                "steps": [{"name": "checkout", "run": ""}, *steps],
                **definition,
            },
        )
        with self.lock:
            self.queue.append(job)
            self.jobs[job.id] = job
        return job

    def wait(self, job: Job, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while job.status not in ("succeeded", "failed"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{job.id} still {job.status}: {job.steps}")
            time.sleep(0.1)
        return job.status

    def routes_used(self) -> set[str]:
        with self.lock:
            used = [route_of(e.method, e.path.split("?", 1)[0]) for e in self.exchanges]
        return {f"{r.method} {r.template}" for r in used if r is not None}


class _Handler(BaseHTTPRequestHandler):
    server: StrictServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        ex = Exchange(self.command, self.path, dict(self.headers.items()), body)
        server = self.server
        found = check_request(self.command, self.path, ex.headers, body)
        with server.lock:
            server.exchanges.append(ex)
            server.violations += found
        if route_of(self.command, path) is None:
            status, answer = 404, {"error": "no such route"}
        else:
            try:
                status, answer = self._serve(path, body)
            except (ValueError, KeyError, TypeError) as exc:  # a request it cannot use
                status, answer = 400, {"error": f"bad request: {exc}"}
        data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        if status == 204:
            data = b""
        ex.status, ex.answer = status, data
        # The server's own answers must be published shapes too: it stands for the service.
        with server.lock:
            server.violations += [
                f"strict server answered badly: {p}"
                for p in check_response(self.command, path, status, data)
            ]
        self.send_response(status)
        ctype = "application/octet-stream" if isinstance(answer, bytes) else "application/json"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle  # noqa: N815 - http.server API

    def _token(self) -> str:
        return self.headers.get("Authorization", "").partition(" ")[2]

    def _job(self, job_id: str) -> Job | None:
        job = self.server.jobs.get(job_id)
        return job if job is not None and job.token == self._token() else None

    def _serve(self, path: str, body: bytes):  # noqa: C901 - one branch per route
        server = self.server
        parts = path.strip("/").split("/")
        method = self.command
        pool_ok = self._token() == server.pool_token or self._token() in server.access_tokens
        if parts[:2] == ["api", "orgs"]:
            return self._pools(parts, body)
        if path == "/api/oauth/token":
            data = json.loads(body)
            token = "pul-" + secrets.token_hex(20)
            server.access_tokens.add(token)
            return 200, {
                "access_token": token,
                "issued_token_type": data["requested_token_type"],
                "token_type": "token",
                "expires_in": 7200,
                "scope": data.get("scope", ""),
            }
        if path == "/api/deployments/executor":  # a pool token only [RE]
            return (200, EXECUTOR) if pool_ok else (401, {"error": "token"})
        if parts[:3] == ["api", "workflow", "jobs"]:
            job = self._job(parts[3])
            if job is None:
                return 401, {"error": "not this job's token"}
            if len(parts) == 4:
                return 200, job.definition
            if parts[4] == "heartbeat":
                job.heartbeats += 1
                return 200, {}
            index = int(parts[4])
            if index == 0:
                with server.lock:
                    server.violations.append(f"{method} {path}: step 0 is never run nor reported")
            if not 0 <= index < len(job.definition["steps"]):
                return 404, {"error": "no such step"}
            if parts[5] == "status":
                job.steps[index] = json.loads(body)["status"]
                return 200, {}
            data = json.loads(body)
            stored = job.logs.setdefault(index, [])
            if data["offset"] != len(stored):
                return 409, {"error": "offset", "expectedOffset": len(stored)}
            stored.extend(line["l"] for line in data["lines"])
            return 200, {"offset": len(stored)}
        if not pool_ok:
            return 403, {"error": "not a pool token"}
        if path == "/api/deployments/poll":
            with server.lock:
                job = server.queue.pop(0) if server.queue else None
            if job is None:
                return 204, None
            return 200, {
                "jobID": job.id,
                "jobToken": job.token,
                "oidcToken": "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzdHJpY3QifQ.",
                "runID": job.run_id,
                "typeSpecificID": job.deployment_id,
                "deploymentID": job.deployment_id,
            }
        if parts[:2] == ["api", "deployments"] and parts[-1] == "status":
            for job in server.jobs.values():
                if job.deployment_id == parts[2]:
                    return 200, job.status
            return 404, {"error": "no such deployment"}
        if path == "/api/background-activities/token":
            return 200, {
                "token": "worker-" + secrets.token_hex(8),
                "expiration": "2099-01-01T00:00:00Z",
            }
        if path == "/api/background-activities/configuration":
            return 200, [{"kind": "deployment", "enabled": True, "agentPools": []}]
        if path == "/api/background-activities/worker/lease/acquire":
            return 204, None
        if parts[:2] == ["api", "agent-workflows"]:
            return 200, {}
        return 404, {"error": "no such route"}

    def _pools(self, parts: list[str], body: bytes):
        server = self.server
        if self._token() != server.admin_token:
            return 403, {"error": "not an access token"}
        method = self.command
        if len(parts) == 4:
            if method == "GET":
                return 200, {"agentPools": list(server.pools.values())}
            data = json.loads(body)
            pool_id = str(uuid.uuid4())
            server.pools[pool_id] = {
                "created": int(time.time()),
                "id": pool_id,
                "name": data["name"],
                "description": data["description"],
                "lastSeen": 0,
                "status": "offline",
                "isDefault": False,
            }
            return 200, {"id": pool_id, "tokenValue": "pul-" + secrets.token_hex(20)}
        pool = server.pools.get(parts[4])
        if pool is None:
            return 404, {"error": "no such pool"}
        if method == "DELETE":
            del server.pools[parts[4]]
            return 204, None
        if method == "PATCH":
            data = json.loads(body)
            pool.update(name=data["name"], description=data["description"])
            return 200, {"name": pool["name"], "description": pool["description"]}
        keys = ("created", "id", "name", "description")
        return 200, {**{k: pool[k] for k in keys}, "agents": []}
