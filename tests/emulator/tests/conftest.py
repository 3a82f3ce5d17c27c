"""Fixtures: one real emulator process per test session, reset before each test."""

import pytest
from emu_helpers import Agent
from workflow_emulator.testing import Emulator


@pytest.fixture(scope="session")
def shared_emu():
    with Emulator() as emu:
        yield emu


@pytest.fixture
def emu(shared_emu):
    if not shared_emu.running:  # a test restarted or killed it
        shared_emu.start()
    shared_emu.reset(pools=True)
    yield shared_emu


@pytest.fixture
def agent(emu):
    a = Agent(emu)
    yield a
    a.close()


@pytest.fixture
def make_agent(emu):
    made = []

    def make(**kw):
        a = Agent(emu, **kw)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()
