"""upstream_agent_info module (host side) on a stand-in systemd tree, then through the action's
choice and validation (here, not under modules/: the modules context has no ansible.errors)."""

from __future__ import annotations

import os

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.action import (
    upstream_agent_info as action,
)
from ansible_collections.selfhosted.workflow_agent.plugins.modules import upstream_agent_info

TOKEN = "pul-0123456789abcdef0123456789abcdef01234567"


def run_module(monkeypatch, run_main, args):
    def run_command(self, argv, **_kw):
        assert argv[:2] == ["systemctl", "show"]
        active = "active" if argv[-1] == "workflow_agent.service" else "inactive"
        return 0, f"ActiveState={active}\nUnitFileState=enabled\n", ""

    monkeypatch.setattr(upstream_agent_info.AnsibleModule, "run_command", run_command)
    return run_main(upstream_agent_info, args)


@pytest.fixture
def host(tmp_path, monkeypatch):
    """/etc/systemd/system and /lib/systemd/system stand-ins, and root's upstream install."""
    etc, lib, home = tmp_path / "etc-units", tmp_path / "lib-units", tmp_path / "root"
    bindir = home / ".pulumi/bin/customer-managed-workflow-agent"
    for d in (etc, lib, bindir):
        d.mkdir(parents=True)
    (bindir / "customer-managed-workflow-agent").write_text("#!/bin/sh\n")
    (bindir / "pulumi-workflow-agent.yaml").write_text(f"token: {TOKEN}\nlog_level: debug\n")
    unit = (
        f"[Service]\nWorkingDirectory={home}/.pulumi/bin/\n"
        f"ExecStart={bindir}/customer-managed-workflow-agent run\nKillMode=process\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    (etc / "workflow_agent.service").write_text(unit)
    (lib / "workflow_agent.service").write_text(unit.replace("process", "mixed"))  # shadowed
    (etc / "old.service").symlink_to(os.devnull)  # masked
    (lib / "old.service").write_text(unit)
    (etc / "sshd.service").write_text("[Service]\nExecStart=/usr/sbin/sshd -D\n")
    monkeypatch.setattr(upstream_agent_info, "UNIT_DIRS", (str(etc), str(lib)))
    monkeypatch.setattr(upstream_agent_info, "home_of", lambda user: str(home))
    return {"etc": etc, "bindir": bindir}


def test_finds_the_ami_install_and_its_config(monkeypatch, run_main, host):
    result = run_module(monkeypatch, run_main, {"exclude": ["http_server_port"]})
    assert result["changed"] is False
    (found,) = result["installs"]
    assert found["unit_path"] == str(host["etc"] / "workflow_agent.service")
    assert found["kill_mode"] == "process"
    assert found["active"] is True and found["enabled"] is True
    config = str(host["bindir"] / "pulumi-workflow-agent.yaml")
    assert list(found["candidates"]) == [config]
    schema = action.load_schema()[0]
    (report,), settings = action.adopt_all(schema, result["installs"], {"http_server_port"})
    assert settings == {"token": TOKEN, "log_level": "debug"}
    assert report["config_file"] == config
    assert report["settings"] == {"token": "***", "log_level": "debug"}


def test_an_unreadable_unit_fails_with_its_path(monkeypatch, run_main, host):
    (host["etc"] / "bad.service").write_text(
        "[Service]\nExecStart=/x/customer-managed-workflow-agent 'run\n"
    )
    result = run_module(monkeypatch, run_main, {})
    assert result["failed"] is True
    assert result["msg"].startswith(str(host["etc"] / "bad.service") + ": ExecStart=")


def test_nothing_found_on_a_host_without_units(monkeypatch, run_main, tmp_path):
    monkeypatch.setattr(upstream_agent_info, "UNIT_DIRS", (str(tmp_path / "none"),))
    assert run_module(monkeypatch, run_main, {})["installs"] == []
