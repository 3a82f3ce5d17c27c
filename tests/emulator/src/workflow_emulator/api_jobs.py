"""The agent's side (poll, lease, ack, deployment status) and the job's side (definition,
executor, step status and logs, heartbeat) of the protocol."""

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from workflow_emulator.api import Api, bearer, ok, read_body
from workflow_emulator.errors import ApiError
from workflow_emulator.store import LEASE_TYPES

# What GET /api/deployments/executor serves: a stand-in for the "Linux/AMD64 Pulumi Deployments
# executor binary" [SPEC]. A job that downloads and runs it, as a deployment's runner does,
# proves the route and the job's way back to the service.
EXECUTOR = (
    b"#!/bin/sh\n"
    b"# workflow-emulator: stand-in for the Pulumi Deployments executor\n"
    b'echo "pulumi deployments executor (workflow-emulator stand-in): $*"\n'
)


class JobsApi(Api):
    async def poll(self, request: Request) -> Response:
        pool = self.pool_auth(request, status=403)  # the one error the spec lists for the poll
        agent = self.agent_of(request, pool)
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
        agent = self.agent_of(request, pool)
        claimed = self.store.claim(pool, tuple(dict.fromkeys(kinds)), agent)
        if claimed is None:
            return Response(status_code=204)
        return ok(self.store.claim_body(*claimed))

    async def ack(self, request: Request) -> Response:
        pool = self.pool_auth(request)
        self.agent_of(request, pool)
        self.store.ack(pool, await read_body(request))
        return ok()

    async def deployment_status(self, request: Request) -> Response:
        pool = self.pool_auth(request)
        self.agent_of(request, pool)
        return ok(self.store.deployment_status(pool, request.path_params["deployment_id"]))

    async def job_definition(self, request: Request) -> Response:
        job = self.job_auth(request)
        base = str(request.base_url).rstrip("/")
        return ok(self.store.definition(job, bearer(request), base))

    async def executor(self, request: Request) -> Response:
        self.store.job_holding(bearer(request))
        return Response(EXECUTOR, media_type="application/octet-stream")

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
            Route("/api/deployments/poll", self.poll, methods=["GET"]),
            Route("/api/agent-workflows/deployment", self.ack, methods=["POST"]),
            Route("/api/deployments/executor", self.executor, methods=["GET"]),
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
