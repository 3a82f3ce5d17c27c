"""agent_pool request logic: which calls, with what, and what each answer means.

The service is a stand-in that records requests and answers from a small in-memory pool list;
tests/system/test_plugins_agent_pool.py drives the module against the real emulator.
"""

from __future__ import annotations

import json
import os
import stat

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.http_request import (
    Response,
)
from ansible_collections.selfhosted.workflow_agent.plugins.modules import agent_pool

BASE = "https://api.example/api/orgs/acme%20corp/agent-pools"
ACCESS = "pul-access-0000000000000000000000000000000000"
POOL_TOKEN = "pul-pool-1111111111111111111111111111111111111"
HTTP = {"timeout": 10, "validate_certs": True, "ca_path": None}


def reply(status, body=None):
    return Response(status, b"" if body is None else json.dumps(body).encode())


class FakeService:
    """A tiny pool service: a dict of pools, and every request recorded."""

    def __init__(self, pools=None):
        self.pools = {p["id"]: dict(p) for p in (pools or [])}
        self.requests = []
        self.override = {}  # (method, url) -> Response, for error answers

    def __call__(self, method, url, data=None, headers=None, **http):
        self.requests.append((method, url, data, dict(headers or {})))
        if (method, url) in self.override:
            return self.override[(method, url)]
        path = url[len(BASE) :]
        if path == "" and method == "GET":
            return reply(200, {"agentPools": [dict(p) for p in self.pools.values()]})
        if path == "" and method == "POST":
            new = {"id": f"p{len(self.pools) + 1}", "name": data["name"], "agents": []}
            new["description"] = data["description"]
            self.pools[new["id"]] = new
            return reply(200, {"id": new["id"], "tokenValue": POOL_TOKEN})
        pool_id = path[1:].split("?")[0]
        if pool_id not in self.pools:
            return reply(404, {"error": f"no pool {pool_id!r}"})
        if method == "GET":
            return reply(200, self.pools[pool_id])
        if method == "PATCH":  # a CreateOrgAgentPoolRequest in, a PatchOrgAgentPoolResponse out
            if set(data) != {"name", "description"}:
                return reply(400, {"error": "name and description required"})
            self.pools[pool_id].update(data)
            return reply(200, {"name": data["name"], "description": data["description"]})
        if method == "DELETE":
            del self.pools[pool_id]
            return reply(204)
        raise AssertionError((method, url))

    def methods(self):
        return [r[0] for r in self.requests]


def client(service):
    return agent_pool.PoolClient("https://api.example/", ACCESS, "acme corp", HTTP, send=service)


def params(**kw):
    base = {
        "name": "builders",
        "description": None,
        "state": "present",
        "force": False,
        "token_dest": None,
        "wait_for_online": 0,
        "wait_timeout": 300,
        "wait_delay": 2,
    }
    base.update(kw)
    return base


def agent(pid, status="online"):
    return {"hostname": "h", "pid": pid, "status": status}


# --- the calls ------------------------------------------------------------------------------


def test_every_call_carries_the_access_token_and_media_type():
    service = FakeService()
    agent_pool.ensure(client(service), params(description="d"), check_mode=False)
    for _method, url, _data, headers in service.requests:
        assert url.startswith(BASE)  # org name quoted, service_url slash dropped
        assert headers["Authorization"] == "token " + ACCESS
        assert headers["Accept"] == "application/vnd.pulumi+8"
    assert service.methods() == ["GET", "POST", "GET"]
    assert service.requests[1][2] == {"name": "builders", "description": "d"}


def test_create_returns_the_token_once():
    service = FakeService()
    result = agent_pool.ensure(client(service), params(), check_mode=False)
    assert result["changed"] is True and result["created"] is True
    assert result["token"] == POOL_TOKEN
    assert result["pool"]["id"] == "p1" and result["online"] == 0
    again = agent_pool.ensure(client(service), params(), check_mode=False)
    assert again["changed"] is False and "token" not in again
    assert service.methods()[-2:] == ["GET", "GET"]  # list, detail: no second POST


