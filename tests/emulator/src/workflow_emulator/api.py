"""What every API of the emulator shares: reading bodies, the Authorization header, and who
may call (pool, job, org and admin tokens). Each API (api_jobs, api_oidc, api_pools, api_admin)
is an `Api` whose handlers are its methods and whose `routes()` lists them.

Every handler is `async` so that it runs on the event-loop thread, where the store's methods
are atomic (see store.py). Bad input of any kind becomes an `ApiError`: a 4xx with a JSON body.
"""

import hmac
import json

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from workflow_emulator.activities import BackgroundActivities
from workflow_emulator.errors import ApiError
from workflow_emulator.executor import Executor
from workflow_emulator.faults import Faults
from workflow_emulator.store import Clock, Store, check_org

MAX_BODY = 8 * 1024 * 1024


def ok(body: object = None, status: int = 200) -> JSONResponse:
    return JSONResponse({} if body is None else body, status_code=status)


async def read_raw(request: Request, limit: int = MAX_BODY) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body is larger than {limit} bytes")
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


def query_number(request: Request, name: str) -> float | None:
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


class Api:
    def __init__(
        self,
        *,
        settings,
        clock: Clock,
        store: Store,
        faults: Faults,
        executor: Executor,
        activities: BackgroundActivities,
        seed_pool: dict | None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.store = store
        self.faults = faults
        self.executor = executor
        self.activities = activities
        self.seed_pool = seed_pool

    def routes(self) -> list[Route]:
        raise NotImplementedError

    def pool_auth(self, request: Request, status: int = 401) -> dict:
        try:
            pool = self.store.pool_for_token(bearer(request))
        except ApiError as err:
            raise ApiError(status, err.message) from None
        if pool is None:
            raise ApiError(status, "the token is not a valid pool token")
        return pool

    def agent_of(self, request: Request, pool: dict, call: str) -> dict:
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
        agent = self.store.see_agent(pool, ident, call)
        request.scope["emulator"]["agent"] = agent["id"]
        return agent

    def job_auth(self, request: Request) -> dict:
        return self.store.job_for_token(request.path_params["job_id"], bearer(request))

    def admin_auth(self, request: Request) -> None:
        if not hmac.compare_digest(bearer(request).encode(), self.settings.admin_token.encode()):
            raise ApiError(401, "the token is not the admin token")

    def org_auth(self, request: Request) -> str:
        org = check_org(request.path_params["org"])
        token = bearer(request)
        if hmac.compare_digest(token.encode(), self.settings.admin_token.encode()):
            return org
        tok = self.store.org_token(token)
        if tok is None:
            raise ApiError(401, "the token is not a valid access token")
        if tok["org"] not in ("*", org):
            raise ApiError(403, f"the access token is not valid for organization {org}")
        return org
