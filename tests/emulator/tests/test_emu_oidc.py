"""OIDC token exchange: tokens from the emulator's test issuer in, runner access tokens out."""

import json
import time

import httpx
import jwt
import pytest
from emu_helpers import STEPS, Agent

GRANT = {
    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
    "requested_token_type": "urn:pulumi:token-type:access_token:runner",
    "audience": "urn:pulumi:org:default",
    "scope": "runner:default",
}


def exchange(emu, subject: str, **fields) -> httpx.Response:
    data = {**GRANT, "subject_token": subject, **fields}
    return httpx.post(f"{emu.url}/api/oauth/token", json=data, timeout=30)


def test_exchange_then_poll_with_the_access_token(emu):
    pool_id = emu.admin("GET", "/admin/pools/default").json()["id"]
    resp = exchange(emu, emu.mint_oidc(), scope=f"runner:{pool_id}", expiration="600")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["token_type"] == "token"
    assert body["issued_token_type"] == GRANT["requested_token_type"]
    assert body["expires_in"] == 600 and body["scope"] == f"runner:{pool_id}"
    job = emu.create_job(STEPS)
    agent = Agent(emu, token=body["access_token"], hostname="oidc-host")
    try:
        assert agent.claim()["jobID"] == job
        emu.advance_clock(601)  # the access token expired
        assert agent.poll().status_code == 403  # the one error the spec lists for the poll
    finally:
        agent.close()


def test_the_body_is_json_only_as_the_spec_declares(emu):
    fields = {**GRANT, "subject_token": emu.mint_oidc()}
    raw = json.dumps(fields).encode()  # JSON without a Content-Type is still JSON
    resp = httpx.post(f"{emu.url}/api/oauth/token", content=raw, timeout=30)
    assert resp.status_code == 200, resp.text
    form = httpx.post(f"{emu.url}/api/oauth/token", data=fields, timeout=30)
    assert form.status_code == 400 and "JSON" in form.json()["error"]


def test_default_lifetime_is_two_hours_and_capped(emu):
    assert exchange(emu, emu.mint_oidc()).json()["expires_in"] == 7200
    assert exchange(emu, emu.mint_oidc(), expiration="999999").json()["expires_in"] == 25 * 3600


def test_expired_token_is_rejected(emu):
    resp = exchange(emu, emu.mint_oidc(expires_in=-10))
    assert resp.status_code == 401 and "expired" in resp.json()["error"]
    token = emu.mint_oidc(expires_in=60)
    emu.advance_clock(61)
    assert exchange(emu, token).status_code == 401


def test_foreign_signed_token_is_rejected(emu):
    genuine = jwt.decode(emu.mint_oidc(), options={"verify_signature": False})
    forged = jwt.encode(genuine, "some-other-issuer-key-32-bytes-long!", algorithm="HS256")
    resp = exchange(emu, forged)
    assert resp.status_code == 401 and "signature" in resp.json()["error"]
    none_alg = jwt.encode(genuine, key=None, algorithm="none")
    assert exchange(emu, none_alg).status_code == 401


def test_wrong_audience_is_rejected(emu):
    emu.create_pool("ci", org="other-org")
    token_for_other = emu.mint_oidc(org="other-org")
    resp = exchange(emu, token_for_other)  # asks for org default with a token for other-org
    assert resp.status_code == 401 and "audience" in resp.json()["error"]
    ok = exchange(emu, token_for_other, audience="urn:pulumi:org:other-org", scope="runner:ci")
    assert ok.status_code == 200


def test_garbage_subject_token_is_rejected(emu):
    assert exchange(emu, "not-a-jwt").status_code == 401


@pytest.mark.parametrize(
    "fields",
    [
        {"grant_type": "client_credentials"},
        {"subject_token_type": "urn:ietf:params:oauth:token-type:jwt"},
        {"requested_token_type": "urn:pulumi:token-type:access_token:organization"},
        {"audience": "https://example.com"},
        {"audience": "urn:pulumi:org:"},
        {"scope": "pool:default"},
        {"scope": "runner:no-such-pool"},
        {"expiration": "soon"},
        {"expiration": "-5"},
        {"subject_token": ""},
    ],
)
def test_malformed_requests_are_400(emu, fields):
    resp = exchange(emu, emu.mint_oidc(), **fields)
    assert resp.status_code == 400 and resp.json()["error"]


def test_claim_carries_an_oidc_token_from_the_issuer(emu, agent):
    emu.create_job(STEPS)
    claims = jwt.decode(agent.claim()["oidcToken"], options={"verify_signature": False})
    assert claims["aud"] == "urn:pulumi:org:default"
    assert claims["sub"].startswith("job:job-")
    assert claims["exp"] > time.time()
