"""The agent's bootstrap before it polls [RE]: GET /api/background-activities/token and
POST /api/background-activities/configuration, with the pool token, recorded per agent."""

import re

import httpx
import pytest
from emu_helpers import Agent

TOKEN = "/api/background-activities/token"
CONFIG = "/api/background-activities/configuration"


def test_the_worker_token_expires_in_an_hour(emu, agent):
    got = agent.http.get(TOKEN)
    assert got.status_code == 200
    body = got.json()
    assert set(body) == {"token", "expiration"} and body["token"].startswith("wkr-")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["expiration"])
    assert agent.http.get(TOKEN).json()["token"] != body["token"]


def test_the_configuration_is_an_array_of_every_kind_listing_the_callers_pool(emu, agent):
    # No Content-Type and no body, as the runner sends its bodies; then a JSON body.
    for content in (b"", b'{"hostname": "host-1"}'):
        got = agent.http.post(CONFIG, content=content)
        assert got.status_code == 200
        kinds = got.json()
        assert [k["kind"] for k in kinds] == ["deployment", "insights_scan", "policy_evaluation"]
    seed = emu.admin("GET", "/admin/pools/default").json()
    pool = {"id": seed["id"], "name": "default", "description": seed["description"]}
    assert kinds[0] == {
        "kind": "deployment",
        "interval": 5,
        "canChangeInterval": True,
        "concurrency": 1,
        "enabled": True,
        "agentPoolRegistrationEnabled": False,
        "agentPools": [pool],
    }
    assert all(k["enabled"] and k["agentPools"] == [pool] for k in kinds)


def test_admin_sets_which_kinds_are_enabled_and_which_pools_they_list(emu, agent):
    other = emu.create_pool("other", description="second")
    emu.background_activities(
        insights_scan={"enabled": False},
        policy_evaluation={"pools": ["other", "default"], "interval": 30},
    )
    kinds = {k["kind"]: k for k in agent.http.post(CONFIG).json()}
    assert [k["enabled"] for k in kinds.values()] == [True, False, True]
    assert [p["name"] for p in kinds["policy_evaluation"]["agentPools"]] == ["other", "default"]
    assert kinds["policy_evaluation"]["agentPools"][0]["id"] == other["id"]
    assert kinds["policy_evaluation"]["interval"] == 30
    # A pool deleted since is no longer listed; a reset brings the defaults back.
    emu.admin("DELETE", f"/api/orgs/{emu.org}/agent-pools/{other['id']}")
    kinds = {k["kind"]: k for k in agent.http.post(CONFIG).json()}
    assert [p["name"] for p in kinds["policy_evaluation"]["agentPools"]] == ["default"]
    emu.reset()
    assert all(k["enabled"] for k in agent.http.post(CONFIG).json())


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"deploy": {}}, "unknown kind(s): deploy"),
        ({"deployment": []}, "deployment must be an object"),
        ({"deployment": {"enable": True}}, "deployment: unknown field(s): enable"),
        ({"deployment": {"enabled": "yes"}}, "deployment.enabled must be true or false"),
        ({"deployment": {"interval": -1}}, "deployment.interval must be an integer"),
        ({"deployment": {"pools": "default"}}, "deployment.pools must be a list"),
        ({"deployment": {"pools": ["nope"]}}, "no pool 'nope'"),
    ],
)
def test_bad_admin_settings_are_refused(emu, body, error):
    resp = emu.admin("POST", "/admin/background-activities", body)
    assert resp.status_code in (400, 404) and resp.json()["error"].startswith(error)


def test_each_agent_s_calls_are_counted_in_the_order_first_made(emu, make_agent):
    a, b = make_agent(hostname="a"), make_agent(hostname="b")
    a.http.get(TOKEN)
    a.http.post(CONFIG)
    a.poll()
    a.poll()
    b.poll()
    b.http.get(TOKEN)
    agents = {x["id"]: x for x in emu.agents()}
    assert agents[a.id]["first_calls"] == ["token", "configuration", "poll"]
    assert agents[a.id]["calls"] == {"token": 1, "configuration": 1, "poll": 2}
    assert agents[b.id]["first_calls"] == ["poll", "token"]


def test_both_take_the_pool_token_only(emu):
    for auth in ({"Authorization": "token pul-not-a-pool-token"}, {}):
        assert httpx.get(emu.url + TOKEN, headers=auth, timeout=30).status_code == 401
        refused = httpx.post(emu.url + CONFIG, headers=auth, timeout=30)
        assert refused.status_code == 401 and refused.json()["error"]
    bad_body = Agent(emu).http.post(CONFIG, content=b"[1]")
    assert bad_body.status_code == 400
    assert emu.agents() == []  # a refused call is nobody's
