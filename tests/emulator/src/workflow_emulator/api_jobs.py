"""The agent's side (poll, lease, ack, deployment status, the executor) and the job's side
(definition, step status and logs, heartbeat) of the protocol."""

import secrets
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from workflow_emulator.api import Api, bearer, ok, read_body
from workflow_emulator.errors import ApiError
from workflow_emulator.store import LEASE_TYPES

WORKER_TOKEN_LIFETIME = 3600  # HappyPumi's hour [RE]

# What a broken executor route answers (POST /admin/faults {"executor": ...}): what an agent must
# refuse with one clear message rather than run.
BAD_EXECUTOR = {
    "404": (404, "application/json", b'{"error": "no executor here (injected fault)"}'),
    "json": (200, "application/json", b'{"message": "an API answer, not an executor"}'),
    "html": (200, "text/html", b"<!DOCTYPE html><html><body>Sign in</body></html>\n"),
}


class JobsApi(Api):
    async def worker_token(self, request: Request) -> Response:
        """Bootstrap, before any poll [RE]: a worker token for the background poller, which no
        route of the record is known to take, so the emulator accepts it nowhere [ASSUMED]."""
        pool = self.pool_auth(request)
        self.agent_of(request, pool, "token")
        expires = time.gmtime(self.clock.now() + WORKER_TOKEN_LIFETIME)
        return ok(
            {
                "token": "wkr-" + secrets.token_hex(16),
                "expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", expires),
            }
        )

    async def configuration(self, request: Request) -> Response:
        """Bootstrap [RE]: the body is not on the record, so any JSON object or none is taken
        (and not kept); the answer is a JSON array (activities.py)."""
        pool = self.pool_auth(request)
        await read_body(request, allow_empty=True)
        self.agent_of(request, pool, "configuration")
        return JSONResponse(self.activities.answer(pool, self.store.pools))

    async def poll(self, request: Request) -> Response:
        pool = self.pool_auth(request, status=403)  # the one error the spec lists for the poll
        agent = self.agent_of(request, pool, "poll")
        claimed = self.store.claim(pool, ("deployment",), agent)
        if claimed is None:
            return Response(status_code=204)
        return ok(self.store.claim_body(*claimed))

    async def lease_acquire(self, request: Request) -> Response:
        pool = self.pool_auth(request)
        body = await read_body(request, allow_empty=True)
        kinds = body.get("kinds", list(LEASE_TYPES))
        if (
            not isinstance(kinds, list)
            or not kinds
            or not all(isinstance(k, str) and k in LEASE_TYPES for k in kinds)
        ):
            raise ApiError(400, f"kinds must be a non-empty list of {', '.join(LEASE_TYPES)}")
        agent = self.agent_of(request, pool, "lease")
        claimed = self.store.claim(pool, tuple(dict.fromkeys(kinds)), agent)
        if claimed is None:
            return Response(status_code=204)
        return ok(self.store.claim_body(*claimed))

    async def ack(self, request: Request) -> Response:
        pool = self.pool_auth(request)
        self.agent_of(request, pool, "ack")
        self.store.ack(pool, await read_body(request))
        return ok()

    async def deployment_status(self, request: Request) -> Response:
        pool = self.pool_auth(request)
        self.agent_of(request, pool, "status")
        return ok(self.store.deployment_status(pool, request.path_params["deployment_id"]))

    async def job_definition(self, request: Request) -> Response:
        job = self.job_auth(request)
        base = str(request.base_url).rstrip("/")
        return ok(self.store.definition(job, bearer(request), base))

    async def fetch_executor(self, request: Request) -> Response:
        """The pool token only, as in HappyPumi's AgentPoolTokenMiddleware [RE]: the agent
        fetches it (and caches it by ETag), not the job."""
        try:
            pool = self.pool_auth(request, status=403)
        except ApiError as err:
            message = f"{err.message}: the executor is served to agent pools only"
            raise ApiError(403, message) from None
        self.agent_of(request, pool, "executor")
        fault = self.faults.settings["executor"]
        if fault:
            status, ctype, body = BAD_EXECUTOR[fault]
            return Response(body, status_code=status, media_type=ctype)
        ex = self.executor
        headers = {"etag": ex.etag}
        if ex.not_modified(request.headers.get("if-none-match")):
            ex.fetches["304"] += 1
            return Response(status_code=304, headers=headers)
        ex.fetches["200"] += 1
        return Response(ex.content, media_type="application/octet-stream", headers=headers)

    async def step_status(self, request: Request) -> Response:
        job = self.job_auth(request)
        self.store.step_status(job, request.path_params["step"], await read_body(request))
        return ok()

    async def step_logs(self, request: Request) -> Response:
        job = self.job_auth(request)
        offset = self.store.append_logs(job, request.path_params["step"], await read_body(request))
        return ok({"offset": offset})

    async def heartbeat(self, request: Request) -> Response:
        job = self.job_auth(request)
        await read_body(request, allow_empty=True)
        self.store.heartbeat(job)
        return ok()

    def routes(self) -> list[Route]:
        return [
            Route("/api/background-activities/token", self.worker_token, methods=["GET"]),
            Route("/api/background-activities/configuration", self.configuration, methods=["POST"]),
            Route("/api/deployments/poll", self.poll, methods=["GET"]),
            Route("/api/agent-workflows/deployment", self.ack, methods=["POST"]),
            Route("/api/deployments/executor", self.fetch_executor, methods=["GET"]),
            Route(
                "/api/deployments/{deployment_id}/status", self.deployment_status, methods=["GET"]
            ),
            Route(
                "/api/background-activities/worker/lease/acquire",
                self.lease_acquire,
                methods=["POST"],
            ),
            Route("/api/workflow/jobs/{job_id}", self.job_definition, methods=["GET"]),
            Route("/api/workflow/jobs/{job_id}/heartbeat", self.heartbeat, methods=["POST"]),
            Route("/api/workflow/jobs/{job_id}/{step}/status", self.step_status, methods=["PATCH"]),
            Route("/api/workflow/jobs/{job_id}/{step}/logs", self.step_logs, methods=["POST"]),
        ]
