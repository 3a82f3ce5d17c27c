"""Fleet: 150 slots (10 agent processes × 15 slots) against one emulator, polling every 5 s,
while jobs arrive at a steady rate. Poll latency p50/p99 (the agents' own histograms, and an
exact probe polling an empty pool beside them), claim latency (the emulator's record: job
created → claimed) and the emulator's CPU. The baseline is the same run with one slot.
"""

from __future__ import annotations

import time

import httpx
from benchlib import (
    cpu_seconds,
    emulator,
    median,
    percentile,
    settle,
    spawn_agents,
    stop_agents,
)

POLL = "5s"
JOB_EVERY = 0.5  # seconds between new jobs


def _histogram(agents) -> dict[float, float]:
    """Summed cumulative buckets of workflow_agent_poll_duration_seconds over the agents."""
    buckets: dict[float, float] = {}
    for agent in agents:
        for line in agent.get("/metrics")[1].splitlines():
            if line.startswith("workflow_agent_poll_duration_seconds_bucket{"):
                le = line.split('le="', 1)[1].split('"', 1)[0]
                bound = float("inf") if le == "+Inf" else float(le)
                buckets[bound] = buckets.get(bound, 0) + float(line.rsplit(" ", 1)[1])
    return buckets


def _quantile(q: float, before: dict, after: dict) -> float | None:
    """histogram_quantile over the window (linear inside a bucket, as Prometheus does)."""
    bounds = sorted(after)
    cum = [after[b] - before.get(b, 0) for b in bounds]
    total = cum[-1]
    if not total:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in zip(bounds, cum, strict=True):
        if count >= rank:
            if bound == float("inf"):
                return lower
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1)
        lower, below = bound, count
    return None


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 1)


def measure(processes: int, slots: int, window: float) -> dict:
    name = f"fleet-{processes * slots}"
    with emulator(name) as emu:
        probe_pool = emu.create_pool("probe")
        agents = spawn_agents(
            emu,
            name,
            processes,
            slots=slots,
            polling_interval=POLL,
            job_status_loop_interval="30s",
        )
        try:
            settle(6)  # every slot has started and polled
            before = _histogram(agents)
            emu_pid = emu._proc.pid
            cpu0, t0 = cpu_seconds(emu_pid), time.monotonic()
            ids, probe = [], []
            headers = {"Authorization": f"token {probe_pool['token']}"}
            with httpx.Client(base_url=emu.url, headers=headers, timeout=30) as http:
                next_job = t0
                while time.monotonic() - t0 < window:
                    if time.monotonic() >= next_job:
                        ids.append(emu.create_job(steps=[{"name": "t", "run": "true"}]))
                        next_job += JOB_EVERY
                    start = time.perf_counter()
                    http.get("/api/deployments/poll").raise_for_status()
                    probe.append(time.perf_counter() - start)
                    time.sleep(0.1)
            cpu1, t1 = cpu_seconds(emu_pid), time.monotonic()
            after = _histogram(agents)
            jobs = emu.wait_jobs(ids, timeout=300)
        finally:
            stop_agents(agents)
    claims = [j["claimed_at"] - j["created"] for j in jobs if j["claimed_at"]]
    return {
        "slots": processes * slots,
        "processes": processes,
        "window_s": round(t1 - t0, 1),
        "jobs": len(ids),
        "succeeded": sum(j["status"] == "succeeded" for j in jobs),
        "poll_p50_ms": _ms(_quantile(0.5, before, after)),
        "poll_p99_ms": _ms(_quantile(0.99, before, after)),
        "polls": int(after[float("inf")] - before.get(float("inf"), 0)),
        "probe_poll_p50_ms": _ms(median(probe)),
        "probe_poll_p99_ms": _ms(percentile(probe, 99)),
        "claim_latency_p50_ms": _ms(median(claims)),
        "claim_latency_p99_ms": _ms(percentile(claims, 99)),
        "emulator_cpu_percent": round((cpu1 - cpu0) / (t1 - t0) * 100, 1),
    }


def run(window: float) -> dict:
    return {
        "polling_interval": POLL,
        "job_every_s": JOB_EVERY,
        "baseline": measure(1, 1, window),
        "fleet": measure(10, 15, window),
    }
