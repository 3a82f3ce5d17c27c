"""agent_info through real ansible-playbook against real agent processes and the real emulator."""

from __future__ import annotations

import signal
import socket

from agent_harness import WAIT, wait_for
from test_plugins_common import run_play


def info_task(urls, **options):
    return {"name": "info", "selfhosted.workflow_agent.agent_info": {"url": urls, **options}}


def url_of(agent) -> str:
    return f"http://127.0.0.1:{agent.port}"


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_reports_health_slots_and_jobs_of_running_agents(emu, make_agent, tmp_path):
    a = make_agent("a").start()
    b = make_agent("b", slots=2).start()
    urls = [url_of(a), url_of(b) + "/"]

    run = run_play(tmp_path / "1", [info_task(urls, retries=60, delay=1, require_healthy=True)])
    assert run.rc == 0, run.output
    res = run["info"]
    assert res["changed"] is False
    assert res["healthy"] is True and res["unhealthy"] == []
    assert res["slots"] == 3 and res["busy_slots"] == 0
    first, second = res["instances"]
    assert first["url"] == url_of(a) and second["url"] == url_of(b)  # order kept, slash dropped
    assert (first["instance"], second["instance"]) == ("a", "b")
    assert first["status"] == "healthy" and first["status_code"] == 200
    assert first["last_activity"] and first["current_time"]
    assert first["deploy_target"] == "process" and first["version"]
    assert (first["slots"], second["slots"]) == (1, 2)
    assert first["draining"] is False and first["circuit_breaker_open"] is False
    assert first["metrics_error"] is None

    job = emu.create_job(steps=[{"name": "ok", "run": "echo done"}])
    [done] = emu.wait_jobs([job], timeout=WAIT)
    assert done["status"] == "succeeded"
    # The agent counts the job just after its last step report, which ended it for the emulator.
    wait_for(
        lambda: any("workflow_agent_jobs_total{" in x.get("/metrics")[1] for x in (a, b)),
        what="the job in an agent's metrics",
    )
    run = run_play(tmp_path / "2", [info_task(urls)], check=True)
    assert run.rc == 0, run.output
    instances = run["info"]["instances"]
    assert sum(i["jobs_total"] for i in instances) == 1
    ran = next(i for i in instances if i["jobs_total"] == 1)
    assert ran["jobs"]["succeeded"] == 1
    assert ran["last_claim"] is not None


def test_unreachable_instance_fails_the_gate_naming_it(emu, make_agent, tmp_path):
    a = make_agent("a").start()
    wait_for(lambda: a.get("/healthz")[0] == 200, what="agent healthy")
    dead = closed_port_url()

    run = run_play(tmp_path / "1", [info_task([url_of(a), dead])])
    assert run.rc == 0, run.output
    res = run["info"]
    assert res["healthy"] is False and res["unhealthy"] == [dead]
    down = res["instances"][1]
    assert down["status"] == "unreachable" and down["status_code"] is None
    assert "cannot connect" in down["error"]
    assert down["slots"] is None and down["metrics_error"] == down["error"]

    run = run_play(
        tmp_path / "2", [info_task([url_of(a), dead], retries=1, delay=0.5, require_healthy=True)]
    )
    assert run.rc != 0
    msg = run["info"]["msg"]
    assert msg.startswith("1 of 2 agent instances not healthy after 2 attempts: " + dead)
    assert len(run["info"]["instances"]) == 2


def test_unhealthy_agent_with_open_breaker_then_recovered(emu, make_agent, tmp_path):
    agent = make_agent(
        "a", health_threshold="2s", circuit_breaker_failures=2, circuit_breaker_timeout="2s"
    ).start()
    wait_for(lambda: agent.get("/healthz")[0] == 200, what="agent healthy")
    emu.faults(rate_503=1.0)  # the service fails every call: no more activity
    wait_for(lambda: agent.get("/healthz")[0] == 503, what="agent unhealthy")

    run = run_play(tmp_path / "1", [info_task([url_of(agent)], require_healthy=True)])
    assert run.rc != 0
    [inst] = run["info"]["instances"]
    assert inst["healthy"] is False
    assert (inst["status"], inst["status_code"]) == ("unhealthy", 503)
    assert inst["metrics_error"] is None and inst["slots"] == 1
    assert "1 of 1 agent instances not healthy after 1 attempt: " in run["info"]["msg"]

    emu.faults()  # the service is back: the gate waits for the agent to recover
    run = run_play(
        tmp_path / "2", [info_task([url_of(agent)], retries=120, delay=1, require_healthy=True)]
    )
    assert run.rc == 0, run.output
    assert run["info"]["instances"][0]["status"] == "healthy"


def test_draining_agent_reports_its_busy_slot(emu, make_agent, tmp_path):
    agent = make_agent("a").start()
    gate = tmp_path / "release"
    job = emu.create_job(
        steps=[{"name": "wait", "run": f"while [ ! -e '{gate}' ]; do sleep 0.1; done"}]
    )
    wait_for(lambda: emu.job(job)["status"] == "running", what="job running")
    agent.signal(signal.SIGTERM)
    wait_for(lambda: agent.get("/readyz")[0] == 503, what="agent draining")

    run = run_play(tmp_path / "1", [info_task([url_of(agent)])])
    assert run.rc == 0, run.output
    [inst] = run["info"]["instances"]
    assert inst["draining"] is True
    assert inst["busy_slots"] == 1 and inst["busy_slots_by_type"]["deployment"] == 1

    gate.touch()
    [done] = emu.wait_jobs([job], timeout=WAIT)
    assert done["status"] == "succeeded"
    assert agent.wait() == 0
