"""agent_config through real ansible-playbook: the file the real agent accepts, 0600, idempotent,
check mode, masked diff, and the token never in any output, even at -vvv."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import yaml
from test_plugins_common import BIN, run_play

TOKEN = "pul-1111111111111111111111111111111111111111"
NEW_TOKEN = "pul-2222222222222222222222222222222222222222"


def config_task(dest, **extra):
    config = {
        "token": "{{ pool_token }}",
        "service_url": "http://127.0.0.1:9/",
        "deploy_target": "process",
        "polling_interval": "90s",
        "slots": "{{ slots | default(2) }}",
        "env_forward_allowlist": ["AWS_REGION"],
    }
    return {
        "name": "config",
        "selfhosted.workflow_agent.agent_config": {"dest": str(dest), "config": config, **extra},
    }


def agent_check(path: Path) -> subprocess.CompletedProcess:
    """The real agent's own validation of the file."""
    script = BIN / "workflow-agent"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "workflow_agent"]
    return subprocess.run(
        [*cmd, "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )


def test_writes_a_0600_file_the_agent_accepts_and_is_idempotent(tmp_path):
    dest = tmp_path / "etc" / "pulumi-workflow-agent.yaml"
    dest.parent.mkdir()
    first = run_play(tmp_path / "run1", [config_task(dest)], variables={"pool_token": TOKEN})
    assert first.rc == 0, first.output
    assert first["config"]["changed"] is True
    assert first["config"]["config"]["token"] == "***"
    assert first["config"]["config"]["polling_interval"] == "1m30s"
    assert first["config"]["config"]["request_timeout"] == "30s"  # effective: defaults too
    assert TOKEN not in first.output

    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    text = dest.read_text()
    assert text.startswith("# Workflow agent configuration, written by Ansible")
    assert yaml.safe_load(text) == {
        "token": TOKEN,
        "service_url": "http://127.0.0.1:9",
        "deploy_target": "process",
        "env_forward_allowlist": ["AWS_REGION"],
        "polling_interval": "1m30s",
        "slots": 2,
    }
    checked = agent_check(dest)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert TOKEN not in checked.stdout + checked.stderr

    second = run_play(tmp_path / "run2", [config_task(dest)], variables={"pool_token": TOKEN})
    assert second.rc == 0, second.output
    assert second["config"]["changed"] is False
    assert dest.read_text() == text


def test_mode_drift_is_repaired(tmp_path):
    dest = tmp_path / "agent.yaml"
    assert run_play(tmp_path / "a", [config_task(dest)], variables={"pool_token": TOKEN}).rc == 0
    dest.chmod(0o644)
    again = run_play(tmp_path / "b", [config_task(dest)], variables={"pool_token": TOKEN})
    assert again["config"]["changed"] is True
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600


def test_check_mode_predicts_without_writing(tmp_path):
    dest = tmp_path / "agent.yaml"
    assert run_play(tmp_path / "a", [config_task(dest)], variables={"pool_token": TOKEN}).rc == 0
    before = dest.read_bytes()
    run = run_play(
        tmp_path / "b",
        [config_task(dest)],
        variables={"pool_token": TOKEN, "slots": 3},
        check=True,
        diff=True,
    )
    assert run.rc == 0, run.output
    assert run["config"]["changed"] is True
    assert "slots: 2" in run["config"]["diff"]["before"]
    assert "slots: 3" in run["config"]["diff"]["after"]
    assert dest.read_bytes() == before


def test_check_mode_on_a_fresh_host_passes(tmp_path):
    """Directory and owner do not exist yet (the role would create them earlier in the run)."""
    dest = tmp_path / "not-yet" / "agent.yaml"
    run = run_play(
        tmp_path / "a",
        [config_task(dest, owner="no-such-user-wfa", group="no-such-group-wfa")],
        variables={"pool_token": TOKEN},
        check=True,
    )
    assert run.rc == 0, run.output
    assert run["config"]["changed"] is True
    assert not dest.parent.exists()


def test_verbose_diff_run_never_shows_either_token(tmp_path):
    dest = tmp_path / "agent.yaml"
    assert run_play(tmp_path / "a", [config_task(dest)], variables={"pool_token": TOKEN}).rc == 0
    run = run_play(
        tmp_path / "b",
        [config_task(dest)],
        variables={"pool_token": NEW_TOKEN, "slots": 4},
        diff=True,
        verbose=4,
    )
    assert run.rc == 0, run.output
    assert "-slots: 2" in run.stdout and "+slots: 4" in run.stdout
    assert "+token: '*** changed'" in run.stdout
    assert TOKEN not in run.output and NEW_TOKEN not in run.output
    assert NEW_TOKEN in dest.read_text()


def test_bad_config_fails_with_one_message_naming_the_key(tmp_path):
    task = config_task(tmp_path / "agent.yaml")
    task["selfhosted.workflow_agent.agent_config"]["config"]["polling_interval"] = "5 minutes"
    run = run_play(tmp_path / "a", [task], variables={"pool_token": TOKEN}, verbose=3)
    assert run.rc != 0
    assert 'agent_config: config.polling_interval: "5 minutes" is not a duration' in run.output
    assert "Traceback" not in run.output
    assert TOKEN not in run.output
    assert not (tmp_path / "agent.yaml").exists()
