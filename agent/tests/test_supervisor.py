"""runner.Supervisor: SIGTERM drains, drain_timeout cancels, a second signal or SIGQUIT cancels now.

The agent is a recorder and time a FakeClock; the real signals are sent to a real agent process
in tests/system/test_agent_e2e.py.
"""

from workflow_agent.clock import FakeClock
from workflow_agent.runner import Signals, Supervisor


class FakeAgent:
    def __init__(self):
        self.calls = []
        self.threads = []

    def drain(self):
        self.calls.append("drain")

    def cancel_all(self, reason):
        self.calls.append(("cancel", reason))

    def busy(self):
        return 1


def setup(drain_timeout=300.0):
    clock = FakeClock()
    agent = FakeAgent()
    signals = Signals()
    return Supervisor(agent, signals, drain_timeout, clock), agent, signals, clock


def test_nothing_happens_without_a_signal():
    sup, agent, _, clock = setup()
    clock.advance(10_000)
    sup.step()
    assert agent.calls == []


def test_sigterm_drains_then_cancels_at_drain_timeout():
    sup, agent, signals, clock = setup(300)
    signals.on_stop(15, None)
    sup.step()
    assert agent.calls == ["drain"]
    clock.advance(299)
    sup.step()
    assert agent.calls == ["drain"]
    clock.advance(1)
    sup.step()
    sup.step()
    assert agent.calls == ["drain", ("cancel", "the agent's drain_timeout was reached")]


def test_second_sigterm_cancels_now():
    sup, agent, signals, _ = setup()
    signals.on_stop(15, None)
    sup.step()
    signals.on_stop(15, None)
    sup.step()
    sup.step()
    assert agent.calls == ["drain", ("cancel", "the agent is stopping")]


def test_sigquit_cancels_without_draining_first():
    sup, agent, signals, _ = setup()
    signals.on_quit(3, None)
    sup.step()
    assert agent.calls == [("cancel", "the agent is stopping")]


def test_signals_wake_the_supervisor():
    signals = Signals()
    signals.on_stop(2, None)
    assert signals.wake.is_set() and signals.stops == 1
