"""oidc: the token exchange, caching, renewal before expires_in, re-exchange on 401 or 403.

The transport is the unit boundary (agent_helpers.Script); the clock is injected.
"""

import json

import httpx
import pytest
from agent_helpers import Script, config, ok
from workflow_agent.client import Client, ServiceError
from workflow_agent.clock import FakeClock
from workflow_agent.oidc import OidcTokens
from workflow_agent.redaction import MASK, Redactor

OIDC = {"organization_name": "acme", "runner_pool_id": "pool-7"}


def setup(tmp_path, script, **cfg):
    token_file = tmp_path / "id-token"
    token_file.write_text("id-token-one\n")
    cfg = config(token="", oidc_token_file=str(token_file), **OIDC, **cfg)
    clock = FakeClock()
    client = Client(cfg, transport=httpx.MockTransport(script), clock=clock, env={})
    redactor = Redactor()
    client.tokens = OidcTokens(cfg, client, redactor)
    return client, clock, token_file, redactor


def body(request):
    """The exchange's JSON body: the only request body the spec declares for the route."""
    assert request.headers["Content-Type"] == "application/json"
    return json.loads(request.content)


def exchanged(access, expires_in=3600):
    return ok({"access_token": access, "token_type": "token", "expires_in": expires_in})


def test_exchange_request_fields(tmp_path):
    script = Script(exchanged("acc-1"), ok(status=204))
    client, *_ = setup(tmp_path, script, token_expiration="1h30m")
    client.call("GET", "/api/deployments/poll", route="poll")
    assert script.paths == ["POST /api/oauth/token", "GET /api/deployments/poll"]
    assert "Authorization" not in script.requests[0].headers
    assert body(script.requests[0]) == {
        "audience": "urn:pulumi:org:acme",
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "requested_token_type": "urn:pulumi:token-type:access_token:runner",
        "scope": "runner:pool-7",
        "subject_token": "id-token-one",
        "expiration": 5400,
    }
    assert script.requests[1].headers["Authorization"] == "token acc-1"


def test_token_is_cached_then_renewed_before_it_expires(tmp_path):
    script = Script(exchanged("acc-1", 1000), exchanged("acc-2", 1000))
    client, clock, token_file, _ = setup(tmp_path, script)
    tokens = client.tokens
    assert tokens.token() == "acc-1"
    clock.advance(799)
    assert tokens.token() == "acc-1"
    assert tokens.exchanges == 1
    token_file.write_text("id-token-two")  # the platform rotated the ID token
    clock.advance(1)
    assert tokens.token() == "acc-2"
    assert tokens.exchanges == 2
    assert body(script.requests[1])["subject_token"] == "id-token-two"
    assert "expiration" not in body(script.requests[1])


@pytest.mark.parametrize("refusal", [401, 403])  # 403: the poll's refusal in the spec
def test_refusal_on_poll_re_exchanges_first(tmp_path, refusal):
    script = Script(
        exchanged("acc-1"),
        ok({"error": "expired"}, status=refusal),
        exchanged("acc-2"),
        ok(status=204),
    )
    client, *_ = setup(tmp_path, script)
    assert client.call("GET", "/api/deployments/poll", route="poll").status == 204
    assert script.paths == [
        "POST /api/oauth/token",
        "GET /api/deployments/poll",
        "POST /api/oauth/token",
        "GET /api/deployments/poll",
    ]
    assert script.requests[3].headers["Authorization"] == "token acc-2"


def test_a_second_401_is_reported_not_looped(tmp_path):
    script = Script(exchanged("a"), ok(status=401), exchanged("b"), ok(status=401))
    client, *_ = setup(tmp_path, script)
    with pytest.raises(ServiceError) as info:
        client.call("GET", "/api/deployments/poll", route="poll")
    assert info.value.status == 401 and len(script.requests) == 4


@pytest.mark.parametrize(
    "answer",
    [ok({"token_type": "token"}), ok({"access_token": 5}), ok(["x"]), ok({"access_token": "a\nb"})],
)
def test_malformed_exchange_answers(tmp_path, answer):
    client, *_ = setup(tmp_path, Script(answer))
    with pytest.raises(ServiceError, match="no access_token"):
        client.tokens.token()


def test_missing_expires_in_uses_the_two_hour_default(tmp_path):
    script = Script(ok({"access_token": "acc"}), exchanged("acc-2"))
    client, clock, *_ = setup(tmp_path, script)
    client.tokens.token()
    clock.advance(0.8 * 7200 - 1)
    client.tokens.token()
    assert client.tokens.exchanges == 1


def test_unreadable_or_empty_token_file(tmp_path):
    client, _, token_file, _ = setup(tmp_path, Script(exchanged("a")))
    token_file.write_text("  \n")
    with pytest.raises(ServiceError, match="the file is empty"):
        client.tokens.token()
    token_file.unlink()
    with pytest.raises(ServiceError, match=r"id-token: cannot read: No such file"):
        client.tokens.token()


def test_exchanged_tokens_are_redacted(tmp_path):
    client, _, _, redactor = setup(tmp_path, Script(exchanged("access-token-xyz")))
    client.tokens.token()
    assert redactor("got access-token-xyz from id-token-one") == f"got {MASK} from {MASK}"
    assert set(client.tokens.secrets()) == {"access-token-xyz", "id-token-one"}
