"""Conformance fixtures: one real emulator per session (reset per test) and real agent
processes (tests/system/agent_harness.py)."""

from __future__ import annotations

import pytest
from agent_harness import AgentProcess, Emulator


@pytest.fixture(scope="session")
def shared_emulator():
    with Emulator() as emu:
        yield emu


@pytest.fixture
def emu(shared_emulator):
    if not shared_emulator.running:
        shared_emulator.start()
    shared_emulator.reset(pools=True)
    yield shared_emulator


@pytest.fixture
def agents():
    made: list[AgentProcess] = []
    yield made
    for agent in made:
        agent.stop()
