"""The admin API: what tests drive the emulator with (jobs, agents, faults, pools, tokens,
the clock, stats)."""

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from workflow_emulator import oidc
from workflow_emulator.api import Api, ok, query_number, read_body, read_raw
from workflow_emulator.api_backend import TAR
from workflow_emulator.errors import ApiError
from workflow_emulator.store import JOB_STATUSES, JOB_TYPES, check_org


class AdminApi(Api):
    def admin_pool_view(self, pool: dict) -> dict:
        online = self.store.list_agents(pool=pool, online_within=self.store.online_window)
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

    async def admin_jobs(self, request: Request) -> Response:
        self.admin_auth(request)
        if request.method == "POST":
            jobs = self.store.create_jobs(await read_body(request))
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
        pool = self.store.find_pool(q["pool"]) if q.get("pool") else None
        jobs = self.store.list_jobs(statuses=statuses, pool=pool, kind=kind)
        return ok({"jobs": [self.store.job_view(j) for j in jobs]})

    async def admin_deployments(self, request: Request) -> Response:
        """A deployment job shaped like the service's (deployments.py)."""
        self.admin_auth(request)
        job = self.store.create_deployment(await read_body(request))
        return ok({"id": job["id"], "deploymentID": job["deployment_id"]}, 201)

    def admin_job_of(self, request: Request) -> dict:
        job = self.store.jobs.get(request.path_params["job_id"])
        if job is None:
            raise ApiError(404, f"no job {request.path_params['job_id']!r}")
        return job

    async def admin_job(self, request: Request) -> Response:
        self.admin_auth(request)
        return ok(self.store.job_view(self.admin_job_of(request)))

    async def admin_cancel(self, request: Request) -> Response:
        self.admin_auth(request)
        job = self.admin_job_of(request)
        body = await read_body(request, allow_empty=True)
        reason = body.get("reason", "canceled by the admin API")
        if not isinstance(reason, str):
            raise ApiError(400, "reason must be a string")
        self.store.cancel(job, reason, body.get("status", "canceled"))
        return ok(self.store.job_view(job))

    async def admin_agents(self, request: Request) -> Response:
        self.admin_auth(request)
        pool = (
            self.store.find_pool(request.query_params["pool"])
            if request.query_params.get("pool")
            else None
        )
        within = query_number(request, "online_within")
        agents = self.store.list_agents(pool=pool, online_within=within)
        return ok(
            {
                "agents": [
                    {
                        "id": a["id"],
                        "pool": self.store.pools[a["pool_id"]]["name"]
                        if a["pool_id"] in self.store.pools
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
                        "online": self.store.agent_online(a),
                        "claims": a["claims"],
                        "calls": a.get("calls", {}),
                        "first_calls": a.get("first_calls", []),
                    }
                    for a in agents
                ]
            }
        )

    async def admin_faults(self, request: Request) -> Response:
        self.admin_auth(request)
        if request.method == "POST":
            self.faults.configure(await read_body(request, allow_empty=True))
        return ok(self.faults.view())

    async def admin_reset(self, request: Request) -> Response:
        self.admin_auth(request)
        body = await read_body(request, allow_empty=True)
        pools = body.get("pools", False)
        if not isinstance(pools, bool):
            raise ApiError(400, "pools must be true or false")
        self.store.reset(pools=pools, keep_pool=self.seed_pool["id"] if self.seed_pool else None)
        self.faults.configure({})
        self.executor.reset()
        self.activities.configure({}, self.store.find_pool)
        return ok()

    async def admin_activities(self, request: Request) -> Response:
        """What POST /api/background-activities/configuration answers (activities.py)."""
        self.admin_auth(request)
        if request.method == "POST":
            body = await read_body(request, allow_empty=True)
            self.activities.configure(body, self.store.find_pool)
        return ok(self.activities.view())

    async def admin_backend(self, request: Request) -> Response:
        """An organization's Pulumi state as a tar, to read from outside any job (e.g. with
        `pulumi stack output` after `pulumi login file://...`)."""
        self.admin_auth(request)
        org = check_org(request.path_params["org"])
        return Response(self.store.backend_tar(org), media_type=TAR)

    async def admin_executor(self, request: Request) -> Response:
        """GET: the served executor's ETag and fetch counts; POST: replace it with the raw body
        (an empty body restores the shipped stand-in), so a test can change the service's copy."""
        self.admin_auth(request)
        if request.method == "POST":
            raw = await read_raw(request)
            self.executor.replace(raw or None)
        return ok(self.executor.view())

    async def admin_pools(self, request: Request) -> Response:
        self.admin_auth(request)
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
            pool, token = self.store.create_pool(
                body.get("org", self.settings.org),
                body.get("name"),
                body.get("description", ""),
                token,
            )
            return ok({**self.admin_pool_view(pool), "token": token}, 201)
        return ok({"pools": [self.admin_pool_view(p) for p in self.store.pools.values()]})

    async def admin_pool(self, request: Request) -> Response:
        self.admin_auth(request)
        pool = self.store.find_pool(request.path_params["pool"])
        if request.method == "PATCH":
            body = await read_body(request)
            unknown = sorted(set(body) - {"name", "description", "stacks"})
            if unknown:
                raise ApiError(400, f"unknown field(s): {', '.join(unknown)}")
            self.store.update_pool(pool, body)
        return ok(self.admin_pool_view(pool))

    async def admin_mint(self, request: Request) -> Response:
        self.admin_auth(request)
        body = await read_body(request, allow_empty=True)
        org = check_org(body.get("org", self.settings.org))
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
            self.store.issuer_key,
            audience=audience,
            subject=subject,
            now=self.clock.now(),
            expires_in=expires_in,
            extra=extra,
        )
        return ok({"token": token, "issuer": oidc.ISSUER, "audience": audience})

    async def admin_access_token(self, request: Request) -> Response:
        self.admin_auth(request)
        body = await read_body(request, allow_empty=True)
        org = body.get("org", "*")
        if org != "*":
            check_org(org)
        return ok({"token": self.store.add_access_token("org", org=org), "org": org}, 201)

    async def admin_clock(self, request: Request) -> Response:
        self.admin_auth(request)
        if request.method == "POST":
            body = await read_body(request)
            advance = body.get("advance")
            if (
                isinstance(advance, bool)
                or not isinstance(advance, int | float)
                or not 0 <= advance <= 1e8
            ):
                raise ApiError(400, "advance must be a non-negative number of seconds")
            self.store.advance(float(advance))
        return ok({"now": self.clock.now(), "offset": self.clock.offset})

    async def admin_stats(self, request: Request) -> Response:
        self.admin_auth(request)
        return ok({**self.store.stats(), "faults": self.faults.view()})

    def routes(self) -> list[Route]:
        return [
            Route("/admin/jobs", self.admin_jobs, methods=["GET", "POST"]),
            Route("/admin/jobs/{job_id}", self.admin_job, methods=["GET"]),
            Route("/admin/deployments", self.admin_deployments, methods=["POST"]),
            Route("/admin/jobs/{job_id}/cancel", self.admin_cancel, methods=["POST"]),
            Route("/admin/agents", self.admin_agents, methods=["GET"]),
            Route("/admin/faults", self.admin_faults, methods=["GET", "POST"]),
            Route("/admin/executor", self.admin_executor, methods=["GET", "POST"]),
            Route("/admin/backend/{org}", self.admin_backend, methods=["GET"]),
            Route("/admin/background-activities", self.admin_activities, methods=["GET", "POST"]),
            Route("/admin/reset", self.admin_reset, methods=["POST"]),
            Route("/admin/pools", self.admin_pools, methods=["GET", "POST"]),
            Route("/admin/pools/{pool}", self.admin_pool, methods=["GET", "PATCH"]),
            Route("/admin/oidc/mint", self.admin_mint, methods=["POST"]),
            Route("/admin/access-tokens", self.admin_access_token, methods=["POST"]),
            Route("/admin/clock", self.admin_clock, methods=["GET", "POST"]),
            Route("/admin/stats", self.admin_stats, methods=["GET"]),
        ]
