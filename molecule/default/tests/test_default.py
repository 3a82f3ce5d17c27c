"""Two instances on one systemd host, after converge and an idempotent second run."""

import pytest
from wfa_testlib import CONFIG_DIR, EPHEMERAL, healthz, hosts, instances, journal_tail, show, unit

testinfra_hosts = hosts()
PORT_BASE = 8080


def test_two_instances_configured(host):
    assert instances(host) == ["1", "2"]


@pytest.mark.parametrize("name", ["1", "2"])
def test_unit_active_and_enabled(host, name):
    svc = host.service(unit(name))
    assert svc.is_running, journal_tail(host, name)
    assert svc.is_enabled


@pytest.mark.parametrize("name", ["1", "2"])
def test_unit_is_hardened_and_drains(host, name):
    props = show(
        host,
        name,
        "User",
        "NoNewPrivileges",
        "ProtectSystem",
        "ProtectHome",
        "PrivateTmp",
        "ReadWritePaths",
        "Restart",
        "KillMode",
        "KillSignal",
        "TimeoutStopUSec",
        "Environment",
        "ExecStart",
    )
    assert props["User"] == "workflow-agent"
    assert props["NoNewPrivileges"] == "yes"
    assert props["ProtectSystem"] == "strict"
    assert props["ProtectHome"] == "yes"
    assert props["PrivateTmp"] == "yes"
    # The instance's directory and (process target) the job user's home.
    assert set(props["ReadWritePaths"].split()) == {
        f"/var/lib/workflow-agent/{name}",
        "/var/lib/workflow-agent/job-home",
    }
    assert props["Restart"] == "always"
    assert props["KillMode"] == "mixed"
    assert props["KillSignal"] == "15"
    # drain_timeout 2m (the scenario's) + the 30 s margin
    assert props["TimeoutStopUSec"] == "2min 30s"
    assert f"WORKFLOW_AGENT_INSTANCE={name}" in props["Environment"].split()
    assert "--config /etc/workflow-agent/" + name + ".yaml" in props["ExecStart"]


def test_agent_user_cannot_log_in(host):
    user = host.user("workflow-agent")
    assert user.exists
    assert user.shell in ("/usr/sbin/nologin", "/sbin/nologin")


@pytest.mark.parametrize("name", ["1", "2"])
def test_config_is_roots_and_readable_by_the_agent_group_only(host, name):
    cfg = host.file(f"{CONFIG_DIR}/{name}.yaml")
    assert (cfg.user, cfg.group, cfg.mode) == ("root", "workflow-agent", 0o640)
    assert host.file(CONFIG_DIR).mode == 0o750


def test_token_only_in_the_config_files(host, pool_token):
    # The token is really in use (so the checks below are not vacuous) ...
    assert pool_token in host.check_output(f"cat {CONFIG_DIR}/1.yaml")
    # ... and appears neither on a command line, in an environment, nor in the journal.
    assert pool_token not in host.check_output("ps -eo args=")
    environments = host.run("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'").stdout
    assert "WORKFLOW_AGENT_INSTANCE=1" in environments
    assert pool_token not in environments
    assert pool_token not in host.check_output("journalctl --no-pager -o cat")
    assert pool_token not in host.check_output(f"cat {CONFIG_DIR}/environment")
    assert pool_token not in host.check_output("systemctl cat 'workflow-agent@1.service'")


@pytest.mark.parametrize("index, name", [(0, "1"), (1, "2")])
def test_healthz_answers_200_on_each_port(host, index, name):
    status, body = healthz(host, PORT_BASE + index)
    assert status == 200, journal_tail(host, name)
    assert body["status"] == "healthy"


def test_emulator_sees_both_agents_online(host, emulator):
    hostname = host.check_output("hostname")
    agents = emulator.wait_agents({f"{hostname}/1", f"{hostname}/2"}, hostname=hostname)
    assert set(agents) == {f"{hostname}/1", f"{hostname}/2"}
    assert {a["version"] for a in agents.values()} == {
        host.check_output("/opt/workflow-agent/current/bin/workflow-agent --version").split()[1]
    }


def test_a_job_runs_on_each_instance(host, emulator):
    hostname = host.check_output("hostname")
    expected = {f"{hostname}/1", f"{hostname}/2"}
    ran = emulator.run_on_each(expected)
    assert set(ran) == expected
    for jobs in ran.values():
        # process target: the job ran as the job user, not as the agent's
        assert jobs[0]["steps"][0]["logs"] == ["ran as workflow-agent-job"]


def test_proxy_and_ca_bundle_reach_the_agents(host):
    ca = (EPHEMERAL / "ca.pem").read_text()
    bundle = host.file(f"{CONFIG_DIR}/ca-bundle.pem")
    assert bundle.content_string.strip() == ca.strip()
    assert f"ca_bundle: {CONFIG_DIR}/ca-bundle.pem" in host.check_output(f"cat {CONFIG_DIR}/1.yaml")
    pid = show(host, "1", "MainPID")["MainPID"]
    env = dict(
        line.split("=", 1)
        for line in host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/environ").splitlines()
        if "=" in line
    )
    assert env["HTTPS_PROXY"] == env["https_proxy"] == "http://proxy.invalid:3128"
    assert env["NO_PROXY"] == "localhost,127.0.0.1"
    # The environment file holding them is root's, readable by the agent's group only (proxy
    # URLs may carry credentials).
    envfile = host.file(f"{CONFIG_DIR}/environment")
    assert (envfile.user, envfile.group, envfile.mode) == ("root", "workflow-agent", 0o640)
