"""agent_info: Prometheus parsing, the facts, retries, and the module's result and failure.

The metrics text comes from the agent's own Metrics class (vendored source), so the names the
module reads are the names the agent writes. HTTP answers are stand-ins here; the integration
test (tests/system/test_plugins_agent_info.py) reads real agents.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import agent_metrics
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.http_request import (
    Response,
)
from ansible_collections.selfhosted.workflow_agent.plugins.modules import agent_info

AGENT_SRC = Path(agent_info.__file__).resolve().parents[2] / "agent" / "src"


@pytest.fixture(scope="module")
def agent_metrics_text():
    """Exposition text rendered by the agent's own metrics code."""
    sys.path.insert(0, str(AGENT_SRC))
    try:
        from workflow_agent.metrics import Metrics
    finally:
        sys.path.remove(str(AGENT_SRC))
    m = Metrics(instance="host-a", deploy_target="docker", slots=3)
    m.busy_slots.labels("deployment").set(2)
    m.busy_slots.labels("insights_scan").set(1)
    m.jobs.labels("deployment", "succeeded").inc(5)
    m.jobs.labels("deployment", "failed").inc(2)
    m.jobs.labels("policy_evaluation", "succeeded").inc(1)
    m.last_claim.set(1767268800.5)
    m.breaker_open.set(1)
    m.draining.set(0)
    return m.render().decode()


# --- parsing ------------------------------------------------------------------------------


def test_parse_samples_labels_escapes_and_specials():
    text = (
        "# HELP x help\n"
        "# TYPE x gauge\n"
        'x{a="1",b="q\\"uote, and \\\\ and\\nline"} 2.5\n'
        "y 1e3 1712345678000\n"
        'z{a="v",} +Inf\n'
        "\n"
        "w NaN\n"
    )
    samples = agent_metrics.parse(text)
    assert samples[0] == ("x", {"a": "1", "b": 'q"uote, and \\ and\nline'}, 2.5)
    assert samples[1] == ("y", {}, 1000.0)
    assert samples[2][0] == "z" and samples[2][1] == {"a": "v"} and samples[2][2] == float("inf")
    assert samples[3][0] == "w" and samples[3][2] != samples[3][2]  # NaN


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ok 1\nthis is not a sample\n", "line 2: not a Prometheus sample"),
        ("x one\n", "line 1: 'one' is not a number"),
        ("x{a=1} 2\n", "line 1: cannot read the labels {a=1}"),
        ("<html>oops</html>\n", "line 1: not a Prometheus sample"),
    ],
)
def test_parse_errors_name_the_line(text, message):
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        agent_metrics.parse(text)


def test_summarize_the_agents_own_metrics(agent_metrics_text):
    facts = agent_metrics.summarize(agent_metrics.parse(agent_metrics_text))
    assert facts == {
        "instance": "host-a",
        "version": facts["version"],
        "deploy_target": "docker",
        "slots": 3,
        "busy_slots": 3,
        "busy_slots_by_type": {"deployment": 2, "insights_scan": 1, "policy_evaluation": 0},
        "jobs": {"succeeded": 6, "failed": 2},
        "jobs_total": 8,
        "draining": False,
        "circuit_breaker_open": True,
        "last_claim": 1767268800.5,
    }
    assert facts["version"]


def test_summarize_without_agent_metrics_is_all_unknown():
    facts = agent_metrics.summarize(agent_metrics.parse("other_metric 1\n"))
    assert facts["slots"] is None and facts["draining"] is None and facts["instance"] is None
    assert facts["busy_slots"] == 0 and facts["jobs"] == {} and facts["last_claim"] is None


# --- one instance ---------------------------------------------------------------------------


