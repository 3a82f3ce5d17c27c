"""The pool REST API of an organization (agent pools and their agents)."""

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from workflow_emulator.api import Api, ok, read_body
from workflow_emulator.errors import ApiError
from workflow_emulator.store import unix


class PoolsApi(Api):
    # Shapes: AgentPool, AgentPoolDetail, DeploymentAgentMetadata, ListAgentPoolsResponse,
    # CreateAccessTokenResponse, PatchOrgAgentPoolResponse [SPEC], nothing more; times are
    # integer Unix seconds. tests/conformance holds the schemas and checks every answer.
    def pool_summary(self, pool: dict) -> dict:
        agents = self.store.list_agents(pool=pool, online_within=None)
        summary = {
            "created": unix(pool["created"]),
            "id": pool["id"],
            "name": pool["name"],
            "description": pool["description"],
            "lastSeen": unix(max((a["last_seen"] for a in agents), default=None)),
            "status": "online" if any(self.store.agent_online(a) for a in agents) else "offline",
            "isDefault": pool["is_default"],
        }
        if pool["last_claim"] is not None:  # an int64 that is absent, not null, before any
            summary["lastDeployment"] = unix(pool["last_claim"])
        return summary

    def pool_detail(self, pool: dict) -> dict:
        agents = [
            {
                "version": a["version"],
                "platform": a["platform"],
                "hostname": a["hostname"] or "",
                "ip": a["ip"],
                "pid": a["pid"] or "",
                "lastSeen": unix(a["last_seen"]),
                "status": "online" if self.store.agent_online(a) else "offline",
            }
            for a in self.store.list_agents(pool=pool, online_within=None)
        ]
        return {
            "created": unix(pool["created"]),
            "id": pool["id"],
            "name": pool["name"],
            "description": pool["description"],
            "agents": agents,
        }

    async def pool_request(self, request: Request) -> dict:
        """A CreateOrgAgentPoolRequest: `name` and `description` are both required [SPEC]."""
        body = await read_body(request)
        missing = [k for k in ("name", "description") if k not in body]
        if missing:
            raise ApiError(400, f"{' and '.join(missing)} required (CreateOrgAgentPoolRequest)")
        unknown = sorted(set(body) - {"name", "description"})
        if unknown:
            raise ApiError(400, f"unknown field(s): {', '.join(unknown)}")
        return body

    async def org_pools(self, request: Request) -> Response:
        org = self.org_auth(request)
        pools = [p for p in self.store.pools.values() if p["org"] == org]
        if request.method == "POST":
            body = await self.pool_request(request)
            pool, token = self.store.create_pool(org, body["name"], body["description"])
            return ok({"id": pool["id"], "tokenValue": token})
        out: dict = {
            "agentPools": [self.pool_summary(p) for p in sorted(pools, key=lambda p: p["name"])]
        }
        default = [p["id"] for p in pools if p["is_default"]]
        if default:
            out["defaultAgentPoolID"] = default[0]
        return ok(out)

    async def org_pool(self, request: Request) -> Response:
        org = self.org_auth(request)
        pool = self.store.pools.get(request.path_params["pool_id"])
        if pool is None or pool["org"] != org:
            raise ApiError(404, f"no pool {request.path_params['pool_id']!r} in organization {org}")
        if request.method == "PATCH":
            self.store.update_pool(pool, await self.pool_request(request))
            return ok({"name": pool["name"], "description": pool["description"]})
        if request.method == "DELETE":
            force = request.query_params.get("force", "false").lower()
            if force not in ("true", "false", "1", "0"):
                raise ApiError(400, "force must be true or false")
            self.store.delete_pool(pool, force=force in ("true", "1"))
            return Response(status_code=204)
        return ok(self.pool_detail(pool))

    def routes(self) -> list[Route]:
        return [
            Route("/api/orgs/{org}/agent-pools", self.org_pools, methods=["GET", "POST"]),
            Route(
                "/api/orgs/{org}/agent-pools/{pool_id}",
                self.org_pool,
                methods=["GET", "PATCH", "DELETE"],
            ),
        ]
