"""The emulator's application: the state, the five APIs (api_jobs: the agent's and the job's
side; api_oidc; api_pools: the pool REST API; api_backend: the stand-in executor's state store;
api_admin), error handling and the sweeper.
What the handlers share, and why they are all `async`, is in api.py.
"""

import asyncio
import contextlib
import dataclasses
import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from workflow_emulator.activities import BackgroundActivities
from workflow_emulator.api import ok
from workflow_emulator.api_admin import AdminApi
from workflow_emulator.api_backend import BackendApi
from workflow_emulator.api_jobs import JobsApi
from workflow_emulator.api_oidc import OidcApi
from workflow_emulator.api_pools import PoolsApi
from workflow_emulator.db import Db
from workflow_emulator.edge import Edge
from workflow_emulator.errors import ApiError
from workflow_emulator.executor import Executor, default_content
from workflow_emulator.faults import Faults
from workflow_emulator.metrics import Metrics
from workflow_emulator.store import Clock, Store

log = logging.getLogger("workflow_emulator")
EXECUTOR = default_content()  # the stand-in executor, for tests that serve it themselves


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

    async def healthz(request: Request) -> Response:
        return ok({"status": "ok"})

    async def metrics_route(request: Request) -> Response:
        body, ctype = metrics.render()
        return Response(body, media_type=ctype)

    apis = (JobsApi, OidcApi, PoolsApi, BackendApi, AdminApi)
    shared = {
        "settings": settings,
        "clock": clock,
        "store": store,
        "faults": faults,
        "executor": Executor(),
        "activities": BackgroundActivities(),
    }
    routes = [r for api in apis for r in api(**shared, seed_pool=seed_pool).routes()]
    routes += [
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
