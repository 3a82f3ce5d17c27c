"""Routes: the agent side, the job side, OIDC, the pool REST API and the admin API.

Every handler is `async` so that it runs on the event-loop thread, where the store's methods
are atomic (see store.py). Bad input of any kind becomes an `ApiError`: a 4xx with a JSON body.
"""

import asyncio
import contextlib
import dataclasses
import hmac
import json
import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from workflow_emulator import oidc
from workflow_emulator.db import Db
from workflow_emulator.edge import Edge
from workflow_emulator.errors import ApiError
from workflow_emulator.faults import Faults
from workflow_emulator.metrics import Metrics
from workflow_emulator.store import (
    JOB_STATUSES,
    JOB_TYPES,
    LEASE_TYPES,
    Clock,
    Store,
    check_org,
    unix,
)

MAX_BODY = 8 * 1024 * 1024
# What GET /api/deployments/executor serves: a stand-in for the "Linux/AMD64 Pulumi Deployments
# executor binary" [SPEC]. A job that downloads and runs it, as a deployment's runner does,
# proves the route and the job's way back to the service.
EXECUTOR = (
    b"#!/bin/sh\n"
    b"# workflow-emulator: stand-in for the Pulumi Deployments executor\n"
    b'echo "pulumi deployments executor (workflow-emulator stand-in): $*"\n'
)
log = logging.getLogger("workflow_emulator")


@dataclasses.dataclass
class Settings:
    admin_token: str
    seed_token: str | None = None
    heartbeat_timeout: float = 600.0
    online_window: float = 60.0
    org: str = "default"
    state_file: str | None = None
    default_image: str = "local/debian12-plain:latest"
    access_log: object = None  # a text stream for the JSON access log, or None


def ok(body: object = None, status: int = 200) -> JSONResponse:
    return JSONResponse({} if body is None else body, status_code=status)


