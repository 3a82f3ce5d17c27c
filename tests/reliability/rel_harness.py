"""Helpers of the reliability suite, on top of tests/system/agent_harness.py (the one way
tests start real `workflow-agent run` processes); nothing here duplicates it.

Named `rel_harness`, not `conftest`: `make pytest` runs several test trees in one session.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from agent_harness import (
    WAIT,
    AgentProcess,
    Emulator,
    agent_command,
    wait_for,
)
from target_harness import JOB_IMAGE, docker_available
from workflow_emulator.testing import TERMINAL

REPO = Path(__file__).resolve().parents[2]

__all__ = [
    "REPO",
    "SOAK",
    "TERMINAL",
    "WAIT",
    "JOB_IMAGE",
    "AgentProcess",
    "Emulator",
    "agent_command",
    "assert_no_crash",
    "docker_available",
    "emulator",
    "metric",
    "parse_metrics",
    "start_fleet",
    "stop_fleet",
    "wait_for",
    "wait_terminal",
]

SOAK = os.environ.get("WFA_SOAK", "") not in ("", "0")
# Lines an agent must never log: a slot or job that hit a bug logs these with a traceback.
CRASH_MARKERS = ("Traceback", "unexpected error", "internal error")

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def emulator(directory: Path, **kw) -> Emulator:
    """An emulator keeping its state file in `directory`, access log off (the JSON line of
    thousands of requests costs CPU the agents need)."""
    state = directory / "emulator"
    state.mkdir(parents=True, exist_ok=True)
    env = {"EMULATOR_ACCESS_LOG": "off", **kw.pop("extra_env", {})}
    return Emulator(state_dir=state, extra_env=env, **kw)


def parse_metrics(text: str) -> dict[tuple[str, frozenset], float]:
    """Prometheus text → {(name, frozenset(labels)): value}."""
    out: dict[tuple[str, frozenset], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            labels = frozenset(_LABEL.findall(m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(samples: dict, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 when there is none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def start_fleet(
    emu: Emulator, directory: Path, count: int, prefix: str = "agent", **settings
) -> list[AgentProcess]:
    """`count` agents, spawned together (a sequential start would cost count × startup)."""
    agents = [AgentProcess(emu, directory, f"{prefix}-{i:03d}", **settings) for i in range(count)]
    for agent in agents:
        agent.spawn()
    for agent in agents:
        agent.port = int(wait_for(agent._port, what=f"{agent.name} http server").group(1))
    return agents


def stop_fleet(agents: list[AgentProcess]) -> None:
    for agent in agents:
        agent.stop()


def wait_terminal(emu: Emulator, count: int, timeout: float, what: str = "jobs") -> dict:
    """Wait until `count` jobs are terminal, judged by /admin/stats (one cheap call per check,
    instead of one call per job); returns the last stats."""
    deadline = time.monotonic() + timeout
    while True:
        stats = emu.stats()
        done = sum(n for status, n in stats["jobs"].items() if status in TERMINAL)
        if done >= count:
            return stats
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {done}/{count} terminal after {timeout}s: {stats['jobs']}")
        time.sleep(1.0)


def assert_no_crash(agent: AgentProcess) -> None:
    text = agent.stderr
    for marker in CRASH_MARKERS:
        assert marker not in text, f"{agent.name} logged {marker!r}:\n{text[-3000:]}"