class FakeAgents:
    """HTTP answers by URL; each value is a Response or a list of them (one per call)."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, method, url, headers=None, **http):
        self.calls.append(url)
        answer = self.answers[url]
        if isinstance(answer, list):
            return answer.pop(0) if len(answer) > 1 else answer[0]
        return answer


def health(status="healthy", code=200):
    body = {
        "status": status,
        "currentTime": "2026-01-01T12:00:01Z",
        "lastActivity": "2026-01-01T12:00:00Z",
    }
    return Response(code, json.dumps(body).encode())


HTTP = {"timeout": 5, "validate_certs": True, "ca_path": None}
URL = "http://127.0.0.1:8080"


@pytest.fixture
def fake(monkeypatch, agent_metrics_text):
    def install(answers):
        agents = FakeAgents(answers)
        monkeypatch.setattr(agent_info, "request", agents)
        return agents

    return install


def test_healthy_instance_with_metrics(fake, agent_metrics_text):
    fake({URL + "/healthz": health(), URL + "/metrics": Response(200, agent_metrics_text.encode())})
    facts = agent_info.query(URL, HTTP, True)
    assert facts["healthy"] is True and facts["status"] == "healthy"
    assert facts["status_code"] == 200 and facts["error"] is None
    assert facts["last_activity"] == "2026-01-01T12:00:00Z"
    assert facts["slots"] == 3 and facts["busy_slots"] == 3 and facts["jobs_total"] == 8
    assert facts["metrics_error"] is None


def test_unhealthy_503(fake, agent_metrics_text):
    fake({URL + "/healthz": health("unhealthy", 503), URL + "/metrics": Response(200, b"")})
    facts = agent_info.query(URL, HTTP, True)
    assert (facts["healthy"], facts["status"], facts["status_code"]) == (False, "unhealthy", 503)


def test_200_that_is_not_the_agents_answer(fake):
    fake(
        {
            URL + "/healthz": Response(200, b"<html>proxy login</html>"),
            URL + "/metrics": Response(404, b""),
        }
    )
    facts = agent_info.query(URL, HTTP, True)
    assert facts["healthy"] is False and facts["status"] == "invalid"
    assert facts["error"].startswith(URL + "/healthz answered HTTP 200: the response is not JSON")
    assert facts["metrics_error"] == URL + "/metrics answered HTTP 404"
    assert facts["slots"] is None


def test_unreadable_metrics_do_not_hide_health(fake):
    fake({URL + "/healthz": health(), URL + "/metrics": Response(200, b"<p>not metrics</p>\n")})
    facts = agent_info.query(URL, HTTP, True)
    assert facts["healthy"] is True
    assert facts["metrics_error"].startswith(URL + "/metrics: line 1: not a Prometheus sample")


def test_unreachable_has_every_key(fake):
    fake({URL + "/healthz": Response(None, b"", "cannot connect to x: refused")})
    facts = agent_info.query(URL, HTTP, True)
    assert facts["status"] == "unreachable" and facts["error"] == "cannot connect to x: refused"
    assert set(agent_info.METRIC_FACTS) <= set(facts)
    assert facts["metrics_error"] == facts["error"]


def test_without_metrics_only_health_is_read(fake):
    agents = fake({URL + "/healthz": health()})
    facts = agent_info.query(URL, HTTP, False)
    assert agents.calls == [URL + "/healthz"] and "slots" not in facts


# --- retries ------------------------------------------------------------------------------


def test_retries_ask_only_the_unhealthy_again_until_healthy(fake):
    other = "http://127.0.0.1:8081"
    agents = fake(
        {
            URL + "/healthz": health(),
            other + "/healthz": [
                Response(None, b"", "refused"),
                health("unhealthy", 503),
                health(),
            ],
        }
    )
    slept = []
    results = agent_info.gather([URL, other], HTTP, False, retries=5, delay=1.5, sleep=slept.append)
    assert [r["healthy"] for r in results] == [True, True]
    assert slept == [1.5, 1.5]
    assert agents.calls.count(URL + "/healthz") == 1
    assert agents.calls.count(other + "/healthz") == 3


def test_retries_stop_at_the_limit(fake):
    fake({URL + "/healthz": Response(None, b"", "refused")})
    slept = []
    [result] = agent_info.gather([URL], HTTP, False, retries=2, delay=0, sleep=slept.append)
    assert result["healthy"] is False and len(slept) == 2


# --- the module ---------------------------------------------------------------------------


def run_module(monkeypatch, run_main, args):
    return run_main(agent_info, args)


def test_module_result_totals_and_dedup(monkeypatch, fake, agent_metrics_text, run_main):
    fake({URL + "/healthz": health(), URL + "/metrics": Response(200, agent_metrics_text.encode())})
    result = run_module(monkeypatch, run_main, {"url": [URL + "/", URL]})
    assert result["changed"] is False and result["healthy"] is True
    assert len(result["instances"]) == 1
    assert (result["slots"], result["busy_slots"]) == (3, 3)


def test_module_gate_fails_naming_instances(monkeypatch, fake, run_main):
    fake({URL + "/healthz": health("unhealthy", 503), URL + "/metrics": Response(200, b"")})
    result = run_module(
        monkeypatch, run_main, {"url": [URL], "require_healthy": True, "metrics": False}
    )
    assert result["failed"] is True
    assert result["msg"] == (
        "1 of 1 agent instances not healthy after 1 attempt: " + URL + " (unhealthy)"
    )
    assert result["unhealthy"] == [URL]


def test_module_rejects_a_non_url(monkeypatch, fake, run_main):
    fake({})
    result = run_module(monkeypatch, run_main, {"url": ["127.0.0.1:8080"]})
    assert result["msg"] == "url: '127.0.0.1:8080' is not an http(s) URL"
