"""Footprint of one idle agent over a window (60 s by default): RSS and CPU, and its HTTP
requests against the poll schedule (each poller waits polling_interval plus up to 10% jitter;
with the default workflow types a slot has two pollers: deployments and leases).

Baselines, over the same window as the agent (they run beside it): an idle bare Python
interpreter; one that has imported the agent's libraries (httpx, pydantic, PyYAML,
prometheus-client) and nothing else; and the floor: the same, having also validated one
two-field pydantic model. Pydantic builds its schema machinery on a first model, not on import,
so any process that validates its config with pydantic holds at least that much: an agent that
validates its config when it starts cannot idle under the floor (its whole config schema adds
well under 1 MB to it).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

from benchlib import (
    cpu_seconds,
    emulator,
    median,
    pss_mb,
    rss_mb,
    settle,
    spawn_agents,
    stop_agents,
)

POLL = 5.0  # seconds: polling_interval of the measured agent
POLL_ROUTES = ("/api/deployments/poll", "/api/background-activities/worker/lease/acquire")


def _emulator_requests(emu) -> dict[str, float]:
    """Requests the emulator has counted, by route template (its own /metrics)."""
    counts: dict[str, float] = {}
    for line in emu.metrics().splitlines():
        if line.startswith("emulator_requests_total{"):
            labels, value = line[len("emulator_requests_total{") :].rsplit("} ", 1)
            route = labels.split('route="', 1)[1].split('"', 1)[0]
            counts[route] = counts.get(route, 0) + float(value)
    return counts


def _idle_python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code + "\nimport time; time.sleep(3600)"])


def _idle(proc: subprocess.Popen, cpu0: float, elapsed: float) -> dict:
    return {
        "rss_mb": round(rss_mb(proc.pid), 1),
        "pss_mb": round(pss_mb(proc.pid), 1),
        "cpu_percent": round((cpu_seconds(proc.pid) - cpu0) / elapsed * 100, 2),
    }


LIBS = "import httpx, pydantic, yaml, prometheus_client"
TINY_MODEL = """
class Tiny(pydantic.BaseModel):
    name: str
    count: int
Tiny.model_validate({"name": "floor", "count": 1})"""


def run(window: float) -> dict:
    baselines = {
        "baseline_python": _idle_python("pass"),
        "baseline_python_libs": _idle_python(LIBS),
        "baseline_floor": _idle_python(LIBS + TINY_MODEL),
    }
    try:
        return _run(window, baselines)
    finally:
        for proc in baselines.values():
            proc.kill()
            proc.wait()


def _run(window: float, baselines: dict[str, subprocess.Popen]) -> dict:
    with emulator("footprint") as emu:
        [agent] = spawn_agents(
            emu,
            "footprint",
            1,
            polling_interval=f"{POLL:g}s",
            enabled_workflow_types=["deployment", "insights_scan", "policy_evaluation"],
        )
        try:
            settle(POLL + 1)  # start-up done, first polls made
            pid = agent.proc.pid
            before = _emulator_requests(emu)
            base0 = {k: cpu_seconds(p.pid) for k, p in baselines.items()}
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            rss = []
            while time.monotonic() - t0 < window:
                rss.append(rss_mb(pid))
                time.sleep(1)
            cpu1, t1 = cpu_seconds(pid), time.monotonic()
            base = {k: _idle(p, base0[k], t1 - t0) for k, p in baselines.items()}
            after = _emulator_requests(emu)
            pss = pss_mb(pid)
        finally:
            stop_agents([agent])
    elapsed = t1 - t0
    requests = {r: after.get(r, 0) - before.get(r, 0) for r in set(after) | set(before)}
    requests = {r: int(n) for r, n in requests.items() if n and r != "/metrics"}
    polls = sum(requests.get(r, 0) for r in POLL_ROUTES)
    pollers = 2
    # Each poller polls once per POLL + jitter (0..10%) seconds: in a window of W seconds that is
    # floor(W / (1.1 POLL)) .. ceil(W / POLL) polls.
    expected = (
        pollers * math.floor(elapsed / (POLL * 1.1)),
        pollers * math.ceil(elapsed / POLL),
    )
    out = {
        "window_s": round(elapsed, 1),
        "polling_interval_s": POLL,
        "rss_mb_median": round(median(rss), 1),
        "rss_mb_max": round(max(rss), 1),
        "pss_mb": round(pss, 1),
        "cpu_percent": round((cpu1 - cpu0) / elapsed * 100, 2),
        "requests": requests,
        "polls": polls,
        "expected_polls": list(expected),
        "polls_match_schedule": expected[0] <= polls <= expected[1],
        "other_requests": sum(requests.values()) - polls,
        **base,
    }
    out["rss_ratio"] = round(out["rss_mb_median"] / base["baseline_python_libs"]["rss_mb"], 2)
    out["rss_floor_ratio"] = round(out["rss_mb_median"] / base["baseline_floor"]["rss_mb"], 2)
    return out


# What the agent loads, in the order it loads it; RSS after each step, in a fresh interpreter.
STEPS = [
    ("python", "pass"),
    ("ssl", "import ssl"),
    ("httpx", "import httpx"),
    ("pydantic", "import pydantic"),
    ("yaml + prometheus_client", "import yaml, prometheus_client"),
    ("workflow_agent.config (schema built)", "import workflow_agent.config"),
    ("rest of the agent", "import workflow_agent.runner, workflow_agent.targets.process"),
    ("TLS context (certifi + system CAs)", "workflow_agent.client.ssl_context('', {})"),
]


def import_profile() -> dict[str, float]:
    """RSS added by each part of the agent: where an idle agent's memory goes."""
    code = [
        "import json",
        "def rss():",
        "    for l in open('/proc/self/status'):",
        "        if l.startswith('VmRSS'): return int(l.split()[1]) / 1024",
        "out = {}",
    ]
    for name, stmt in STEPS:
        code += [stmt, f"out[{name!r}] = rss()"]
    code.append("print(json.dumps(out))")
    text = subprocess.run(
        [sys.executable, "-c", "\n".join(code)], capture_output=True, text=True, check=True
    ).stdout
    totals = json.loads(text)
    added, previous = {}, 0.0
    for name, _ in STEPS:
        added[name] = round(totals[name] - previous, 1)
        previous = totals[name]
    return added
