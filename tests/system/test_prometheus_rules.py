"""The collection's Prometheus content (extensions/prometheus/): the rules, checked and
unit-tested by promtool (tests/system/prometheus/rules_test.yml) and read against what a real
agent serves; the dashboard, validated structurally (there is no Grafana here); and a real
Prometheus (scripts/prometheus.sh) scraping a real agent through a file_sd written by the
collection's own prometheus_file_sd code, evaluating every rule and dashboard query.

promtool comes from Debian's `prometheus` package, which `make bootstrap` installs
(scripts/prometheus.sh install).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml
from agent_harness import wait_for

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "extensions" / "prometheus" / "rules.yml"
RULE_TESTS = ROOT / "tests" / "system" / "prometheus" / "rules_test.yml"
DASHBOARD = ROOT / "extensions" / "prometheus" / "dashboard.json"
FILE_SD = ROOT / "plugins" / "module_utils" / "prometheus_file_sd.py"
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


def dashboard_queries() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p["targets"]]


def test_the_dashboard_is_built_from_the_rules_and_every_query_parses(promtool, tmp_path):
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 30
    [var] = [v for v in dash["templating"]["list"] if v["name"] == "datasource"]
    assert (var["type"], var["query"]) == ("datasource", "prometheus")
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids repeat"
    for p in panels:
        where = f"panel {p['id']} ({p['title']})"
        assert p["type"] in ("timeseries", "stat"), where
        assert p["datasource"]["uid"] == "${datasource}", where
        pos = p["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24 and pos["h"] > 0, where
        assert p["targets"], where
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs), where
    records = {r["record"] for r in rules() if "record" in r}
    queries = dashboard_queries()
    # Every recording rule is on the dashboard.
    assert records <= set(queries)
    # Every other query parses: promtool checks each as a rule's expression.
    others = [q for q in queries if q not in records]
    check = tmp_path / "dashboard_rules.yml"
    check.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "dashboard",
                        "rules": [
                            {"record": f"dashboard:query_{i}", "expr": q}
                            for i, q in enumerate(others)
                        ],
                    }
                ]
            }
        )
    )
    out = run(promtool, "check", "rules", str(check))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(others)} rules found" in out.stdout


def load_file_sd():
    spec = importlib.util.spec_from_file_location("prometheus_file_sd", FILE_SD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.file_sd_targets


def query(url: str, expr: str) -> list[dict]:
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=30) as resp:  # noqa: S310 - loopback
        return json.loads(resp.read())["data"]["result"]


def test_a_real_prometheus_scrapes_a_real_agent_through_file_sd_and_answers_every_query(
    promtool, emu, make_agent, tmp_path
):
    agent = make_agent(slots=3).start()
    sd = tmp_path / "file_sd.json"
    sd.write_text(
        json.dumps(
            load_file_sd()(
                [
                    {
                        "host": "local",
                        "address": "127.0.0.1",
                        "instances": [{"name": "agent", "http_server_port": agent.port}],
                        "deploy_target": "process",
                    }
                ],
                pool="p",
            )
        )
    )
    ok = emu.create_job(steps=[{"name": "ok", "run": "echo ok"}])
    bad = emu.create_job(steps=[{"name": "bad", "run": "exit 3"}])
    emu.wait_jobs([ok, bad])
    state = tmp_path / "prometheus"
    script = ROOT / "scripts" / "prometheus.sh"
    start = run("bash", str(script), "start", str(state), str(sd))
    assert start.returncode == 0, start.stdout + start.stderr
    url = start.stdout.strip().splitlines()[-1]
    try:
        queries = dashboard_queries() + [r["record"] for r in rules() if "record" in r]
        deadline = time.monotonic() + 60
        while True:
            answers = {q: query(url, q) for q in queries}
            up = query(url, 'up{job="workflow_agent"}')
            slots = query(url, 'pool:workflow_agent_slots:sum{pool="p"}')
            if all(answers.values()) and slots or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert [q for q, a in answers.items() if not a] == [], "queries without data"
        assert [(r["metric"]["instance"], r["metric"]["host"], r["value"][1]) for r in up] == [
            ("local/agent", "local", "1")
        ]
        assert [r["value"][1] for r in slots] == ["3"]
        # A healthy agent meets no alert's condition (not even pending).
        assert query(url, "ALERTS") == []
    finally:
        run("bash", str(script), "stop", str(state))
