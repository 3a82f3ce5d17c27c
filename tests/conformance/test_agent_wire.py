"""The real agent (`workflow-agent run`) against the strict server: every request it makes is on
a route the real service is known to serve and in the published (or observed) shape, with
nothing added. A job of three steps runs to success, decided by the step reports alone; step 0,
the reserved checkout slot, is never run nor reported, as upstream's runner skips it."""

from __future__ import annotations

import types

from agent_harness import AgentProcess, wait_for
from conformance import ROUTES, check_request
from strict_server import StrictServer
from test_plugins_common import run_play

TOKEN = "pul-strictserver0123456789abcdef01234567"  # noqa: S105 - a test pool token
SETTINGS = {
    "polling_interval": "300ms",
    "job_status_loop_interval": "1s",
    "request_retry_wait": "100ms",
    "request_retry_max_wait": "200ms",
    "enabled_workflow_types": ["deployment", "insights_scan"],
}
THREE_STEPS = [
    {"name": "build", "run": "echo one > shared.txt; echo built"},
    {"name": "test", "run": 'sleep 2; echo "read $(cat shared.txt)"'},
    {"name": "deploy", "run": "echo deployed"},
]


def agent_for(server: StrictServer, tmp_path, name: str, **settings) -> AgentProcess:
    service = types.SimpleNamespace(pool_token=TOKEN, url=server.url)
    return AgentProcess(service, tmp_path, name, **{**SETTINGS, **settings})


def test_a_three_step_job_runs_to_success_on_the_documented_wire(agents, tmp_path):
    with StrictServer(TOKEN) as server:
        job = server.add_job(THREE_STEPS)
        agent = agent_for(server, tmp_path, "strict")
        agents.append(agent.start())
        assert server.wait(job) == "succeeded", (job.steps, job.logs, agent.stderr[-3000:])
        # A status check and a heartbeat happened while the job ran (step 2 sleeps).
        wait_for(lambda: len(server.exchanges) > 10, what="traffic")
        agent.stop()
        assert server.violations == []
        assert job.steps == {1: "succeeded", 2: "succeeded", 3: "succeeded"}
        assert job.logs == {1: ["built"], 2: ["read one"], 3: ["deployed"]}
        assert 0 not in job.steps and 0 not in job.logs
        assert job.heartbeats >= 1
        used = server.routes_used()
        assert used == {
            # Before the first poll (the bootstrap), and the executor of a deployment.
            "GET /api/background-activities/token",
            "POST /api/background-activities/configuration",
            "GET /api/deployments/executor",
            "GET /api/deployments/poll",
            "POST /api/background-activities/worker/lease/acquire",
            "POST /api/agent-workflows/deployment",
            "GET /api/workflow/jobs/{jobID}",
            "PATCH /api/workflow/jobs/{jobID}/{stepIndex}/status",
            "POST /api/workflow/jobs/{jobID}/{stepIndex}/logs",
            "POST /api/workflow/jobs/{jobID}/heartbeat",
            "GET /api/deployments/{deploymentId}/status",
        }, used
        known = {f"{r.method} {r.template}" for r in ROUTES}
        assert used <= known


def test_a_job_that_cannot_start_is_one_failed_step_on_the_same_wire(agents, tmp_path):
    """A definition the agent refuses reaches the service as step 1 failed, reason in its log:
    no invented call."""
    with StrictServer(TOKEN) as server:
        job = server.add_job(THREE_STEPS, **{"shell": "not a shell"})  # JobDefinition.shell
        agents.append(agent_for(server, tmp_path, "refused").start())
        assert server.wait(job) == "failed"
        assert job.steps == {1: "failed"}
        [line] = job.logs[1]
        assert line.startswith("[workflow-agent] error: refused the job definition: shell:")
        assert server.violations == []


def test_the_oidc_exchange_is_the_published_json_request(agents, tmp_path):
    id_token = tmp_path / "id-token"
    id_token.write_text("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ0ZXN0In0.\n")
    with StrictServer(TOKEN) as server:
        job = server.add_job(THREE_STEPS[:1])
        agent = agent_for(
            server,
            tmp_path,
            "oidc",
            token="",
            oidc_token_file=str(id_token),
            organization_name="acme",
            runner_pool_id="pool-7",
            token_expiration=3600,
        )
        agents.append(agent.start())
        assert server.wait(job) == "succeeded"
        assert server.violations == []
        [exchange] = [e for e in server.exchanges if e.path == "/api/oauth/token"]
        assert exchange.headers["Content-Type"] == "application/json"
        assert b'"expiration": 3600' in exchange.body
        polls = [e for e in server.exchanges if e.path == "/api/deployments/poll"]
        assert polls and all(e.headers["Authorization"] != f"token {TOKEN}" for e in polls)


def test_the_strict_server_catches_what_the_real_service_lacks(tmp_path):
    """Negative control: calls outside the record are violations, and answered 404."""
    import httpx

    with StrictServer(TOKEN) as server:
        job = server.add_job(THREE_STEPS)
        claim = httpx.get(
            f"{server.url}/api/deployments/poll", headers={"Authorization": f"token {TOKEN}"}
        ).json()
        jobs = f"{server.url}/api/workflow/jobs/{job.id}"
        auth = {"Authorization": f"token {claim['jobToken']}"}
        final = httpx.patch(f"{jobs}/status", headers=auth, content=b'{"status": "succeeded"}')
        assert final.status_code == 404
        httpx.patch(f"{jobs}/0/status", headers=auth, content=b'{"status": "skipped"}')
        httpx.post(f"{server.url}/api/oauth/token", data={"grant_type": "x"})
        assert len(server.violations) >= 3, server.violations
        assert any("no such route" in v for v in server.violations)
        assert any("step 0" in v for v in server.violations)
        assert any("application/json" in v for v in server.violations)


def test_agent_pool_module_speaks_the_published_pool_api(tmp_path):
    """The collection's agent_pool module through real ansible-playbook: create, update the
    description, look up, delete; every request is a published one (CreateOrgAgentPoolRequest
    with name and description, also on PATCH), and the module copes with the published
    answers (PatchOrgAgentPoolResponse, integer times)."""
    with StrictServer(TOKEN) as server:

        def task(name, **options):
            args = {
                "service_url": server.url,
                "access_token": "{{ access_token }}",
                "organization": "acme",
                "name": "builders",
                **options,
            }
            return {"name": name, "selfhosted.workflow_agent.agent_pool": args}

        tasks = [
            task("create", description="first", token_dest=str(tmp_path / "token")),
            task("update", description="second"),
            task("delete", state="absent"),
        ]
        run = run_play(tmp_path / "play", tasks, variables={"access_token": server.admin_token})
        assert run.rc == 0, run.output
        assert run["create"]["created"] is True
        assert run["update"]["changed"] is True
        assert run["update"]["pool"]["description"] == "second"
        assert run["delete"]["changed"] is True and server.pools == {}
        assert server.violations == []
        methods = [e.method for e in server.exchanges]
        assert methods.count("PATCH") == 1 and methods.count("POST") == 1
        [patch] = [e for e in server.exchanges if e.method == "PATCH"]
        assert check_request("PATCH", patch.path, patch.headers, patch.body) == []
