"""upstream_agent_info action: the agent's discovery order and schema decide what is adopted.

The host side is stood in for by the dicts the module returns (tests of the unit parsing are in
module_utils/test_upstream_agent.py); the molecule scenario `adopt` runs both for real.
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.selfhosted.workflow_agent.plugins.action import (
    upstream_agent_info as plugin,
)

TOKEN = "pul-0123456789abcdef0123456789abcdef01234567"
BIN = "/root/.pulumi/bin/customer-managed-workflow-agent"
MANAGED = {"shared_volume_directory", "http_server_port", "ca_bundle"}


@pytest.fixture(scope="module")
def schema():
    return plugin.load_schema()[0]


def install(files, environment=None, config_option=None, unit="workflow_agent.service"):
    return {
        "unit": unit,
        "unit_path": "/etc/systemd/system/" + unit,
        "command": "customer-managed-workflow-agent",
        "executable": BIN + "/customer-managed-workflow-agent",
        "user": "root",
        "working_directory": "/root/.pulumi/bin",
        "kill_mode": "process",
        "active": True,
        "enabled": True,
        "environment": environment or {},
        "config_option": config_option,
        "dirs": {"cwd": "/root/.pulumi/bin", "home": "/root", "exe_dir": BIN},
        "candidates": {p: {"text": t, "error": None} for p, t in files.items()},
    }


def test_upstreams_sample_is_adopted_without_its_no_effect_keys(schema):
    text = (
        f"token: {TOKEN}\nservice_url: https://api.pulumi.com/\nworkflow_runners_directory: /x\n"
        "workflow_runners_embeddable: /x/workflow-runner-embeddable\nhttp_server_port: 8090\n"
        "token_expiration: 3600\n"
    )
    reports, settings = plugin.adopt_all(
        schema, [install({BIN + "/pulumi-workflow-agent.yaml": text})], MANAGED
    )
    assert settings == {
        "token": TOKEN,
        "service_url": "https://api.pulumi.com",
        "token_expiration": "1h0m0s",
    }
    (report,) = reports
    assert report["settings"]["token"] == "***"
    assert TOKEN not in repr(reports)
    assert report["config_file"] == BIN + "/pulumi-workflow-agent.yaml"
    assert report["http_server_port"] == 8090
    assert set(report["not_adopted"]) == {
        "workflow_runners_directory",
        "workflow_runners_embeddable",
        "http_server_port",
    }
    assert report["files"] == [
        "/etc/systemd/system/workflow_agent.service",
        BIN,
        BIN + "/pulumi-workflow-agent.yaml",
    ]


def test_discovery_order_is_the_agents_cwd_first_and_the_new_name_wins(schema):
    files = {
        BIN + "/pulumi-workflow-agent.yaml": f"token: {TOKEN}\nlog_level: debug\n",
        "/root/.pulumi/bin/pulumi-workflow-agent.yaml": f"token: {TOKEN}\nlog_level: warning\n",
        "/root/pulumi-deployment-agent.yaml": f"token: {TOKEN}\nlog_level: error\n",
    }
    (report,), settings = plugin.adopt_all(schema, [install(files)], MANAGED)
    assert report["config_file"] == "/root/.pulumi/bin/pulumi-workflow-agent.yaml"
    assert settings["log_level"] == "warning"
    assert report["notices"] == [
        "/root/pulumi-deployment-agent.yaml: not read: /root/.pulumi/bin/pulumi-workflow-agent.yaml"
        " (the current file name) wins over the legacy pulumi-deployment-agent.yaml"
    ]
    assert report["searched"][0] == "/root/.pulumi/bin/pulumi-workflow-agent.yaml"
    assert report["searched"][-1] == BIN + "/pulumi-deployment-agent.yaml"


def test_the_legacy_name_alone_is_read(schema):
    (report,), settings = plugin.adopt_all(
        schema, [install({"/etc/pulumi-deployment-agent.yaml": f"token: {TOKEN}\n"})], MANAGED
    )
    assert report["config_file"] == "/etc/pulumi-deployment-agent.yaml"
    assert settings == {"token": TOKEN}


def test_the_units_environment_overlays_the_file(schema):
    inst = install(
        {BIN + "/pulumi-workflow-agent.yaml": f"token: {TOKEN}\nslots: 1\n"},
        environment={"PULUMI_AGENT_SLOTS": "3", "PATH": "/bin"},
    )
    _reports, settings = plugin.adopt_all(schema, [inst], MANAGED)
    assert settings == {"token": TOKEN, "slots": 3}


def test_a_config_option_names_the_file(schema):
    files = {
        "/srv/a.yaml": f"token: {TOKEN}\n",
        BIN + "/pulumi-workflow-agent.yaml": "token: x\n",
    }
    (report,), _settings = plugin.adopt_all(
        schema, [install(files, config_option="/srv/a.yaml")], MANAGED
    )
    assert report["config_file"] == "/srv/a.yaml"
    with pytest.raises(AnsibleActionFail, match="--config /srv/b.yaml: no such file"):
        plugin.adopt_all(schema, [install(files, config_option="/srv/b.yaml")], MANAGED)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"token: {TOKEN}\npolling_intervall: 1s\n", "polling_intervall: unknown key"),
        (f"token: {TOKEN}\ndeploy_target: ecs\n", "deploy_target"),
        ("token: [\n", "line 2: invalid YAML"),
        ("", "the file is empty"),
    ],
)
def test_a_config_the_agent_refuses_fails_naming_the_file_and_key(schema, text, message):
    path = BIN + "/pulumi-workflow-agent.yaml"
    with pytest.raises(AnsibleActionFail) as err:
        plugin.adopt_all(schema, [install({path: text})], MANAGED)
    msg = str(err.value)
    assert msg.startswith(f"upstream_agent_info: {path}: ")
    assert message in msg
    assert TOKEN not in msg


def test_no_config_and_no_token_names_where_it_looked(schema):
    with pytest.raises(
        AnsibleActionFail,
        match=r"workflow_agent.service: no config file found \(looked in: /root/.pulumi",
    ):
        plugin.adopt_all(schema, [install({})], MANAGED)


def test_installs_with_different_settings_are_refused(schema):
    a = install({BIN + "/pulumi-workflow-agent.yaml": f"token: {TOKEN}\n"})
    b = install(
        {"/etc/pulumi-workflow-agent.yaml": f"token: {TOKEN}\nslots: 2\n"}, unit="b.service"
    )
    b["dirs"] = {"cwd": "/", "home": "/root", "exe_dir": "/opt"}
    with pytest.raises(
        AnsibleActionFail,
        match="workflow_agent.service .* and b.service .* run with different settings",
    ):
        plugin.adopt_all(schema, [a, b], MANAGED)
    same = install({BIN + "/pulumi-workflow-agent.yaml": f"token: {TOKEN}\n"}, unit="c.service")
    reports, settings = plugin.adopt_all(schema, [a, same], MANAGED)
    assert [r["unit"] for r in reports] == ["workflow_agent.service", "c.service"]
    assert settings == {"token": TOKEN}


def test_nothing_found_adopts_nothing(schema):
    assert plugin.adopt_all(schema, [], MANAGED) == ([], {})
