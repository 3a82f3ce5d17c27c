"""Fleet: 150 slots (10 agent processes × 15 slots) against one emulator, polling every 5 s,
while jobs arrive at a steady rate. Measured:
- poll latency from the client side: a probe polls an empty pool beside the fleet and times
  each call (not the agents' histogram buckets, whose quantiles are interpolations);
- claim latency (the emulator's record: job created → claimed);
- the emulator's CPU.

The baseline compares like with like: the same number of pollers (150) at the same interval
against the same job stream, but bare ones: threads that poll on a fixed schedule, with no
jitter, and do nothing else. The difference is what the agent's scheduling (jitter, slots,
backoff) costs or saves.
"""

from __future__ import annotations

import contextlib
import random
import threading
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

POLL_S = 5.0
JOB_EVERY = 0.5  # seconds between new jobs
PROCESSES, SLOTS = 10, 15


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 1)


def _bare_pollers(emu, count: int, stop: threading.Event) -> list[threading.Thread]:
    """`count` pollers at a fixed POLL_S interval (phases spread evenly over the interval, as
    independently started slots are), claiming jobs and dropping them: claim latency only."""
    headers = {"Authorization": f"token {emu.pool_token}"}
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    http = httpx.Client(base_url=emu.url, headers=headers, timeout=30, limits=limits)

    def poller(phase: float) -> None:
        next_at = time.monotonic() + phase
        while not stop.wait(max(0.0, next_at - time.monotonic())):
            with contextlib.suppress(httpx.HTTPError):  # counted by the emulator, not here
                http.get("/api/deployments/poll")
            next_at += POLL_S

    threads = [
        threading.Thread(target=poller, args=(i * POLL_S / count,), daemon=True)
        for i in range(count)
    ]
    for t in threads:
        t.start()
    return threads


def _load(emu, window: float) -> dict:
    """Jobs every JOB_EVERY seconds for `window` seconds, with the probe polling beside them."""
    probe_pool = emu.create_pool("probe")
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
            time.sleep(0.1 + random.random() * 0.01)
    cpu1, t1 = cpu_seconds(emu_pid), time.monotonic()
    return {"ids": ids, "probe": probe, "cpu": (cpu1 - cpu0) / (t1 - t0), "window": t1 - t0}


def _claims(emu, ids: list[str], timeout: float) -> list[float]:
    """Created → claimed of each job, once every job has been claimed."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = [emu.job(i) for i in ids]
        if all(j["claimed_at"] for j in jobs) or time.monotonic() > deadline:
            return [j["claimed_at"] - j["created"] for j in jobs if j["claimed_at"]]
        time.sleep(0.5)


def _figures(load: dict, claims: list[float], jobs: int) -> dict:
    return {
        "window_s": round(load["window"], 1),
        "jobs": jobs,
        "claimed": len(claims),
        "probe_poll_p50_ms": _ms(median(load["probe"])),
        "probe_poll_p99_ms": _ms(percentile(load["probe"], 99)),
        "claim_latency_p50_ms": _ms(median(claims)) if claims else None,
        "claim_latency_p99_ms": _ms(percentile(claims, 99)) if claims else None,
        "emulator_cpu_percent": round(load["cpu"] * 100, 1),
    }


def agents(window: float, processes: int, slots: int) -> dict:
    name = f"fleet-{processes * slots}"
    with emulator(name) as emu:
        fleet = spawn_agents(
            emu,
            name,
            processes,
            slots=slots,
            polling_interval=f"{POLL_S:g}s",
            job_status_loop_interval="30s",
        )
        try:
            settle(POLL_S + 1)  # every slot has started and polled
            load = _load(emu, window)
            claims = _claims(emu, load["ids"], timeout=300)
        finally:
            stop_agents(fleet)
    return {"pollers": processes * slots, **_figures(load, claims, len(load["ids"]))}


def bare(window: float, pollers: int) -> dict:
    with emulator("fleet-bare") as emu:
        stop = threading.Event()
        threads = _bare_pollers(emu, pollers, stop)
        try:
            settle(POLL_S + 1)
            load = _load(emu, window)
            claims = _claims(emu, load["ids"], timeout=60)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=35)
    return {"pollers": pollers, **_figures(load, claims, len(load["ids"]))}


def run(window: float, processes: int = PROCESSES, slots: int = SLOTS) -> dict:
    fleet = agents(window, processes, slots)
    base = bare(window, processes * slots)
    ratio = None
    if fleet["claim_latency_p50_ms"] and base["claim_latency_p50_ms"]:
        ratio = round(fleet["claim_latency_p50_ms"] / base["claim_latency_p50_ms"], 2)
    return {
        "polling_interval_s": POLL_S,
        "job_every_s": JOB_EVERY,
        "fleet": fleet,
        "baseline": base,
        "claim_p50_ratio": ratio,
    }
