"""A `--check --diff` converge on a fresh host passed; here: what it predicted and printed."""

import re

import pytest
from wfa_testlib import EPHEMERAL, hosts

testinfra_hosts = hosts()


@pytest.fixture(scope="module")
def check_log() -> str:
    """The check run's part of Ansible's log: from its play to the end of its recap.

    create.yml ran before it, and testinfra's inventory dumps (which show the scenario's
    variables as written, e.g. the proxy URL) come after it.
    """
    text = (EPHEMERAL / "ansible.log").read_text()
    start = text.rfind("PLAY [Converge]")
    assert start >= 0, "no converge run in the log"
    lines = text[start:].splitlines()
    end = next(n for n, line in enumerate(lines) if "PLAY RECAP" in line) + 1
    while end < len(lines) and ": ok=" in lines[end]:
        end += 1
    return "\n".join(lines[:end])


def recap(log: str, host: str) -> dict[str, int]:
    line = re.search(rf"{re.escape(host)}\s*: (ok=.*)", log).group(1)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def test_check_run_passed_and_predicted_changes(host, check_log):
    counts = recap(check_log, host.backend.get_hostname())
    assert counts["failed"] == 0
    assert counts["unreachable"] == 0
    assert counts["changed"] >= 10, counts


@pytest.mark.parametrize(
    "task",
    [
        "Create the agent's system user",
        "Write each instance's config, validated by the agent's own schema",
        "Install the hardened template unit",
        "Copy the environment archive to the host",
        "Install the environment, hash-checked",
        "Point `current` at this version",
    ],
)
def test_each_step_predicted(check_log, task):
    block = check_log[check_log.index(f": {task}") :]
    block = block[: block.index("TASK [", 1)]
    assert "changed:" in block, block


def test_no_secret_printed(check_log, pool_token):
    assert pool_token not in check_log
    assert "proxy-secret" not in check_log


def test_host_untouched(host):
    for path in (
        "/opt/workflow-agent",
        "/etc/workflow-agent",
        "/var/lib/workflow-agent",
        "/etc/systemd/system/workflow-agent@.service",
    ):
        assert not host.file(path).exists, path
    assert not host.user("workflow-agent").exists
    assert "workflow-agent" not in host.check_output("ps -eo args=")
