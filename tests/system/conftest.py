"""Integration fixtures: the real emulator (one process per session, reset per test) and real
`workflow-agent run` processes talking HTTP to it (helpers: agent_harness.py)."""

from __future__ import annotations

import pytest
from agent_harness import WAIT, AgentProcess, Emulator, wait_for

__all__ = ["WAIT", "wait_for"]  # kept for tests that still import them from here


@pytest.fixture(scope="session")
def shared_emulator():
    with Emulator(heartbeat_timeout="10m") as emu:
        yield emu


@pytest.fixture
def emu(shared_emulator):
    if not shared_emulator.running:
        shared_emulator.start()
    shared_emulator.reset(pools=True)
    shared_emulator.faults()
    yield shared_emulator


@pytest.fixture
def make_agent(emu, tmp_path):
    made: list[AgentProcess] = []

    def make(name: str = "agent", **settings) -> AgentProcess:
        agent = AgentProcess(emu, tmp_path, name, **settings)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.stop()
