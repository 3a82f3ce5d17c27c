"""The pool REST API (/api/orgs/{org}/agent-pools) that the agent_pool module drives.

Shapes and types are the published ones (tests/conformance validates every answer against the
schemas transcribed from the spec); these tests pin the behaviour behind them."""

import time

import httpx
import pytest
from emu_helpers import STEPS, Agent


def api(emu, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"{emu.url}/api/orgs",
        headers={"Authorization": f"token {token}", "Accept": "application/vnd.pulumi+8"},
        timeout=30,
    )


@pytest.fixture
def rest(emu):
    with api(emu, emu.admin_token) as client:
        yield client


def test_create_list_get_patch_delete(emu, rest):
    created = rest.post("/acme/agent-pools", json={"name": "linux", "description": "ci"})
    assert created.status_code == 200
    pool_id, token = created.json()["id"], created.json()["tokenValue"]
    assert token.startswith("pul-")
    listed = rest.get("/acme/agent-pools").json()
    assert [p["name"] for p in listed["agentPools"]] == ["linux"]
    summary = listed["agentPools"][0]
    # lastDeployment is an int64 the spec does not require: absent (not null) before any claim.
    assert set(summary) == {
        "created",
        "id",
        "name",
        "description",
        "lastSeen",
        "status",
        "isDefault",
    }
    assert summary["status"] == "offline" and summary["lastSeen"] == 0  # never seen
    assert isinstance(summary["created"], int) and abs(summary["created"] - time.time()) < 600
    detail = rest.get(f"/acme/agent-pools/{pool_id}").json()
    assert detail == {
        "created": summary["created"],
        "id": pool_id,
        "name": "linux",
        "description": "ci",
        "agents": [],
    }  # AgentPoolDetail, and the token is shown once only

    patched = rest.patch(
        f"/acme/agent-pools/{pool_id}", json={"name": "linux", "description": "builds"}
    )
    assert patched.json() == {"name": "linux", "description": "builds"}
    assert rest.get(f"/acme/agent-pools/{pool_id}").json()["description"] == "builds"
    assert rest.delete(f"/acme/agent-pools/{pool_id}").status_code == 204
    assert rest.get(f"/acme/agent-pools/{pool_id}").status_code == 404
    assert rest.get("/acme/agent-pools").json()["agentPools"] == []


def test_pool_token_works_and_dies_with_the_pool(emu, rest):
    created = rest.post("/acme/agent-pools", json={"name": "p", "description": ""}).json()
    agent = Agent(emu, token=created["tokenValue"], hostname="h")
    try:
        assert agent.poll().status_code == 204
        rest.delete(f"/acme/agent-pools/{created['id']}")
        assert agent.poll().status_code == 403  # the one error the spec lists for the poll
    finally:
        agent.close()


def test_detail_lists_agents_online_and_offline(emu, rest):
    created = rest.post("/acme/agent-pools", json={"name": "fleet", "description": ""}).json()
    agents = [
        Agent(emu, token=created["tokenValue"], hostname=f"h{i}", instance="1") for i in range(3)
    ]
    try:
        for a in agents:
            a.poll()
        detail = rest.get(f"/acme/agent-pools/{created['id']}").json()
        assert sorted(a["hostname"] for a in detail["agents"]) == ["h0", "h1", "h2"]
        assert {a["status"] for a in detail["agents"]} == {"online"}
        first = detail["agents"][0]
        assert first["version"] == "9.9.9" and first["platform"] == "linux/amd64"
        assert first["pid"].isdigit() and isinstance(first["lastSeen"], int)
        [summary] = rest.get("/acme/agent-pools").json()["agentPools"]
        assert summary["status"] == "online"
        assert summary["lastSeen"] == max(a["lastSeen"] for a in detail["agents"])
        emu.advance_clock(61)  # past the online window (60 s)
        agents[0].poll()
        detail = rest.get(f"/acme/agent-pools/{created['id']}").json()
        status = {a["hostname"]: a["status"] for a in detail["agents"]}
        assert status == {"h0": "online", "h1": "offline", "h2": "offline"}
    finally:
        for a in agents:
            a.close()


