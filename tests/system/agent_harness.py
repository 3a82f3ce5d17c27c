"""Helpers of the system tests: real `workflow-agent run` processes and deadline waits.

Import these from `agent_harness`, not from `conftest`: `make pytest` runs several test trees
in one session, and the module name `conftest` then belongs to whichever tree loaded last.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
from workflow_emulator.testing import Emulator  # noqa: E402

WAIT = 120.0  # seconds: generous deadlines for a loaded 2-core machine

# A job shaped like a real deployment, for every target: the agent fetched the Pulumi
# Deployments executor with the pool's credentials and placed it in the job
# ($PULUMI_DEPLOY_EXECUTOR); a step's NAME=value line in $PULUMI_ENV reaches the later steps;
# the claim's OIDC token is PULUMI_OIDC_TOKEN. Step 0, the checkout slot, is never run. The job
# needs `shell: bash` (the job images here have bash).
DEPLOYMENT_STEPS = [
    {
        "name": "executor",
        "run": 'test -x "$PULUMI_DEPLOY_EXECUTOR" && head -c 2 "$PULUMI_DEPLOY_EXECUTOR"; echo',
    },
    {"name": "pulumi env", "run": 'echo "GREETING=hello from an earlier step" >> "$PULUMI_ENV"'},
    {
        "name": "later step",
        "run": 'echo "$GREETING"; test -n "$PULUMI_OIDC_TOKEN" && echo "oidc token ready"',
    },
]


def check_deployment_logs(steps: list[dict]) -> None:
    """The logs of DEPLOYMENT_STEPS, as a run on any target gives them."""
    logs = [s["logs"] for s in steps]
    assert logs[:2] == [["#!"], []], steps
    loading, *rest = logs[2]
    assert re.fullmatch(r"\[workflow-agent\] Loading PULUMI_ENV from /\S*PULUMI_ENV", loading), (
        steps
    )
    assert rest == ["hello from an earlier step", "oidc token ready"], steps


PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
LISTENING = re.compile(r"http server listening on [^\s:]+:(\d+)")


def wait_for(predicate, timeout: float = WAIT, what: str = "condition", every: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout}s")
        time.sleep(every)


def agent_command() -> list[str]:
    script = Path(sys.executable).with_name("workflow-agent")
    if script.exists():
        return [str(script), "run"]
    return [sys.executable, "-m", "workflow_agent", "run"]


class AgentProcess:
    """One real agent process with its config file (0600, token inside) and its stderr."""

    def __init__(self, emu: Emulator, directory: Path, name: str = "agent", **settings) -> None:
        self.emu = emu
        self.dir = directory / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        config = {
            "token": emu.pool_token,
            "service_url": emu.url,
            "deploy_target": "process",
            "shared_volume_directory": str(self.dir / "jobs"),
            "http_server_port": 0,
            "polling_interval": "1s",
            "job_status_loop_interval": "1s",
            "request_retry_wait": "200ms",
            "request_retry_max_wait": "1s",
            "enabled_workflow_types": ["deployment"],
            **settings,
        }
        (self.dir / "jobs").mkdir(exist_ok=True)
        self.config_path = self.dir / "pulumi-workflow-agent.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.config_path.chmod(0o600)
        self.stderr_path = self.dir / "stderr.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def spawn(self, env: dict[str, str] | None = None) -> subprocess.Popen:
        # The test decides about proxies: one inherited from the machine would catch 127.0.0.1.
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("PULUMI_AGENT_") and k.lower() not in PROXY_VARS
        }
        base.update({"WORKFLOW_AGENT_INSTANCE": self.name, "WORKFLOW_AGENT_HTTP_HOST": "127.0.0.1"})
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [*agent_command(), "--config", str(self.config_path)],
                cwd=self.dir,
                env={**base, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        return self.proc

    def start(self, env: dict[str, str] | None = None) -> AgentProcess:
        """Start, and wait until the HTTP server listens."""
        self.spawn(env)
        self.port = int(wait_for(self._port, what=f"{self.name} http server").group(1))
        return self

    def run_to_exit(self, env: dict[str, str] | None = None) -> int:
        """Start an agent that is expected to stop by itself; its exit code."""
        return self.spawn(env).wait(timeout=WAIT)

    def _port(self):
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{self.stderr}")
        return LISTENING.search(self.stderr)

    @property
    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def get(self, path: str) -> tuple[int, object]:
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - loopback
                status, body = resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            status, body = err.code, err.read().decode()
        return status, (json.loads(body) if path != "/metrics" else body)

    def signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = WAIT) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