def test_create_writes_the_token_file_0600_and_does_not_return_it(tmp_path):
    dest = tmp_path / "pool.token"
    result = agent_pool.ensure(
        client(FakeService()), params(token_dest=str(dest)), check_mode=False
    )
    assert "token" not in result and result["token_dest"] == str(dest)
    assert dest.read_text() == POOL_TOKEN + "\n"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert [p for p in os.listdir(tmp_path) if p.startswith(".pool-token-")] == []


def test_token_file_in_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(agent_pool.PoolError, match="token_dest: directory .*/nope does not exist"):
        agent_pool.write_token(str(tmp_path / "nope" / "t"), POOL_TOKEN)


def test_existing_pool_and_missing_token_file_fails(tmp_path):
    service = FakeService([{"id": "p1", "name": "builders", "description": ""}])
    with pytest.raises(agent_pool.PoolError) as err:
        agent_pool.ensure(client(service), params(token_dest=str(tmp_path / "t")), False)
    assert "pool 'builders' already exists and token_dest" in str(err.value)
    assert "POST" not in service.methods()


def test_description_is_updated_only_when_given_and_different():
    service = FakeService([{"id": "p1", "name": "builders", "description": "old"}])
    assert agent_pool.ensure(client(service), params(), False)["changed"] is False
    assert agent_pool.ensure(client(service), params(description="old"), False)["changed"] is False
    result = agent_pool.ensure(client(service), params(description="new"), False)
    assert result["changed"] is True and result["pool"]["description"] == "new"
    # PATCH takes a CreateOrgAgentPoolRequest: name and description, both required [SPEC].
    patch = {"name": "builders", "description": "new"}
    assert ("PATCH", BASE + "/p1", patch) in [r[:3] for r in service.requests]


def test_check_mode_never_writes():
    service = FakeService([{"id": "p1", "name": "old", "description": "x", "agents": []}])
    created = agent_pool.ensure(client(service), params(), check_mode=True)
    assert created["changed"] is True and created["created"] is True and "token" not in created
    updated = agent_pool.ensure(client(service), params(name="old", description="y"), True)
    assert updated["changed"] is True and updated["pool"]["description"] == "y"
    deleted = agent_pool.ensure(client(service), params(name="old", state="absent"), True)
    assert deleted["changed"] is True
    assert set(service.methods()) == {"GET"}
    assert service.pools["p1"]["description"] == "x"


def test_absent_deletes_with_force_flag_and_is_idempotent():
    service = FakeService([{"id": "p1", "name": "builders"}])
    result = agent_pool.ensure(client(service), params(state="absent", force=True), False)
    assert result["changed"] is True and result["pool"] == {}
    assert service.requests[-1][:2] == ("DELETE", BASE + "/p1?force=true")
    again = agent_pool.ensure(client(service), params(state="absent"), False)
    assert again["changed"] is False


def test_delete_refused_suggests_force():
    service = FakeService([{"id": "p1", "name": "builders"}])
    service.override[("DELETE", BASE + "/p1?force=false")] = reply(
        400, {"error": "pool 'builders' is still referenced by stacks a/b/c"}
    )
    with pytest.raises(agent_pool.PoolError) as err:
        agent_pool.ensure(client(service), params(state="absent"), False)
    assert str(err.value) == (
        "DELETE " + BASE + "/p1?force=false: HTTP 400: pool 'builders' is still referenced by "
        "stacks a/b/c (set force: true to delete it anyway)"
    )


# --- answers that are errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (reply(401, {"error": "bad"}), f"GET {BASE}: the access token was rejected (HTTP 401)"),
        (
            reply(403, {"error": "not yours"}),
            "may not manage pools of organization acme corp (HTTP 403): not yours",
        ),
        (reply(500, None), "GET " + BASE + ": HTTP 500: no details"),
        (Response(502, b"<html>Bad gateway</html>"), "HTTP 502: <html>Bad gateway</html>"),
        (Response(200, b"not json"), "listing the pools of acme corp: the response is not JSON"),
        (reply(200, ["a"]), "listing the pools of acme corp: expected a JSON object"),
        (reply(200, {"pools": []}), "listing the pools of acme corp: no agentPools list"),
        (Response(None, b"", "cannot connect to x: refused"), "cannot connect to x: refused"),
    ],
)
def test_error_answers_become_one_message(answer, message):
    service = FakeService()
    service.override[("GET", BASE)] = answer
    with pytest.raises(agent_pool.PoolError) as err:
        agent_pool.ensure(client(service), params(), False)
    assert message in str(err.value)
    assert ACCESS not in str(err.value)


