"""OIDC token exchange: a signed ID token for a runner pool's access token."""

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from workflow_emulator import oidc
from workflow_emulator.api import Api, ok, read_body
from workflow_emulator.errors import ApiError
from workflow_emulator.store import check_org


class OidcApi(Api):
    async def token_exchange(self, request: Request) -> Response:
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
            pool = self.store.find_pool(scope[len("runner:") :], org)
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
        oidc.verify(self.store.issuer_key, subject, audience=audience, now=self.clock.now())
        token = self.store.add_access_token(
            "runner", pool_id=pool["id"], expires=self.clock.now() + expires_in
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

    def routes(self) -> list[Route]:
        return [Route("/api/oauth/token", self.token_exchange, methods=["POST"])]
