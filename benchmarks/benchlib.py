"""Shared pieces of the benchmarks: the machine, /proc readings, percentiles, the statistics of
repeated runs, and the real emulator and agent processes (the same harness the tests use:
tests/system/agent_harness.py).

Benchmarks print figures; they never pass or fail on a time.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "system"))

from agent_harness import AgentProcess, Emulator, wait_for  # noqa: E402

__all__ = [
    "DOCKER",
    "REPO",
    "STATE",
    "AgentProcess",
    "Emulator",
    "cpu_seconds",
    "emulator",
    "judge",
    "machine",
    "median",
    "spread",
    "percentile",
    "pss_mb",
    "rss_mb",
    "spawn_agents",
    "wait_for",
]

STATE = Path(os.environ.get("WORKFLOW_AGENT_STATE", "/var/tmp/workflow-agent-dev")) / "bench"
DOCKER = shutil.which("/usr/bin/docker") or shutil.which("docker") or "docker"
TICK = os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def spread(runs: list) -> dict:
    """Repeated runs of one section, summarised leaf by leaf: every number becomes
    {median, min, max, n} over the runs; other leaves keep the first run's value."""
    first = runs[0]
    if isinstance(first, dict):
        return {k: spread([r[k] for r in runs if isinstance(r, dict) and k in r]) for k in first}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        values = [float(r) for r in runs if isinstance(r, (int, float))]
        return {
            "median": round(median(values), 3),
            "min": round(min(values), 3),
            "max": round(max(values), 3),
            "n": len(values),
        }
    if isinstance(first, bool):
        return all(runs)
    return first


def linear_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares `seconds = fixed + per_host * hosts` over (hosts, seconds) points: how a
    rollout's cost grows with the fleet, to read off a size that was not measured."""
    if len({x for x, _ in points}) < 2:
        raise ValueError("a fit needs at least two different host counts")
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - slope * mx, slope


def judge(figure: dict | None, goal: float) -> str:
    """A goal of the form "at most `goal`", judged across the spread, not on one run:
    met when every run met it, missed when none did, within noise when the spread straddles it."""
    if not figure:
        return "n/a"
    if figure["n"] < 2:
        return "one run: no verdict"
    if figure["max"] <= goal:
        return "met"
    if figure["min"] > goal:
        return f"missed by {(figure['median'] / goal - 1) * 100:.0f}%"
    return "within noise"


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def rss_mb(pid: int) -> float:
    return _status_kb(pid, "VmRSS") / 1024


def pss_mb(pid: int) -> float:
    """Proportional set size: shared pages divided among the processes sharing them."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise KeyError("Pss")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine() -> dict:
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, KeyError, ValueError):
        meminfo = dict(
            line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines()
        )
        mem = f"{int(meminfo['MemTotal'].split()[0]) / 1024 / 1024:.1f} GiB"
    return {
        "cpu": cpu or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "memory": mem,
        "kernel": platform.release(),
        "os": _os_name(),
        "python": platform.python_version(),
        "docker": _run([DOCKER, "version", "--format", "{{.Server.Version}}"]) or "n/a",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "commit": _run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
    }


def _os_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    return platform.system()


def emulator(name: str, **kw) -> Emulator:
    """An emulator with its state under STATE/<name>, access log off (it costs CPU)."""
    directory = STATE / name / "emulator"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    env = {"EMULATOR_ACCESS_LOG": "off", **kw.pop("extra_env", {})}
    return Emulator(state_dir=directory, extra_env=env, **kw)


def spawn_agents(
    emu: Emulator, name: str, count: int, env: dict | None = None, **settings
) -> list[AgentProcess]:
    """`count` real agent processes (spawned together), each listening on its HTTP port."""
    directory = STATE / name / "agents"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    agents = [AgentProcess(emu, directory, f"{name}-{i}", **settings) for i in range(count)]
    for agent in agents:
        agent.spawn(env)
    for agent in agents:
        agent.port = int(wait_for(agent._port, timeout=300, what=f"{agent.name}").group(1))
    return agents


def stop_agents(agents: list[AgentProcess]) -> None:
    for agent in agents:
        agent.stop()


def settle(seconds: float) -> None:
    """Let a just-started process finish its start-up work before measuring it."""
    time.sleep(seconds)
