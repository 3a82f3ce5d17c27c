"""Reliability fixtures: a fresh real emulator per test (chaos restarts it, claims fill it with
thousands of jobs), and real agent processes (tests/system/agent_harness.py)."""

from __future__ import annotations

import pytest
from rel_harness import AgentProcess, emulator, stop_fleet


@pytest.fixture
def emu(tmp_path):
    with emulator(tmp_path, heartbeat_timeout="10m") as server:
        yield server


@pytest.fixture
def agents():
    """A list the test appends its AgentProcess objects to; all are stopped at teardown."""
    made: list[AgentProcess] = []
    yield made
    stop_fleet(made)
