"""The agent role's phase tags (workflow_agent_install, _configure, _run; the role's README), on
a real Debian 12 systemd container: an installed host whose install is out of date gets no
wheelhouse with --skip-tags workflow_agent_install, while its configs still change; with
--tags workflow_agent_install the install happens and the configs stay as they were."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from test_plugins_common import BIN, PLAYBOOK_TIMEOUT, collections_path
from test_role_preflight import DOCKER, TOKEN, systemd_host

pytestmark = pytest.mark.skipif(
    DOCKER is None or subprocess.run([DOCKER or "docker", "info"], capture_output=True).returncode,
    reason="needs a running Docker engine (make engine)",
)


@pytest.fixture
def host():
    name = systemd_host()
    yield name
    subprocess.run([DOCKER, "rm", "-f", name], capture_output=True)


def role(tmp_path, host: str, *args: str, **variables) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "play.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  roles: [selfhosted.workflow_agent.agent]\n"
    )
    vars_file = tmp_path / "vars.json"
    # Stopped: no service for the instances to reach here; the phases are what is tested.
    settings = {
        "workflow_agent_token": TOKEN,
        "workflow_agent_service_state": "stopped",
        "workflow_agent_deploy_target": "process",  # no Docker in the container
    }
    vars_file.write_text(json.dumps({**settings, **variables}))
    vars_file.chmod(0o600)
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(collections_path(tmp_path)),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PIPELINING": "1",
    }
    cmd = [str(BIN / "ansible-playbook"), "-i", f"{host},", "-c", "community.docker.docker"]
    cmd += ["-e", "ansible_python_interpreter=/usr/bin/python3", "-e", "@" + str(vars_file)]
    run = subprocess.run(
        [*cmd, *args, str(tmp_path / "play.yml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=PLAYBOOK_TIMEOUT,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return run.stdout


def sh(host: str, script: str) -> str:
    cmd = [DOCKER, "exec", host, "sh", "-c", script]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def slots(host: str) -> int:
    return yaml.safe_load(sh(host, "cat /etc/workflow-agent/1.yaml"))["slots"]


def test_skip_install_downloads_nothing_and_still_configures(tmp_path, host):
    role(tmp_path / "install", host, workflow_agent_slots=1)
    # The install out of date: the environment archive gone, the virtualenv's record of it too.
    sh(host, "rm -rf /opt/workflow-agent/wheelhouse /opt/workflow-agent/*/.wheelhouse")

    out = role(
        tmp_path / "skip", host, "--skip-tags", "workflow_agent_install", workflow_agent_slots=2
    )
    assert "Build the wheelhouse" not in out
    assert "Copy the environment archive" not in out
    assert sh(host, "test -e /opt/workflow-agent/wheelhouse || echo absent").strip() == "absent"
    assert slots(host) == 2  # configured all the same

    out = role(tmp_path / "only", host, "--tags", "workflow_agent_install", workflow_agent_slots=3)
    assert "Copy the environment archive to the host" in out
    assert sh(host, "ls /opt/workflow-agent/wheelhouse").strip()
    assert sh(host, "cat /opt/workflow-agent/current/.wheelhouse").strip()
    assert slots(host) == 2  # the configs are workflow_agent_configure's
