"""The emulator's test OIDC issuer: HS256 ID tokens it mints and verifies (never a real IdP)."""

import jwt

from workflow_emulator.errors import ApiError

ISSUER = "https://workflow-emulator.invalid/oidc"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
RUNNER_TOKEN_TYPE = "urn:pulumi:token-type:access_token:runner"
ORG_AUDIENCE_PREFIX = "urn:pulumi:org:"


def mint(
    key: bytes, *, audience: str, subject: str, now: float, expires_in: float, extra: dict
) -> str:
    claims = {**extra, "iss": ISSUER, "aud": audience, "sub": subject}
    claims.update(iat=int(now), nbf=int(now), exp=int(now + expires_in))
    return jwt.encode(claims, key, algorithm="HS256")


def verify(key: bytes, token: str, *, audience: str, now: float) -> dict:
    """The claims of a token this issuer signed for `audience`, valid at `now` (emulator clock)."""
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=["HS256"],
            audience=audience,
            issuer=ISSUER,
            # Time checks use the emulator's clock (which tests can advance), not PyJWT's.
            options={
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "require": ["exp", "aud", "iss", "sub"],
            },
        )
    except jwt.InvalidSignatureError:
        raise ApiError(
            401, "subject_token signature does not verify (not signed by this issuer)"
        ) from None
    except jwt.InvalidAudienceError:
        raise ApiError(401, f"subject_token audience is not {audience}") from None
    except jwt.InvalidIssuerError:
        raise ApiError(401, f"subject_token issuer is not {ISSUER}") from None
    except jwt.MissingRequiredClaimError as err:
        raise ApiError(401, f"subject_token lacks the {err.claim!r} claim") from None
    except jwt.InvalidTokenError:
        raise ApiError(401, "subject_token is not a valid JWT") from None
    if not isinstance(claims.get("exp"), int) or claims["exp"] <= now:
        raise ApiError(401, "subject_token has expired")
    return claims
