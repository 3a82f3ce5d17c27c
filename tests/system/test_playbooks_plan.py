"""The planning part of the rollout, scale and plan playbooks, through real ansible-playbook.

No containers: the inventories' hosts point at a closed port on 127.0.0.1, so any attempt to
reach one shows up as `unreachable`. With explicit weights the plan never needs to; the tests
check that, which is also how "a bad plan fails before any host changes" is observable here.
Capacity from facts is tested with hosts that run locally (their facts are this machine's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_plugins_common import PLAYBOOK_TIMEOUT, collections_path

BIN = Path(sys.executable).parent
PLAN_TASK = "Plan the pool (once, on the controller)"
NAMES_TASK = "Name each host's instances (stable names, so scaling down removes the highest)"
UNREACHABLE = {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_connection": "ssh"}


def run(tmp_path: Path, playbook: str, hosts: dict, *extra: str, group="workflow_agents"):
    """ansible-playbook selfhosted.workflow_agent.<playbook>; (rc, json report, raw output)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump({group: {"hosts": hosts, "vars": UNREACHABLE}}, sort_keys=False)
    )
    cmd = [
        str(BIN / "ansible-playbook"),
        "-i",
        str(inventory),
        f"selfhosted.workflow_agent.{playbook}",
    ]
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(collections_path(tmp_path)),
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
        "ANSIBLE_HOST_KEY_CHECKING": "0",
        "ANSIBLE_NOCOLOR": "1",
    }
    proc = subprocess.run(
        [*cmd, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=PLAYBOOK_TIMEOUT,
        check=False,
    )
    try:
        report = json.loads(proc.stdout[proc.stdout.index("{") :])
    except ValueError:
        pytest.fail(f"no JSON report from {cmd}:\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, report, proc.stdout + proc.stderr


def task(report: dict, name: str) -> dict:
    """Per-host results of the first task called `name`."""
    for play in report["plays"]:
        for t in play["tasks"]:
            if t["task"]["name"] == name:
                return t["hosts"]
    raise AssertionError(f"no task {name!r} ran")


def task_names(report: dict) -> list[str]:
    return [t["task"]["name"] for play in report["plays"] for t in play["tasks"]]


def planned(report: dict) -> dict[str, list[dict]]:
    """{host: workflow_agent_planned_instances} as the plan set them."""
    return {
        h: r["ansible_facts"]["workflow_agent_planned_instances"]
        for h, r in task(report, NAMES_TASK).items()
    }


def instances(*slots: int) -> list[dict]:
    return [{"name": str(i), "slots": s} for i, s in enumerate(slots, 1)]


def assert_no_host_contacted(report: dict) -> None:
    assert all(s["unreachable"] == 0 for s in report["stats"].values()), report["stats"]


def test_equal_hosts_get_equal_shares(tmp_path):
    hosts = {"h1": {}, "h2": {}, "h3": {}}
    rc, report, out = run(
        tmp_path,
        "plan",
        hosts,
        "-e",
        "workflow_agent_pool_target=9",
        "-e",
        "workflow_agent_weight=1",
    )
    assert rc == 0, out
    assert planned(report) == dict.fromkeys(hosts, instances(1, 1, 1))
    [plan] = task(report, PLAN_TASK).values()
    assert plan["ansible_facts"]["workflow_agent_plan"] == dict.fromkeys(
        hosts, {"instances": 3, "slots": 3}
    )
    assert_no_host_contacted(report)


def test_weights_bounds_and_partial_last_instance(tmp_path):
    hosts = {
        "big": {"workflow_agent_weight": 3},
        "mid": {"workflow_agent_weight": 1},
        "small": {"workflow_agent_weight": 1, "workflow_agent_max_instances": 1},
        "pinned": {"workflow_agent_weight": 1, "workflow_agent_min_instances": 2},
    }
    rc, report, out = run(
        tmp_path,
        "plan",
        hosts,
        "-e",
        "workflow_agent_pool_target=13",
        "-e",
        "workflow_agent_slots_per_instance=2",
    )
    assert rc == 0, out
    # Shares 13 * w / 6 clamped: pinned >= 4 slots, small <= 2; the rest by weight (3:1).
    assert planned(report) == {
        "big": instances(2, 2, 1),
        "mid": instances(2),
        "small": instances(2),
        "pinned": instances(2, 2),
    }
    show = task(report, "Show the plan")
    [lines] = [r["msg"] for r in show.values()]
    assert "big: 3 instance(s), 5 slot(s) (weight 3)" in lines
    assert lines[-1] == "total: 13 slot(s) over 4 host(s), 2 per instance (target 13, cap 150)"
    assert_no_host_contacted(report)


def test_plan_does_not_depend_on_inventory_order(tmp_path):
    hosts = {f"h{i}": {"workflow_agent_weight": w} for i, w in enumerate([5, 1, 2, 2, 3])}
    plans = []
    for n, order in enumerate([list(hosts), list(reversed(hosts))]):
        rc, report, out = run(
            tmp_path / str(n),
            "plan",
            {h: hosts[h] for h in order},
            "-e",
            "workflow_agent_pool_target=11",
        )
        assert rc == 0, out
        plans.append(planned(report))
    assert plans[0] == plans[1]
    assert sum(s["slots"] for i in plans[0].values() for s in i) == 11


def test_scaling_down_keeps_the_lowest_names(tmp_path):
    hosts = {"a": {}, "b": {}}
    runs = {}
    for target in (6, 4):
        rc, report, out = run(
            tmp_path / str(target),
            "plan",
            hosts,
            "-e",
            f"workflow_agent_pool_target={target}",
            "-e",
            "workflow_agent_weight=1",
        )
        assert rc == 0, out
        runs[target] = planned(report)
    assert runs[6] == dict.fromkeys(hosts, instances(1, 1, 1))
    # From 3 to 2 instances per host: instance "3" goes, "1" and "2" stay as they were.
    assert runs[4] == dict.fromkeys(hosts, instances(1, 1))


def test_target_zero_plans_no_instances(tmp_path):
    hosts = {"a": {"workflow_agent_min_instances": 2}, "b": {}}
    rc, report, out = run(
        tmp_path,
        "plan",
        hosts,
        "-e",
        "workflow_agent_pool_target=0",
        "-e",
        "workflow_agent_weight=1",
    )
    assert rc == 0, out
    assert planned(report) == {"a": [], "b": []}


def test_capacity_from_facts(tmp_path):
    """Two hosts run locally (this machine's facts), one has an explicit weight."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {
        "local1": local,
        "local2": {**local, "workflow_agent_weight_memory_mb": 1},
        "weighted": {"workflow_agent_weight": 1},
    }
    rc, report, out = run(tmp_path, "plan", hosts, "-e", "workflow_agent_pool_target=20")
    assert rc == 0, out
    facts = task(report, "Gather the facts a host's capacity comes from")
    assert facts["weighted"].get("skipped") is True  # an explicit weight needs no facts
    cpus = len(os.sched_getaffinity(0))
    memory_mb = _memtotal_mb()
    [plan] = task(report, PLAN_TASK).values()
    weights = plan["ansible_facts"]["workflow_agent_plan_weights"]
    # max(1, min(cpus, memory_mb // workflow_agent_weight_memory_mb (default 2048)))
    assert weights == {
        "local1": max(1, min(cpus, memory_mb // 2048)),
        "local2": max(1, min(cpus, memory_mb // 1)),
        "weighted": 1,
    }


def _memtotal_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["-e", "workflow_agent_pool_target=7", "-e", "workflow_agent_max_instances=2"],
            "pool_plan: target 7 is above the hosts' total max of 6 slots "
            "(6 instances x 1 slot per instance)",
        ),
        (
            ["-e", "workflow_agent_pool_target=151"],
            "pool_plan: target 151 is above the cap of 150 concurrent workflows",
        ),
        (
            ["-e", "workflow_agent_pool_target=12", "-e", "workflow_agent_pool_cap=10"],
            "pool_plan: target 12 is above the cap of 10 concurrent workflows",
        ),
    ],
)
@pytest.mark.parametrize("playbook", ["rollout", "scale"])
def test_impossible_target_fails_before_any_host_changes(tmp_path, playbook, extra, message):
    hosts = {"a": {}, "b": {}, "c": {}}
    rc, report, out = run(tmp_path, playbook, hosts, "-e", "workflow_agent_weight=1", *extra)
    assert rc != 0
    [failed] = task(report, PLAN_TASK).values()
    assert failed["failed"] is True
    assert message in failed["msg"]
    # The run stopped at the plan: nothing of the host plays ran, and no host was contacted.
    names = task_names(report)
    assert names[-1] == PLAN_TASK, names
    assert "Converge this host to its planned instances" not in names
    assert_no_host_contacted(report)
    assert all(s["changed"] == 0 for s in report["stats"].values())


def test_missing_target_is_named(tmp_path):
    rc, report, out = run(tmp_path, "rollout", {"a": {}}, "-e", "workflow_agent_weight=1")
    assert rc != 0
    [failed] = task(report, "Check the plan's inputs").values()
    assert "Set workflow_agent_pool_target, the pool's total concurrency" in failed["msg"]
    assert_no_host_contacted(report)


def test_limit_is_refused_unless_asked_for(tmp_path):
    hosts = {"a": {}, "b": {}, "c": {}}
    common = ["-e", "workflow_agent_pool_target=6", "-e", "workflow_agent_weight=1", "--limit", "a"]
    rc, report, out = run(tmp_path / "1", "rollout", hosts, *common)
    assert rc != 0
    [failed] = task(report, "Check the plan's inputs").values()
    assert "with --limit a it would put the whole pool on 1 host(s)" in failed["msg"]
    assert_no_host_contacted(report)

    rc, report, out = run(
        tmp_path / "2", "plan", hosts, *common, "-e", "workflow_agent_plan_limited=true"
    )
    assert rc == 0, out
    assert planned(report) == {"a": instances(*[1] * 6)}


def test_host_pattern_is_a_variable(tmp_path):
    hosts = {"x": {}, "y": {}}
    rc, report, out = run(
        tmp_path,
        "plan",
        hosts,
        "-e",
        "workflow_agent_pool_target=4",
        "-e",
        "workflow_agent_weight=1",
        "-e",
        "workflow_agent_hosts=builders",
        group="builders",
    )
    assert rc == 0, out
    assert planned(report) == dict.fromkeys(hosts, instances(1, 1))
