"""The CLI as users run it: check (text and JSON), version, configure, and usage errors."""

import json
import os
import stat
import subprocess
import sys

import pytest
from workflow_agent import __version__
from workflow_agent.config import ALL_KEYS, REFERENCE_KEYS

TOKEN = "pul-d2d2CLITEST0123456789"

# The sample of the upstream configuration reference (/work/shared/seeds/000_*), trimmed of
# comments; `version` is a key of the docs' example that carries no setting.
SAMPLE = f"""\
token: {TOKEN}
version: v0.0.5
service_url: "https://api.pulumi.com/"
working_directory: ""
shared_volume_directory: ""
deploy_target: "docker"
single_run: false
pull_image: true
enabled_workflow_types:
    - deployment
    - insights_scan
    - policy_evaluation
env_forward_allowlist:
    - key_one
    - key_two
oidc_token_file: ""
organization_name: ""
runner_pool_id: ""
token_expiration: ""
polling_interval: "1m"
polling_interval_override: false
job_status_loop_interval: "30s"
request_timeout: "30s"
request_retry_count: 2
request_retry_wait: "20s"
request_retry_max_wait: "2m"
circuit_breaker_failures: 2
circuit_breaker_timeout: "10m"
http_server_port: 8080
health_threshold: ""
syslog: false
"""


def cli(*args, stdin=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_AGENT_")}
    return subprocess.run(
        [sys.executable, "-m", "workflow_agent", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "pulumi-workflow-agent.yaml"
    path.write_text(SAMPLE)
    return path


def test_check_json_is_one_flat_object_with_reference_keys(sample):
    result = cli("check", "--config", str(sample), "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert list(doc) == list(ALL_KEYS)
    assert list(doc)[: len(REFERENCE_KEYS)] == list(REFERENCE_KEYS)
    assert doc["token"] == "***"
    assert doc["service_url"] == "https://api.pulumi.com"
    assert doc["polling_interval"] == "1m0s"
    assert doc["request_retry_max_wait"] == "2m0s"
    assert doc["request_timeout"] == "30s"
    assert doc["drain_timeout"] == "5m0s"
    assert doc["health_threshold"] == ""
    assert doc["env_forward_allowlist"] == ["key_one", "key_two"]
    assert doc["slots"] == 1
    assert TOKEN not in result.stdout + result.stderr


def test_check_text_masks_the_token_and_names_origins(sample):
    result = cli("check", "--config", str(sample))
    assert result.returncode == 0
    assert f"# source: {sample}" in result.stdout
    assert f'token: "***"  # {sample}' in result.stdout
    assert 'request_timeout: "30s"  # ' in result.stdout
    assert 'drain_timeout: "5m0s"  # default' in result.stdout
    assert "# effective health_threshold: 2m0s" in result.stdout
    assert TOKEN not in result.stdout + result.stderr


def test_version():
    for args in (["version"], ["--version"]):
        result = cli(*args)
        assert result.returncode == 0
        assert result.stdout.startswith(f"workflow-agent {__version__} (")


def test_no_command_is_usage_error():
    result = cli()
    assert result.returncode == 2
    assert "a command is required" in result.stderr


def test_configure_writes_0600_without_echoing_the_token(tmp_path):
    out = tmp_path / "agent.yaml"
    result = cli(
        "configure",
        "--token-stdin",
        "--output",
        str(out),
        "--service-url",
        "http://127.0.0.1:9/",
        "--env-forward-allowlist",
        "A,B",
        stdin=TOKEN + "\n",
    )
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert TOKEN not in result.stdout + result.stderr
    check = cli("check", "--config", str(out), "--format", "json")
    doc = json.loads(check.stdout)
    assert doc["service_url"] == "http://127.0.0.1:9"
    assert doc["env_forward_allowlist"] == ["A", "B"]
    again = cli("configure", "--token-stdin", "--output", str(out), stdin=TOKEN + "\n")
    assert again.returncode == 2 and "already exists" in again.stderr


def test_run_with_a_bad_config_exits_2(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text(f"token: {TOKEN}\nslots: many\n")
    result = cli("run", "--config", str(bad))
    assert result.returncode == 2
    assert result.stderr == f'{bad}: slots: "many" is not a whole number\n'