async def read_raw(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise ApiError(413, f"request body is larger than {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_body(request: Request, *, allow_empty: bool = False) -> dict:
    """The request body as a JSON object, whatever its Content-Type (the runner sends none)."""
    raw = await read_raw(request)
    if not raw.strip():
        if allow_empty:
            return {}
        raise ApiError(400, "request body must be a JSON object")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object")
    return data


def bearer(request: Request) -> str:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() not in ("token", "bearer") or not value.strip():
        raise ApiError(401, "missing or malformed Authorization header (expected: token <token>)")
    return value.strip()


def _query_number(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ApiError(400, f"query parameter {name} must be a number of seconds") from None
    if not 0 <= value < 1e9:
        raise ApiError(400, f"query parameter {name} must be a non-negative number")
    return value


def create_app(settings: Settings) -> Edge:
    clock = Clock()
    db = Db(settings.state_file)
    store = Store(
        db,
        clock,
        heartbeat_timeout=settings.heartbeat_timeout,
        online_window=settings.online_window,
        org=settings.org,
        default_image=settings.default_image,
    )
    seed_pool = store.seed(settings.seed_token) if settings.seed_token else None
    faults = Faults()
    metrics = Metrics(store)
    store.on_claim = metrics.claimed

    # ------------------------------------------------------------------ auth helpers
    def pool_auth(request: Request, status: int = 401) -> dict:
        try:
            pool = store.pool_for_token(bearer(request))
        except ApiError as err:
            raise ApiError(status, err.message) from None
        if pool is None:
            raise ApiError(status, "the token is not a valid pool token")
        return pool

    def agent_of(request: Request, pool: dict) -> dict:
        h = request.headers
        ident = {"ip": request.client.host if request.client else ""}
        for header, key in (
            ("x-agent-hostname", "hostname"),
            ("x-agent-pid", "pid"),
            ("x-agent-instance", "instance"),
            ("user-agent", "user_agent"),
        ):
            value = h.get(header, "").strip()
            if len(value) > 255 or not value.isprintable():
                raise ApiError(400, f"header {header} must be printable and at most 255 characters")
            ident[key] = value
        if ident["pid"] and not ident["pid"].isdigit():
            raise ApiError(400, "header x-agent-pid must be a decimal number")
        if "/" in ident["hostname"]:
            raise ApiError(400, "header x-agent-hostname must not contain '/'")
        agent = store.see_agent(pool, ident)
        request.scope["emulator"]["agent"] = agent["id"]
        return agent

    def job_auth(request: Request) -> dict:
        return store.job_for_token(request.path_params["job_id"], bearer(request))

    def admin_auth(request: Request) -> None:
        if not hmac.compare_digest(bearer(request).encode(), settings.admin_token.encode()):
            raise ApiError(401, "the token is not the admin token")

    def org_auth(request: Request) -> str:
        org = check_org(request.path_params["org"])
        token = bearer(request)
        if hmac.compare_digest(token.encode(), settings.admin_token.encode()):
            return org
        tok = store.org_token(token)
        if tok is None:
            raise ApiError(401, "the token is not a valid access token")
        if tok["org"] not in ("*", org):
            raise ApiError(403, f"the access token is not valid for organization {org}")
        return org

    # ------------------------------------------------------------------ agent side
    async def poll(request: Request) -> Response:
        pool = pool_auth(request, status=403)  # the one error the spec lists for the poll
        agent = agent_of(request, pool)
        claimed = store.claim(pool, ("deployment",), agent)
        if claimed is None:
            return Response(status_code=204)
        return ok(store.claim_body(*claimed))

    async def lease_acquire(request: Request) -> Response:
        pool = pool_auth(request)
        body = await read_body(request, allow_empty=True)
        kinds = body.get("kinds", list(LEASE_TYPES))
        if (
            not isinstance(kinds, list)
            or not kinds
            or not all(isinstance(k, str) and k in LEASE_TYPES for k in kinds)
        ):
            raise ApiError(400, f"kinds must be a non-empty list of {', '.join(LEASE_TYPES)}")
        agent = agent_of(request, pool)
        claimed = store.claim(pool, tuple(dict.fromkeys(kinds)), agent)
        if claimed is None:
            return Response(status_code=204)
        return ok(store.claim_body(*claimed))

    async def ack(request: Request) -> Response:
        pool = pool_auth(request)
        agent_of(request, pool)
        store.ack(pool, await read_body(request))
        return ok()

    async def deployment_status(request: Request) -> Response:
        pool = pool_auth(request)
        agent_of(request, pool)
        return ok(store.deployment_status(pool, request.path_params["deployment_id"]))

    # ------------------------------------------------------------------ job side
    async def job_definition(request: Request) -> Response:
        job = job_auth(request)
        base = str(request.base_url).rstrip("/")
        return ok(store.definition(job, bearer(request), base))

    async def executor(request: Request) -> Response:
        store.job_holding(bearer(request))
        return Response(EXECUTOR, media_type="application/octet-stream")

    async def step_status(request: Request) -> Response:
        job = job_auth(request)
        store.step_status(job, request.path_params["step"], await read_body(request))
        return ok()

    async def step_logs(request: Request) -> Response:
        job = job_auth(request)
        offset = store.append_logs(job, request.path_params["step"], await read_body(request))
        return ok({"offset": offset})

    async def heartbeat(request: Request) -> Response:
        job = job_auth(request)
        await read_body(request, allow_empty=True)
        store.heartbeat(job)
        return ok()

    # ------------------------------------------------------------------ OIDC token exchange
    async def token_exchange(request: Request) -> Response:
        body = await read_body(request)  # JSON, the only request body the spec declares
        form = {k: v if isinstance(v, str) else str(v) for k, v in body.items() if v is not None}
        expect = {
            "grant_type": oidc.GRANT_TYPE,
            "subject_token_type": oidc.ID_TOKEN_TYPE,
            "requested_token_type": oidc.RUNNER_TOKEN_TYPE,
        }
        for field, want in expect.items():
            if form.get(field) != want:
                raise ApiError(400, f"{field} must be {want}")
        audience = form.get("audience", "")
        if not audience.startswith(oidc.ORG_AUDIENCE_PREFIX):
            raise ApiError(400, f"audience must be {oidc.ORG_AUDIENCE_PREFIX}<organization>")
        org = check_org(audience[len(oidc.ORG_AUDIENCE_PREFIX) :])
        scope = form.get("scope", "")
        if not scope.startswith("runner:"):
            raise ApiError(400, "scope must be runner:<runner pool id>")
        try:
            pool = store.find_pool(scope[len("runner:") :], org)
        except ApiError as err:
            raise ApiError(400, f"scope: {err.message}") from None
        expires_in = 7200
        if form.get("expiration") not in (None, ""):
            try:
                expires_in = int(form["expiration"])
            except (TypeError, ValueError):
                raise ApiError(400, "expiration must be a whole number of seconds") from None
            if expires_in <= 0:
                raise ApiError(400, "expiration must be positive")
            expires_in = min(expires_in, 25 * 3600)  # the issuer's maximum lifetime
        subject = form.get("subject_token")
        if not subject:
            raise ApiError(400, "subject_token is required")
        oidc.verify(store.issuer_key, subject, audience=audience, now=clock.now())
        token = store.add_access_token(
            "runner", pool_id=pool["id"], expires=clock.now() + expires_in
        )
        return ok(
            {
                "access_token": token,
                "issued_token_type": oidc.RUNNER_TOKEN_TYPE,
                "token_type": "token",
                "expires_in": expires_in,
                "scope": scope,
            }
        )

    # ------------------------------------------------------------------ pool REST API
    # Shapes: AgentPool, AgentPoolDetail, DeploymentAgentMetadata, ListAgentPoolsResponse,
    # CreateAccessTokenResponse, PatchOrgAgentPoolResponse [SPEC], nothing more; times are
    # integer Unix seconds. tests/conformance holds the schemas and checks every answer.
    def pool_summary(pool: dict) -> dict:
        agents = store.list_agents(pool=pool, online_within=None)
        summary = {
            "created": unix(pool["created"]),
            "id": pool["id"],
            "name": pool["name"],
            "description": pool["description"],
            "lastSeen": unix(max((a["last_seen"] for a in agents), default=None)),
            "status": "online" if any(store.agent_online(a) for a in agents) else "offline",
            "isDefault": pool["is_default"],
        }
        if pool["last_claim"] is not None:  # an int64 that is absent, not null, before any
            summary["lastDeployment"] = unix(pool["last_claim"])
        return summary

    def pool_detail(pool: dict) -> dict:
        agents = [
            {
                "version": a["version"],
                "platform": a["platform"],
                "hostname": a["hostname"] or "",
                "ip": a["ip"],
                "pid": a["pid"] or "",
                "lastSeen": unix(a["last_seen"]),
                "status": "online" if store.agent_online(a) else "offline",
            }
            for a in store.list_agents(pool=pool, online_within=None)
        ]
        return {
            "created": unix(pool["created"]),
            "id": pool["id"],
            "name": pool["name"],
            "description": pool["description"],
            "agents": agents,
        }

    async def pool_request(request: Request) -> dict:
        """A CreateOrgAgentPoolRequest: `name` and `description` are both required [SPEC]."""
        body = await read_body(request)
        missing = [k for k in ("name", "description") if k not in body]
        if missing:
            raise ApiError(400, f"{' and '.join(missing)} required (CreateOrgAgentPoolRequest)")
        unknown = sorted(set(body) - {"name", "description"})
        if unknown:
            raise ApiError(400, f"unknown field(s): {', '.join(unknown)}")
        return body

    async def org_pools(request: Request) -> Response:
        org = org_auth(request)
        pools = [p for p in store.pools.values() if p["org"] == org]
        if request.method == "POST":
            body = await pool_request(request)
            pool, token = store.create_pool(org, body["name"], body["description"])
            return ok({"id": pool["id"], "tokenValue": token})
        out: dict = {
            "agentPools": [pool_summary(p) for p in sorted(pools, key=lambda p: p["name"])]
        }
        default = [p["id"] for p in pools if p["is_default"]]
        if default:
            out["defaultAgentPoolID"] = default[0]
        return ok(out)

    async def org_pool(request: Request) -> Response:
        org = org_auth(request)
        pool = store.pools.get(request.path_params["pool_id"])
        if pool is None or pool["org"] != org:
            raise ApiError(404, f"no pool {request.path_params['pool_id']!r} in organization {org}")
        if request.method == "PATCH":
            store.update_pool(pool, await pool_request(request))
            return ok({"name": pool["name"], "description": pool["description"]})
        if request.method == "DELETE":
            force = request.query_params.get("force", "false").lower()
            if force not in ("true", "false", "1", "0"):
                raise ApiError(400, "force must be true or false")
            store.delete_pool(pool, force=force in ("true", "1"))
            return Response(status_code=204)
        return ok(pool_detail(pool))

    # ------------------------------------------------------------------ admin API
    def admin_pool_view(pool: dict) -> dict:
        online = store.list_agents(pool=pool, online_within=store.online_window)
        return {
            "id": pool["id"],
            "name": pool["name"],
            "org": pool["org"],
            "description": pool["description"],
            "stacks": pool["stacks"],
            "created": pool["created"],
            "is_default": pool["is_default"],
            "agents_online": len(online),
        }

    async def admin_jobs(request: Request) -> Response:
        admin_auth(request)
        if request.method == "POST":
            jobs = store.create_jobs(await read_body(request))
            return ok({"id": jobs[0]["id"], "ids": [j["id"] for j in jobs]}, 201)
        q = request.query_params
        statuses = None
        if q.get("status"):
            statuses = set(q["status"].split(","))
            bad = sorted(statuses - set(JOB_STATUSES))
            if bad:
                raise ApiError(
                    400, f"unknown status {', '.join(bad)} (one of {', '.join(JOB_STATUSES)})"
                )
        kind = q.get("type") or None
        if kind is not None and kind not in JOB_TYPES:
            raise ApiError(400, f"type must be one of {', '.join(JOB_TYPES)}")
        pool = store.find_pool(q["pool"]) if q.get("pool") else None
        jobs = store.list_jobs(statuses=statuses, pool=pool, kind=kind)
        return ok({"jobs": [store.job_view(j) for j in jobs]})

    def admin_job_of(request: Request) -> dict:
        job = store.jobs.get(request.path_params["job_id"])
        if job is None:
            raise ApiError(404, f"no job {request.path_params['job_id']!r}")
        return job

    async def admin_job(request: Request) -> Response:
        admin_auth(request)
        return ok(store.job_view(admin_job_of(request)))

    async def admin_cancel(request: Request) -> Response:
        admin_auth(request)
        job = admin_job_of(request)
        body = await read_body(request, allow_empty=True)
        reason = body.get("reason", "canceled by the admin API")
        if not isinstance(reason, str):
            raise ApiError(400, "reason must be a string")
        store.cancel(job, reason, body.get("status", "canceled"))
        return ok(store.job_view(job))

    async def admin_agents(request: Request) -> Response:
        admin_auth(request)
        pool = (
            store.find_pool(request.query_params["pool"])
            if request.query_params.get("pool")
            else None
        )
        within = _query_number(request, "online_within")
        agents = store.list_agents(pool=pool, online_within=within)
        return ok(
            {
                "agents": [
                    {
                        "id": a["id"],
                        "pool": store.pools[a["pool_id"]]["name"]
                        if a["pool_id"] in store.pools
                        else None,
                        "pool_id": a["pool_id"],
                        "hostname": a["hostname"],
                        "instance": a["instance"],
                        "pid": a["pid"],
                        "ip": a["ip"],
                        "user_agent": a["user_agent"],
                        "version": a["version"],
                        "platform": a["platform"],
                        "first_seen": a["first_seen"],
                        "last_seen": a["last_seen"],
                        "online": store.agent_online(a),
                        "claims": a["claims"],
                    }
                    for a in agents
                ]
            }
        )

    async def admin_faults(request: Request) -> Response:
        admin_auth(request)
        if request.method == "POST":
            faults.configure(await read_body(request, allow_empty=True))
        return ok(faults.view())

    async def admin_reset(request: Request) -> Response:
        admin_auth(request)
        body = await read_body(request, allow_empty=True)
        pools = body.get("pools", False)
        if not isinstance(pools, bool):
            raise ApiError(400, "pools must be true or false")
        store.reset(pools=pools, keep_pool=seed_pool["id"] if seed_pool else None)
        faults.configure({})
        return ok()

    async def admin_pools(request: Request) -> Response:
        admin_auth(request)
        if request.method == "POST":
            body = await read_body(request)
            unknown = sorted(set(body) - {"name", "org", "description", "token"})
            if unknown:
                raise ApiError(400, f"unknown field(s): {', '.join(unknown)}")
            token = body.get("token")
            if token is not None and (
                not isinstance(token, str) or not token.startswith("pul-") or len(token) < 12
            ):
                raise ApiError(400, "token must be a string starting with pul- (at least 12 chars)")
            pool, token = store.create_pool(
                body.get("org", settings.org), body.get("name"), body.get("description", ""), token
            )
            return ok({**admin_pool_view(pool), "token": token}, 201)
        return ok({"pools": [admin_pool_view(p) for p in store.pools.values()]})

    async def admin_pool(request: Request) -> Response:
        admin_auth(request)
        pool = store.find_pool(request.path_params["pool"])
        if request.method == "PATCH":
            body = await read_body(request)
            unknown = sorted(set(body) - {"name", "description", "stacks"})
            if unknown:
                raise ApiError(400, f"unknown field(s): {', '.join(unknown)}")
            store.update_pool(pool, body)
        return ok(admin_pool_view(pool))

    async def admin_mint(request: Request) -> Response:
        admin_auth(request)
        body = await read_body(request, allow_empty=True)
        org = check_org(body.get("org", settings.org))
        audience = body.get("audience", oidc.ORG_AUDIENCE_PREFIX + org)
        subject = body.get("subject", "system:serviceaccount:workflow-agent:agent")
        expires_in = body.get("expires_in", 3600)
        extra = body.get("claims", {})
        if not isinstance(audience, str) or not isinstance(subject, str) or not subject:
            raise ApiError(400, "audience and subject must be strings")
        if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
            raise ApiError(
                400, "expires_in must be a number of seconds (negative: already expired)"
            )
        if not isinstance(extra, dict):
            raise ApiError(400, "claims must be an object")
        token = oidc.mint(
            store.issuer_key,
            audience=audience,
            subject=subject,
            now=clock.now(),
            expires_in=expires_in,
            extra=extra,
        )
        return ok({"token": token, "issuer": oidc.ISSUER, "audience": audience})

    async def admin_access_token(request: Request) -> Response:
        admin_auth(request)
        body = await read_body(request, allow_empty=True)
        org = body.get("org", "*")
        if org != "*":
            check_org(org)
        return ok({"token": store.add_access_token("org", org=org), "org": org}, 201)

    async def admin_clock(request: Request) -> Response:
        admin_auth(request)
        if request.method == "POST":
            body = await read_body(request)
            advance = body.get("advance")
            if (
                isinstance(advance, bool)
                or not isinstance(advance, int | float)
                or not 0 <= advance <= 1e8
            ):
                raise ApiError(400, "advance must be a non-negative number of seconds")
            store.advance(float(advance))
        return ok({"now": clock.now(), "offset": clock.offset})

    async def admin_stats(request: Request) -> Response:
        admin_auth(request)
        return ok({**store.stats(), "faults": faults.view()})

    async def healthz(request: Request) -> Response:
        return ok({"status": "ok"})

    async def metrics_route(request: Request) -> Response:
        body, ctype = metrics.render()
        return Response(body, media_type=ctype)

    routes = [
        Route("/api/deployments/poll", poll, methods=["GET"]),
        Route("/api/agent-workflows/deployment", ack, methods=["POST"]),
        Route("/api/deployments/executor", executor, methods=["GET"]),
        Route("/api/deployments/{deployment_id}/status", deployment_status, methods=["GET"]),
        Route("/api/background-activities/worker/lease/acquire", lease_acquire, methods=["POST"]),
        Route("/api/workflow/jobs/{job_id}", job_definition, methods=["GET"]),
        Route("/api/workflow/jobs/{job_id}/heartbeat", heartbeat, methods=["POST"]),
        Route("/api/workflow/jobs/{job_id}/{step}/status", step_status, methods=["PATCH"]),
        Route("/api/workflow/jobs/{job_id}/{step}/logs", step_logs, methods=["POST"]),
        Route("/api/oauth/token", token_exchange, methods=["POST"]),
        Route("/api/orgs/{org}/agent-pools", org_pools, methods=["GET", "POST"]),
        Route(
            "/api/orgs/{org}/agent-pools/{pool_id}", org_pool, methods=["GET", "PATCH", "DELETE"]
        ),
        Route("/admin/jobs", admin_jobs, methods=["GET", "POST"]),
        Route("/admin/jobs/{job_id}", admin_job, methods=["GET"]),
        Route("/admin/jobs/{job_id}/cancel", admin_cancel, methods=["POST"]),
        Route("/admin/agents", admin_agents, methods=["GET"]),
        Route("/admin/faults", admin_faults, methods=["GET", "POST"]),
        Route("/admin/reset", admin_reset, methods=["POST"]),
        Route("/admin/pools", admin_pools, methods=["GET", "POST"]),
        Route("/admin/pools/{pool}", admin_pool, methods=["GET", "PATCH"]),
        Route("/admin/oidc/mint", admin_mint, methods=["POST"]),
        Route("/admin/access-tokens", admin_access_token, methods=["POST"]),
        Route("/admin/clock", admin_clock, methods=["GET", "POST"]),
        Route("/admin/stats", admin_stats, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_route, methods=["GET"]),
    ]

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return JSONResponse(exc.body(), status_code=exc.status)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse({"error": "internal error (a bug in the emulator)"}, status_code=500)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        async def sweeper() -> None:
            tick = min(1.0, max(0.05, settings.heartbeat_timeout / 10))
            while True:
                await asyncio.sleep(tick)
                store.sweep()

        task = asyncio.create_task(sweeper())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            db.close()

    inner = Starlette(
        routes=routes,
        exception_handlers={
            ApiError: api_error,
            HTTPException: http_error,
            Exception: server_error,
        },
        lifespan=lifespan,
    )
    inner.router.redirect_slashes = False  # a stray slash is a client bug: 404, not a redirect
    return Edge(
        inner,
        store=store,
        faults=faults,
        metrics=metrics,
        routes=routes,
        access_log=settings.access_log,
    )
