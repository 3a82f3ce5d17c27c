"""After adopting a busy upstream install: its job finished, one agent polls, its files stay."""

import json
import re

import pytest
import yaml
from wfa_testlib import CONFIG_DIR, EPHEMERAL, hosts, journal_tail, show

testinfra_hosts = hosts()
UPSTREAM = "workflow_agent.service"
UPSTREAM_DIR = "/root/.pulumi/bin/customer-managed-workflow-agent"


@pytest.fixture(scope="module")
def upstream_journal(host) -> list[dict]:
    """systemd's messages about upstream's unit (once stopped and disabled, systemd unloads the
    unit, and `systemctl show` no longer has its timestamps or result)."""
    out = host.check_output(f"journalctl -o json --no-pager UNIT={UPSTREAM}")
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture(scope="module")
def upstream_stop(upstream_journal) -> float:
    """When systemd began to stop upstream's unit."""
    stops = [
        int(e["__REALTIME_TIMESTAMP"]) / 1e6
        for e in upstream_journal
        if str(e.get("MESSAGE", "")).startswith("Stopping")
    ]
    assert len(stops) == 1, upstream_journal
    return stops[0]


@pytest.fixture(scope="module")
def job(emulator) -> dict:
    (found,) = emulator.wait_jobs([(EPHEMERAL / "job-id").read_text().strip()])
    return found


@pytest.fixture(scope="module")
def check_log() -> str:
    """The `check` run's part of Ansible's log (the first converge play, up to its recap)."""
    text = (EPHEMERAL / "ansible.log").read_text()
    start = text.find("PLAY [Converge]")
    assert start >= 0, "no converge run in the log"
    return text[start : text.index("PLAY RECAP", start) + 400]


def test_the_job_in_flight_during_the_switch_succeeded_on_upstreams_agent(host, job, upstream_stop):
    hostname = host.check_output("hostname")
    assert job["status"] == "succeeded", job
    assert job["agent"].startswith(hostname + "/") and job["agent"] != f"{hostname}/1", job
    assert job["claimed_at"] < upstream_stop < job["finished_at"], (job, upstream_stop)


def test_upstreams_unit_is_stopped_and_disabled(host, upstream_journal):
    unit = host.service(UPSTREAM)
    assert not unit.is_running
    assert not unit.is_enabled
    props = host.check_output(
        f"systemctl show -p ActiveState -p UnitFileState -p Result {UPSTREAM}"
    )
    assert "ActiveState=inactive" in props
    assert "UnitFileState=disabled" in props
    messages = [str(e.get("MESSAGE", "")) for e in upstream_journal]
    # It exited after its drain, not killed at the stop timeout.
    assert any("Deactivated successfully" in m for m in messages), messages
    assert not any("timed out" in m or "Killing" in m for m in messages), messages
    assert not host.file(f"/run/systemd/system/{UPSTREAM}.d/50-workflow-agent-adopt.conf").exists


def test_upstreams_files_are_kept(host):
    assert host.file(f"/etc/systemd/system/{UPSTREAM}").is_file
    assert host.file(f"{UPSTREAM_DIR}/customer-managed-workflow-agent").is_file
    assert host.file(f"{UPSTREAM_DIR}/pulumi-workflow-agent.yaml").is_file


def test_ours_runs_and_is_the_only_agent_polling(host, emulator):
    assert host.service("workflow-agent@1.service").is_running, journal_tail(host, "1")
    assert show(host, "1", "MainPID")["MainPID"] != "0"
    hostname = host.check_output("hostname")
    agents = emulator.wait_agents({f"{hostname}/1"})
    assert set(agents) == {f"{hostname}/1"}, agents
    ran = emulator.run_on_each({f"{hostname}/1"})
    assert set(ran) == {f"{hostname}/1"}


def test_the_config_adopts_upstreams_settings_and_the_inventory_wins(host, pool_token):
    conf = yaml.safe_load(host.file(f"{CONFIG_DIR}/1.yaml").content_string)
    service_url = json.loads((EPHEMERAL / "emulator.json").read_text())["service_url"]
    assert conf["token"] == pool_token  # from upstream's file: the inventory has none
    assert conf["service_url"] == service_url
    assert conf["log_level"] == "debug"  # upstream's, not set in the inventory
    assert conf["polling_interval"] == "1s"  # the inventory's, over upstream's 5s
    assert conf["http_server_port"] == 8090
    assert "workflow_runners_directory" not in conf  # no effect here: not adopted
    assert "working_directory" not in conf  # no effect here: the role no longer writes it


def test_check_mode_only_reported(check_log, pool_token):
    block = check_log[check_log.index("Show what would be adopted") :]
    block = block[: block.index("TASK [", 1)]
    assert "workflow_agent.service" in block
    assert re.search(r"""["']token["']: ["']\*\*\*["']""", block), block
    assert pool_token not in check_log
    stop = check_log[check_log.index("Stop and disable the upstream unit") :]
    stop = stop[: stop.index("TASK [", 1)]
    assert "workflow_agent.service" in stop
    assert "changed:" in stop, stop  # predicted, not done: the job only ends once it is
