"""The emulator answers in the published shapes, and nothing more: every answer of every route
it shares with the real service is checked against the closed schemas (conformance.py), first
route by route, then on all the traffic of real agents running jobs through a recording proxy
(whose requests are checked too)."""

from __future__ import annotations

import json

import httpx
from agent_harness import AgentProcess
from conformance import check_request, check_response
from recorder import Recorder

STEPS = [
    {"name": "build", "run": "echo built", "workingDir": "."},
    {"name": "test", "run": "sleep 1.5; echo tested"},
    {"name": "deploy", "run": "echo deployed"},
]


class Checked:
    """An httpx client that checks every answer of the emulator as it comes."""

    def __init__(self, emu, token: str) -> None:
        self.http = httpx.Client(
            base_url=emu.url, headers={"Authorization": f"token {token}"}, timeout=30
        )
        self.problems: list[str] = []
        self.seen: set[tuple[str, int]] = set()

    def __call__(self, method: str, path: str, **kw) -> httpx.Response:
        resp = self.http.request(method, path, **kw)
        self.seen.add((f"{method} {resp.request.url.path}", resp.status_code))
        self.problems += check_response(
            method, resp.request.url.path, resp.status_code, resp.content
        )
        return resp


def test_pool_rest_api_answers_are_the_published_schemas(emu):
    rest = Checked(emu, emu.admin_token)
    base = f"/api/orgs/{emu.org}/agent-pools"
    created = rest("POST", base, json={"name": "linux", "description": "ci"}).json()
    rest("GET", base)  # a pool never seen: lastSeen 0, no lastDeployment
    rest("GET", f"{base}/{created['id']}")
    # Agents seen and a job claimed: agents[], lastSeen and lastDeployment filled in.
    agent = httpx.Client(
        base_url=emu.url, headers={"Authorization": f"token {created['tokenValue']}"}, timeout=30
    )
    emu.create_job(STEPS, pool=created["id"])
    assert agent.get("/api/deployments/poll").status_code == 200
    listed = rest("GET", base).json()
    assert any("lastDeployment" in p for p in listed["agentPools"])
    assert rest("GET", f"{base}/{created['id']}").json()["agents"]
    patch = {"name": "linux", "description": "builders"}
    assert rest("PATCH", f"{base}/{created['id']}", json=patch).json() == patch
    assert rest("PATCH", f"{base}/{created['id']}", json={"name": "x"}).status_code == 400
    assert rest("DELETE", f"{base}/{created['id']}?force=true").status_code == 204
    assert rest.problems == []
    assert len(rest.seen) >= 6


def test_agent_and_job_routes_answer_the_published_schemas(emu):
    emu.create_job(STEPS, service_env=True, **{"shell": "bash"})
    emu.create_job(STEPS, type="insights_scan")
    pool = Checked(emu, emu.pool_token)
    claim = pool("GET", "/api/deployments/poll").json()
    assert pool("GET", "/api/deployments/poll").status_code == 204
    pool("POST", "/api/agent-workflows/deployment", json={"jobID": claim["jobID"]})
    pool("GET", f"/api/deployments/{claim['typeSpecificID']}/status")
    pool("POST", "/api/background-activities/worker/lease/acquire")
    job = Checked(emu, claim["jobToken"])
    jobs = f"/api/workflow/jobs/{claim['jobID']}"
    definition = job("GET", jobs).json()
    assert definition["shell"] == "bash" and definition["steps"][1]["workingDir"] == "."
    line = {"t": "2026-01-02T03:04:05Z", "l": "x"}
    for index in (1, 2, 3):
        job("PATCH", f"{jobs}/{index}/status", content=b'{"status": "running"}')
        job("POST", f"{jobs}/{index}/logs", content=json.dumps({"offset": 0, "lines": [line]}))
        job("POST", f"{jobs}/heartbeat")
        job("PATCH", f"{jobs}/{index}/status", content=b'{"status": "succeeded"}')
    assert pool("GET", "/api/deployments/executor").content.startswith(b"#!")
    assert pool("GET", f"/api/deployments/{claim['typeSpecificID']}/status").json() == "succeeded"
    wrong = Checked(emu, "pul-not-a-pool-token-000000")
    assert wrong("GET", "/api/deployments/poll").status_code == 403  # the spec's one error
    grant = {
        "audience": f"urn:pulumi:org:{emu.org}",
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": emu.mint_oidc(),
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "requested_token_type": "urn:pulumi:token-type:access_token:runner",
        "scope": "runner:default",
        "expiration": 600,
    }
    anonymous = httpx.post(f"{emu.url}/api/oauth/token", json=grant, timeout=30)
    assert check_response("POST", "/api/oauth/token", 200, anonymous.content) == []
    assert pool.problems == [] and job.problems == [] and wrong.problems == []


def test_real_agents_traffic_is_on_the_record_both_ways(emu, agents, tmp_path):
    """Agents running real jobs (one fails, one cannot start, one in OIDC mode) through a
    recording proxy: each request of theirs and each answer of the emulator checks out."""
    id_token = tmp_path / "id-token"
    id_token.write_text(emu.mint_oidc())
    with Recorder(("127.0.0.1", emu.port)) as recorder:
        proxy = {"HTTP_PROXY": recorder.url}
        common = {"job_status_loop_interval": "1s", "enabled_workflow_types": ["deployment"]}
        agents.append(AgentProcess(emu, tmp_path, "token", **common).start(env=proxy))
        oidc = {
            "token": "",
            "oidc_token_file": str(id_token),
            "organization_name": emu.org,
            "runner_pool_id": "default",
        }
        agents.append(AgentProcess(emu, tmp_path, "oidc", **common, **oidc).start(env=proxy))
        ids = [
            emu.create_job(STEPS),
            emu.create_job([{"name": "fails", "run": "exit 3"}, *STEPS]),
            emu.create_job(STEPS, **{"shell": "no shell"}),  # refused: cannot start
            emu.create_job(STEPS, service_env=True),
        ]
        done = {j["id"]: j["status"] for j in emu.wait_jobs(ids, timeout=120)}
        assert list(done.values()) == ["succeeded", "failed", "failed", "succeeded"], done
        for agent in agents:
            agent.stop()
        exchanges = recorder.recorded()
    problems = []
    for ex in exchanges:
        problems += check_request(ex.method, ex.path, ex.request_headers, ex.request_body)
        problems += check_response(ex.method, ex.path, ex.status, ex.response_body)
    assert problems == []
    paths = {ex.path.split("/")[2] for ex in exchanges}
    assert {"oauth", "deployments", "workflow", "agent-workflows"} <= paths
