"""The command line, the access log and /metrics."""

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from emu_helpers import STEPS, Agent, metric
from workflow_emulator.testing import Emulator


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workflow_emulator", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "env", "names"),
    [
        (["serve", "--port", "http"], {}, "--port"),
        (["serve", "--heartbeat-timeout", "ten minutes"], {}, "--heartbeat-timeout"),
        (["serve"], {"EMULATOR_HEARTBEAT_TIMEOUT": "0s"}, "--heartbeat-timeout"),
        (["serve", "--seed-token", "hunter2"], {}, "--seed-token"),
        (["serve", "--org", "a b"], {}, "--org"),
        (["serve", "--admin-token", " "], {}, "--admin-token"),
        (["serve", "--bogus"], {}, "--bogus"),
        ([], {}, "command"),
    ],
)
def test_misuse_exits_2_with_one_line(args, env, names):
    res = run_cli(*args, env=env)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    assert "hunter2" not in res.stderr  # a rejected token is not echoed


def test_unusable_files_exit_2(tmp_path):
    garbage = tmp_path / "state.sqlite"
    garbage.write_text("not a database")
    for args, names in (
        (["--state-file", str(garbage)], "--state-file"),
        (["--state-file", str(tmp_path / "no" / "dir.sqlite")], "--state-file"),
        (["--access-log", str(tmp_path / "no" / "dir.log")], "--access-log"),
    ):
        res = run_cli("serve", *args)
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and names in lines[0] and "Traceback" not in res.stderr


def test_port_in_use_exits_2():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        res = run_cli("serve", "--port", str(busy.getsockname()[1]), "--access-log", "off")
    assert res.returncode == 2 and "cannot listen" in res.stderr


def test_serve_prints_url_and_generated_admin_token(tmp_path):
    url_file = tmp_path / "url"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMULATOR_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workflow_emulator",
            "serve",
            "--url-file",
            str(url_file),
            "--access-log",
            "off",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = proc.stdout.readline().strip()
        token = proc.stdout.readline().strip().removeprefix("admin token: ")
        assert url.startswith("http://127.0.0.1:")
        deadline = time.monotonic() + 30
        while not url_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert url_file.read_text().strip() == url
        ok = httpx.get(f"{url}/admin/stats", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode == 0  # SIGTERM is a clean stop


def test_given_admin_token_is_never_printed(tmp_path):
    with Emulator(state_dir=tmp_path) as emu:
        assert emu.stats()["jobs"] == {}
    assert emu.admin_token not in emu.log_path.read_text()


def test_access_log_is_json_lines_without_tokens(tmp_path):
    with Emulator(state_dir=tmp_path) as emu:
        emu.create_job(STEPS)
        agent = Agent(emu, hostname="logger", instance="2")
        claim = agent.claim()
        agent.job(claim).heartbeat()
        agent.http.get("/api/deployments/poll", headers={"Authorization": "token pul-wrong123"})
        agent.close()
        emu.faults(rate_503=1.0, budget=1)
        Agent(emu).poll()
    lines = [json.loads(x) for x in emu.log_path.read_text().splitlines() if x.startswith("{")]
    text = emu.log_path.read_text()
    for secret in (
        emu.pool_token,
        emu.admin_token,
        claim["jobToken"],
        claim["oidcToken"],
        "pul-wrong123",
    ):
        assert secret not in text
    polls = [x for x in lines if x["route"] == "/api/deployments/poll"]
    assert [x["status"] for x in polls] == ["200", "403", "503"]
    assert polls[0]["agent"] == "logger/2" and polls[2]["fault"] == "503"
    assert {"ts", "method", "path", "route", "status", "ms", "client"} <= set(lines[0])


def test_metrics_counts_claim_latency_queue_depth(emu, agent):
    before = emu.metrics()
    emu.create_jobs(3, STEPS)
    agent.claim()
    agent.http.get("/api/deployments/poll", headers={"Authorization": "token nope"})
    after = emu.metrics()
    poll = {"method": "GET", "route": "/api/deployments/poll"}
    req = "emulator_requests_total"
    assert metric(after, req, code="200", **poll) - metric(before, req, code="200", **poll) == 1
    assert metric(after, req, code="403", **poll) - metric(before, req, code="403", **poll) == 1
    lat = "emulator_claim_latency_seconds_count"
    assert metric(after, lat, type="deployment") - metric(before, lat, type="deployment") == 1
    assert metric(after, "emulator_queue_depth", pool="default", type="deployment") == 2
    assert metric(after, "emulator_agents_online", pool="default") == 1
    assert metric(after, "emulator_jobs", status="not-started") == 3
