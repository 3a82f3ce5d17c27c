"""Slots: memory of 1, 10 and 150 slots in one process against 1 and 10 separate processes, and
the marginal MB per extra slot (and per extra process). Idle agents, default workflow types (a
slot is then two poller threads: deployments and leases). RSS counts shared pages in every
process; PSS splits them, so the sum of PSS is what N processes really cost together.
"""

from __future__ import annotations

from benchlib import emulator, pss_mb, rss_mb, settle, spawn_agents, stop_agents, wait_for

SETTINGS = {"polling_interval": "30s", "job_status_loop_interval": "30s"}


def _measure(emu, name: str, processes: int, slots: int) -> dict:
    agents = spawn_agents(emu, name, processes, slots=slots, **SETTINGS)
    try:
        # Every slot's threads have started and polled once before memory is read.
        for agent in agents:
            wait_for(
                lambda a=agent: _polls(a) >= 2 * slots, timeout=300, what=f"{agent.name} polls"
            )
        settle(2)
        pids = [a.proc.pid for a in agents]
        return {
            "processes": processes,
            "slots_each": slots,
            "rss_mb": round(sum(rss_mb(p) for p in pids), 1),
            "pss_mb": round(sum(pss_mb(p) for p in pids), 1),
        }
    finally:
        stop_agents(agents)


def _polls(agent) -> float:
    total = 0.0
    for line in agent.get("/metrics")[1].splitlines():
        if line.startswith("workflow_agent_polls_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def run(many_slots: int = 150, processes: int = 10) -> dict:
    with emulator("slots") as emu:
        one = _measure(emu, "slots-1", 1, 1)
        ten = _measure(emu, "slots-10", 1, 10)
        many = _measure(emu, f"slots-{many_slots}", 1, many_slots)
        procs = _measure(emu, f"procs-{processes}", processes, 1)
    extra_slots, extra_procs = many_slots - 1, processes - 1
    return {
        "many_slots": many_slots,
        "processes": processes,
        "one_process": {"1": one, "10": ten, "many": many},
        "n_processes": procs,
        "marginal_mb_per_slot_rss": round((many["rss_mb"] - one["rss_mb"]) / extra_slots, 3),
        "marginal_mb_per_slot_pss": round((many["pss_mb"] - one["pss_mb"]) / extra_slots, 3),
        "marginal_mb_per_slot_1_to_10": round((ten["rss_mb"] - one["rss_mb"]) / 9, 3),
        "marginal_mb_per_process_rss": round((procs["rss_mb"] - one["rss_mb"]) / extra_procs, 1),
        "marginal_mb_per_process_pss": round((procs["pss_mb"] - one["pss_mb"]) / extra_procs, 1),
    }