def test_two_pools_with_one_name_is_an_error():
    service = FakeService([{"id": "p1", "name": "builders"}, {"id": "p2", "name": "builders"}])
    with pytest.raises(agent_pool.PoolError, match=r"2 pools named 'builders' \(ids p1, p2\)"):
        agent_pool.ensure(client(service), params(), False)


def test_create_answer_without_token_is_an_error():
    service = FakeService()
    service.override[("POST", BASE)] = reply(200, {"id": "p9"})
    with pytest.raises(agent_pool.PoolError, match="the answer has no id and tokenValue"):
        agent_pool.ensure(client(service), params(), False)


# --- waiting for agents (injected clock, no sleeping) ---------------------------------------


class Clock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_until_enough_agents_are_online():
    service = FakeService([{"id": "p1", "name": "builders", "agents": [agent("1")]}])
    clock = Clock()
    answers = iter([[agent("1")], [agent("1"), agent("2", "offline")], [agent("1"), agent("2")]])

    original = service.__call__

    def send(method, url, **kw):
        if method == "GET" and url == BASE + "/p1":
            service.pools["p1"]["agents"] = next(answers)
        return original(method, url, **kw)

    c = agent_pool.PoolClient("https://api.example", ACCESS, "acme corp", HTTP, send=send)
    pool = agent_pool.wait_online(c, "p1", 2, timeout=60, delay=5, clock=clock, sleep=clock.sleep)
    assert len(agent_pool.online_agents(pool)) == 2
    assert clock.sleeps == [5, 5]


def test_wait_times_out_naming_who_is_online():
    service = FakeService(
        [{"id": "p1", "name": "builders", "agents": [agent("41"), agent("42", "offline")]}]
    )
    clock = Clock()
    with pytest.raises(agent_pool.PoolError) as err:
        agent_pool.wait_online(
            client(service), "p1", 3, timeout=10, delay=4, clock=clock, sleep=clock.sleep
        )
    assert str(err.value) == "only 1 of 3 agents online in pool 'builders' after 10s (online: h/41)"
    assert clock.sleeps == [4, 4, 4]


# --- the module -----------------------------------------------------------------------------


def run_module(monkeypatch, run_main, args, service):
    monkeypatch.setattr(agent_pool, "request", service)
    return run_main(agent_pool, args)


def test_module_takes_the_access_token_from_the_environment(monkeypatch, run_main):
    service = FakeService()
    monkeypatch.setenv("PULUMI_ACCESS_TOKEN", ACCESS)
    monkeypatch.setenv("PULUMI_BACKEND_URL", "https://api.example")
    result = run_module(
        monkeypatch, run_main, {"organization": "acme corp", "name": "builders"}, service
    )
    assert result["created"] is True
    assert service.requests[0][3]["Authorization"] == "token " + ACCESS


def test_module_argument_errors(monkeypatch, run_main):
    service = FakeService()
    base = {"access_token": ACCESS, "organization": "o", "service_url": "https://api.example"}
    result = run_module(monkeypatch, run_main, {**base, "name": " "}, service)
    assert result["msg"] == "name must not be empty"
    result = run_module(
        monkeypatch, run_main, {**base, "name": "n", "wait_for_online": -1}, service
    )
    assert "must not be negative" in result["msg"]
    result = run_module(
        monkeypatch, run_main, {**base, "name": "n", "service_url": "api.example"}, service
    )
    assert result["msg"] == "service_url: 'api.example' is not an http(s) URL"
    assert service.requests == []
