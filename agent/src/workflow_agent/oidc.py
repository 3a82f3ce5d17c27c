"""OIDC mode: exchange the ID token in `oidc_token_file` for a runner access token.

The access token is cached and renewed (the file re-read, the exchange repeated) once
RENEW_AT of its lifetime has passed, so a call never goes out with an expired token.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from workflow_agent.client import Client, ServiceError
from workflow_agent.config import AgentConfig
from workflow_agent.redaction import Redactor

log = logging.getLogger(__name__)

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
SUBJECT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"  # noqa: S105 - a type name
REQUESTED_TOKEN_TYPE = "urn:pulumi:token-type:access_token:runner"  # noqa: S105 - a type name
RENEW_AT = 0.8  # fraction of expires_in after which the token is renewed
DEFAULT_LIFETIME = 2 * 3600.0  # the service's documented default, when expires_in is missing


class OidcTokens:
    """A TokenSource for Client: the exchanged access token, renewed before it expires."""

    def __init__(self, cfg: AgentConfig, client: Client, redactor: Redactor | None = None) -> None:
        self.cfg = cfg
        self.redactor = redactor
        self.client = client
        self.clock = client.clock
        self._lock = threading.Lock()
        self._access: str | None = None
        self._id_token: str | None = None
        self._renew_at = 0.0
        self.exchanges = 0

    def token(self) -> str:
        with self._lock:
            if self._access is None or self.clock.monotonic() >= self._renew_at:
                self._exchange()
            assert self._access is not None
            return self._access

    def invalidate(self) -> bool:
        with self._lock:
            self._access = None
        return True

    def secrets(self) -> list[str]:
        return [s for s in (self._access, self._id_token) if s]

    def _read_id_token(self) -> str:
        path = self.cfg.oidc_token_file
        try:
            text = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not readable text"
            raise ServiceError(f"oidc_token_file {path}: cannot read: {reason}") from None
        if not text:
            raise ServiceError(f"oidc_token_file {path}: the file is empty")
        return text

    def _exchange(self) -> None:
        id_token = self._read_id_token()
        self._id_token = id_token
        # JSON: the only request body the spec declares for POST /api/oauth/token.
        body: dict[str, str | int] = {
            "audience": f"urn:pulumi:org:{self.cfg.organization_name}",
            "grant_type": GRANT_TYPE,
            "subject_token_type": SUBJECT_TOKEN_TYPE,
            "requested_token_type": REQUESTED_TOKEN_TYPE,
            "scope": f"runner:{self.cfg.runner_pool_id}",
            "subject_token": id_token,
        }
        if self.cfg.token_expiration is not None:
            body["expiration"] = int(self.cfg.token_expiration.total_seconds())
        started = self.clock.monotonic()
        reply = self.client.call(
            "POST", "/api/oauth/token", route="oauth_token", json_body=body, anonymous=True
        )
        data = reply.data
        access = data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(access, str) or not access or not access.isprintable():
            raise ServiceError("POST oauth_token: malformed response (no access_token)")
        lifetime = data.get("expires_in")
        if isinstance(lifetime, bool) or not isinstance(lifetime, int | float) or lifetime <= 0:
            lifetime = DEFAULT_LIFETIME
        self._access = access
        if self.redactor is not None:
            self.redactor.add([access, id_token])
        self._renew_at = started + RENEW_AT * float(lifetime)
        self.exchanges += 1
        log.info("oidc: exchanged the id token (valid %.0fs)", lifetime)
