"""The collection's Prometheus rules (extensions/prometheus/rules.yml): checked and unit-tested
by promtool (tests/system/prometheus/rules_test.yml), and read against what a real agent serves.

promtool comes from Debian's `prometheus` package, which `make bootstrap` installs
(scripts/prometheus.sh install).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from agent_harness import wait_for

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "extensions" / "prometheus" / "rules.yml"
RULE_TESTS = ROOT / "tests" / "system" / "prometheus" / "rules_test.yml"
# Names of raw series (recording rules' names have colons, PromQL functions are followed by "(").
METRIC = re.compile(r"(?<![\w:])(workflow_agent_[a-z_]+)(?![\w:]|\s*\()")


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("no promtool: `make bootstrap` installs it (scripts/prometheus.sh install)")
    return path


def run(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_rules_pass_promtool_check(promtool):
    out = run(promtool, "check", "rules", str(RULES))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules())} rules found" in out.stdout


def test_every_alert_has_a_promtool_unit_test(promtool):
    out = run(promtool, "test", "rules", str(RULE_TESTS))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
    tested = {
        case["alertname"]
        for t in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in t.get("alert_rule_test", [])
        if case["exp_alerts"]
    }
    recorded = {
        case["expr"]
        for t in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in t.get("promql_expr_test", [])
    }
    assert tested == {r["alert"] for r in rules() if "alert" in r}
    assert recorded == {r["record"] for r in rules() if "record" in r}


def test_a_real_agents_metrics_pass_promtool_and_hold_every_series_the_rules_read(
    promtool, emu, make_agent
):
    agent = make_agent().start()
    # One job of each result the rules count, so the labelled counters exist.
    ok = emu.create_job(steps=[{"name": "ok", "run": "echo ok"}])
    bad = emu.create_job(steps=[{"name": "bad", "run": "exit 3"}])
    emu.wait_jobs([ok, bad])

    def counted() -> str | None:
        _, text = agent.get("/metrics")
        return text if 'result="failed"' in text and 'result="succeeded"' in text else None

    text = wait_for(counted, what="both jobs in /metrics")
    out = run(promtool, "check", "metrics", stdin=text)
    assert (out.returncode, out.stdout + out.stderr) == (0, "")

    served = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
    read = {m for r in rules() for m in METRIC.findall(r["expr"])}
    assert read, "no agent series found in the rules"
    assert read <= served, f"the rules read series no agent serves: {sorted(read - served)}"