def test_delete_refuses_while_referenced_unless_forced(emu, rest):
    created = rest.post("/acme/agent-pools", json={"name": "busy", "description": ""}).json()
    job = emu.create_job(STEPS, pool=created["id"])
    refused = rest.delete(f"/acme/agent-pools/{created['id']}")
    assert refused.status_code == 400 and "force" in refused.json()["error"]
    emu.cancel(job)
    emu.admin("PATCH", f"/admin/pools/{created['id']}", {"stacks": ["acme/web/prod"]})
    refused = rest.delete(f"/acme/agent-pools/{created['id']}")
    assert refused.status_code == 400 and "acme/web/prod" in refused.json()["error"]
    assert rest.delete(f"/acme/agent-pools/{created['id']}?force=true").status_code == 204


def test_force_delete_cancels_unfinished_jobs(emu, rest):
    created = rest.post("/acme/agent-pools", json={"name": "doomed", "description": ""}).json()
    job = emu.create_job(STEPS, pool=created["id"])
    assert (
        rest.delete(f"/acme/agent-pools/{created['id']}", params={"force": "true"}).status_code
        == 204
    )
    assert emu.job(job)["status"] == "canceled"


def test_default_pool_and_duplicate_names(emu, rest):
    listed = rest.get("/default/agent-pools").json()
    default = listed["agentPools"][0]
    assert default["name"] == "default" and default["isDefault"] is True
    assert listed["defaultAgentPoolID"] == default["id"]
    taken = {"name": "default", "description": ""}
    assert rest.post("/default/agent-pools", json=taken).status_code == 409
    assert rest.post("/elsewhere/agent-pools", json=taken).status_code == 200


def test_auth_admin_token_org_tokens_and_pool_tokens(emu):
    with api(emu, emu.access_token("acme")) as acme:
        new = {"name": "x", "description": "d"}
        assert acme.post("/acme/agent-pools", json=new).status_code == 200
        assert acme.get("/other/agent-pools").status_code == 403
    with api(emu, emu.access_token()) as any_org:
        assert any_org.get("/other/agent-pools").status_code == 200
    with api(emu, emu.pool_token) as pool_token:  # a pool token is not an access token
        assert pool_token.get("/acme/agent-pools").status_code == 401
    assert httpx.get(f"{emu.url}/api/orgs/acme/agent-pools", timeout=30).status_code == 401


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/acme/agent-pools", {}, 400),
        # CreateOrgAgentPoolRequest requires both name and description [SPEC].
        ("POST", "/acme/agent-pools", {"name": "x"}, 400),
        ("POST", "/acme/agent-pools", {"description": "x"}, 400),
        ("POST", "/acme/agent-pools", {"name": "", "description": ""}, 400),
        ("POST", "/acme/agent-pools", {"name": "x" * 101, "description": ""}, 400),
        ("POST", "/acme/agent-pools", {"name": "x", "description": 5}, 400),
        ("POST", "/bad org!/agent-pools", {"name": "x", "description": ""}, 400),
        ("GET", "/acme/agent-pools/nope", None, 404),
        ("PATCH", "/acme/agent-pools/nope", {"name": "y", "description": ""}, 404),
        ("DELETE", "/acme/agent-pools/nope", None, 404),
    ],
)
def test_bad_requests(rest, method, path, body, status):
    resp = rest.request(method, path, json=body)
    assert resp.status_code == status and resp.json()["error"]


def test_patch_validation_and_force_values(emu, rest):
    pool_id = rest.post("/acme/agent-pools", json={"name": "a", "description": ""}).json()["id"]
    rest.post("/acme/agent-pools", json={"name": "b", "description": ""})
    url = f"/acme/agent-pools/{pool_id}"
    assert rest.patch(url, json={"name": "b", "description": ""}).status_code == 409
    both = {"name": "a", "description": "", "token": "x"}
    assert rest.patch(url, json=both).status_code == 400
    # PATCH takes a CreateOrgAgentPoolRequest too: both fields, or 400, and nothing changes.
    for half in ({"name": "renamed"}, {"description": "only"}):
        refused = rest.patch(url, json=half)
        assert refused.status_code == 400 and "required" in refused.json()["error"]
    assert rest.get(url).json()["name"] == "a"
    assert rest.delete(f"/acme/agent-pools/{pool_id}?force=maybe").status_code == 400
    other_org = rest.get(f"/other/agent-pools/{pool_id}")
    assert other_org.status_code == 404  # a pool is only reachable through its own org
