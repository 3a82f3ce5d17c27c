"""The agent role refuses bad input early, with one clear message, before it changes anything.

Real hosts on the real Docker engine: a systemd container (a supported Debian 12 host) for the
variable checks, and the plain image (no init system) as an unsupported platform.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid

import pytest
from test_plugins_common import BIN, PLAYBOOK_TIMEOUT, collections_path

DOCKER = shutil.which("docker")
TOKEN = "pul-" + "0" * 40
pytestmark = pytest.mark.skipif(
    DOCKER is None or subprocess.run([DOCKER or "docker", "info"], capture_output=True).returncode,
    reason="needs a running Docker engine (make engine)",
)
SYSTEMD_FLAGS = [
    "--cap-add",
    "SYS_ADMIN",
    "--security-opt",
    "seccomp=unconfined",
    "--cgroupns=host",
    "-v",
    "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs",
    "/run",
    "--tmpfs",
    "/run/lock",
]


def container(image: str, flags: list[str], command: list[str]) -> str:
    name = f"wfa-test-preflight-{uuid.uuid4().hex[:8]}"
    cmd = [DOCKER, "run", "-d", "--name", name, *flags, image, *command]
    subprocess.run(cmd, check=True, capture_output=True)
    return name


def systemd_host():
    name = container("local/debian12-systemd:latest", SYSTEMD_FLAGS, ["/sbin/init"])
    boot = [DOCKER, "exec", name, "systemctl", "is-system-running", "--wait"]
    for _ in range(60):  # systemd's bus may not be up yet right after the start
        state = subprocess.run(boot, capture_output=True, text=True).stdout.strip()
        if state in ("running", "degraded"):
            break
        time.sleep(1)
    return name


@pytest.fixture(scope="module")
def debian12():
    name = systemd_host()
    yield name
    subprocess.run([DOCKER, "rm", "-f", name], capture_output=True)


@pytest.fixture
def debian12_with_docker_group():
    name = systemd_host()
    subprocess.run([DOCKER, "exec", name, "groupadd", "--system", "docker"], check=True)
    yield name
    subprocess.run([DOCKER, "rm", "-f", name], capture_output=True)


@pytest.fixture(scope="module")
def plain():
    name = container("local/debian12-plain:latest", ["--init"], ["sleep", "infinity"])
    yield name
    subprocess.run([DOCKER, "rm", "-f", name], capture_output=True)


def apply_role(tmp_path, host: str, **variables) -> subprocess.CompletedProcess:
    """ansible-playbook with the role against the container `host` (from a clean tmp dir)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "play.yml").write_text(
        "- hosts: all\n  gather_facts: true\n  roles: [selfhosted.workflow_agent.agent]\n"
    )
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps({"workflow_agent_token": TOKEN, **variables}))
    vars_file.chmod(0o600)
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(collections_path(tmp_path)),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PIPELINING": "1",
    }
    return subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            f"{host},",
            "-c",
            "community.docker.docker",
            "-e",
            "ansible_python_interpreter=/usr/bin/python3",
            "-e",
            "@" + str(vars_file),
            str(tmp_path / "play.yml"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=PLAYBOOK_TIMEOUT,
        check=False,
    )


def failure(run) -> str:
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    return out


def nothing_changed(host: str) -> None:
    for path in ("/opt/workflow-agent", "/etc/workflow-agent", "/var/lib/workflow-agent"):
        rc = subprocess.run([DOCKER, "exec", host, "test", "-e", path]).returncode
        assert rc != 0, f"{path} exists on {host}"


def test_unsupported_platform(tmp_path, plain):
    out = failure(apply_role(tmp_path, plain))
    assert "supports Debian 12/13 (with systemd) and macOS 13 or later (launchd)" in out
    assert "service manager" in out
    nothing_changed(plain)


@pytest.mark.parametrize(
    "variables, message",
    [
        ({"workflow_agent_instances": ["a", "a"]}, "the name a is used more than once"),
        ({"workflow_agent_instances": [{"name": "a/b"}]}, '"a/b" is not a valid instance name'),
        ({"workflow_agent_instances": [{"slots": 2}]}, '"" is not a valid instance name'),
        ({"workflow_agent_instances": [{"name": "a", "colour": "red"}]}, 'unknown key "colour"'),
        ({"workflow_agent_instances": [{"name": "a", "state": "gone"}]}, "a: state must be"),
        ({"workflow_agent_instances": 100}, "must be a count from 0 to 64 or a list, not 100"),
        (
            {"workflow_agent_config": {"shared_volume_directory": "/x"}},
            "shared_volume_directory (in workflow",
        ),
        ({"workflow_agent_proxy": {"socks": "x"}}, "workflow_agent_proxy.socks. Supported"),
        ({"workflow_agent_service_state": "paused"}, "workflow_agent_service_state must be one of"),
        (  # the argument spec's choices (the agent schema's closed sets)
            {"workflow_agent_deploy_target": "dokcer"},
            "workflow_agent_deploy_target must be one of: None, docker, kubernetes, process",
        ),
        ({"workflow_agent_log_level": "loud"}, "workflow_agent_log_level must be one of"),
        (
            {"workflow_agent_enabled_workflow_types": ["deployment", "deploy"]},
            "Got no match for: deploy",
        ),
        ({"workflow_agent_python": "/usr/bin/python3.99"}, "None of /usr/bin/python3.99 runs on"),
        (  # removed (issue 25): hosts never install the agent from an index
            {"workflow_agent_pip_index_url": "https://pypi.org/simple/"},
            "workflow_agent_pip_index_url is no longer supported",
        ),
        (
            {
                "workflow_agent_instances": [
                    {"name": "a", "http_server_port": 9000},
                    {"name": "b", "http_server_port": 9000},
                ]
            },
            "same http_server_port",
        ),
    ],
)
def test_bad_variables(tmp_path, debian12, variables, message):
    out = failure(apply_role(tmp_path, debian12, **variables))
    assert message in out, out[out.find("msg") :][:600]
    assert "Traceback" not in out
    nothing_changed(debian12)


def test_bad_agent_setting_names_the_key(tmp_path, debian12):
    out = failure(apply_role(tmp_path, debian12, workflow_agent_polling_interval="soon"))
    assert "config.polling_interval" in out
    assert TOKEN not in out


def test_docker_target_without_docker(tmp_path, debian12):
    """The docker target needs Docker on the host; the role says so before installing."""
    out = failure(apply_role(tmp_path, debian12, workflow_agent_deploy_target="docker"))
    assert "uses deploy_target docker, but this host has no 'docker' group" in out
    rc = subprocess.run([DOCKER, "exec", debian12, "test", "-e", "/opt/workflow-agent"]).returncode
    assert rc != 0, "the agent was installed anyway"


def test_docker_target_joins_the_docker_group(tmp_path, debian12_with_docker_group):
    """With Docker's group on the host, the agent's user joins it (instances left stopped:
    this container has no Docker engine for the docker target to reach)."""
    debian12 = debian12_with_docker_group
    run = apply_role(
        tmp_path,
        debian12,
        workflow_agent_deploy_target="docker",
        workflow_agent_service_state="stopped",
    )
    assert run.returncode == 0, run.stdout[-3000:]
    groups = subprocess.run(
        [DOCKER, "exec", debian12, "id", "-nG", "workflow-agent"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "docker" in groups
    unit = subprocess.run(
        [DOCKER, "exec", debian12, "systemctl", "cat", "workflow-agent@1.service"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "After=network-online.target docker.service" in unit
