"""The pool's concurrency spread over 3, then 4, systemd hosts by the collection's playbooks.

converge ran selfhosted.workflow_agent.rollout at target 6 over hosts 1-3 (and idempotence ran it
again with changed=0). The tests below check that step, then run the next ones themselves with
the installed collection's playbooks and check each against systemd in the hosts and the
emulator's admin API. Each step builds on the state the one before left, so they run in file
order (pytest's) and a failed step makes the later ones fail too.

After each step, a real Prometheus (scripts/prometheus.sh, on this machine's loopback) scrapes
the agents through the file_sd the playbooks wrote (issue 18): exactly the planned instances are
its targets, each `up`, and `sum(workflow_agent_slots)` is the pool's target.

"Online" is judged with a short window (the agents poll every second) and against the exact set
of `<hostname>/<instance>` identities; removed agents are checked by their units being gone.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import testinfra
import testinfra.utils.ansible_runner
from wfa_testlib import DEADLINE, EPHEMERAL, INVENTORY, UNIT, journal_tail

GROUP, SPARE = "workflow_agents", "workflow_agents_spare"
ONLINE_WITHIN = 5  # seconds; agents poll every second
INSTALL = "/opt/workflow-agent"
# Jobs of step 3 that were claimed before the scale block until the test releases them, so the
# instances removed during the scale are certainly draining a running job when they stop.
RELEASE = "/run/wfa-scale-release"
BLOCKING_JOB = (
    f"i=0; while [ ! -e {RELEASE} ] && [ $i -lt 900 ]; do sleep 1; i=$((i+1)); done; "
    f"test -e {RELEASE}; echo released on $(hostname)"
)

_runner = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
HOSTS = sorted(_runner.get_hosts(GROUP))
NEW_HOST = sorted(_runner.get_hosts(SPARE))[0]
ALL = HOSTS + [NEW_HOST]


def host(name: str):
    # The scenario's hosts are docker containers named like their inventory names.
    return testinfra.get_host(f"docker://{name}")


def playbook(name: str, *extra: str, hosts: str = GROUP) -> str:
    """Run selfhosted.workflow_agent.<name> from the installed collection; its output."""
    cmd = [
        "ansible-playbook",
        "-i",
        str(Path(INVENTORY).parent),
        f"selfhosted.workflow_agent.{name}",
    ]
    cmd += ["-e", f"workflow_agent_hosts={hosts}", *extra]
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, check=False)
    log = EPHEMERAL / "verify-playbooks.log"
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n{run.stdout}{run.stderr}\n")
    assert run.returncode == 0, f"{' '.join(cmd)} failed:\n{run.stdout[-6000:]}{run.stderr[-3000:]}"
    return run.stdout


def configured(name: str) -> list[str]:
    """The instances a host has (config files the role wrote), in name order."""
    out = host(name).run("ls /etc/workflow-agent").stdout.split()
    return sorted(n[: -len(".yaml")] for n in out if n.endswith(".yaml"))


def active_units(name: str) -> list[str]:
    out = host(name).run(
        "systemctl list-units --plain --no-legend --state=active,activating,deactivating "
        f"'{UNIT}@*'"
    )
    return sorted(line.split()[0] for line in out.stdout.splitlines() if line.strip())


def runs(name: str, instance: str) -> str:
    """What identifies one run of an instance: a restart changes every part of it."""
    props = ["InvocationID", "MainPID", "ExecMainStartTimestampMonotonic"]
    out = host(name).check_output(
        "systemctl show " + " ".join(f"-p {p}" for p in props) + f" {UNIT}@{instance}.service"
    )
    return " ".join(sorted(out.split()))


def ids(split: dict[str, int]) -> set[str]:
    return {f"{h}/{i}" for h, n in split.items() for i in range(1, n + 1)}


def assert_split(split: dict[str, int]) -> None:
    """Each host has exactly instances 1..n configured and running, and nothing else."""
    for name, n in split.items():
        want = [str(i) for i in range(1, n + 1)]
        assert configured(name) == sorted(want), name
        assert active_units(name) == sorted(f"{UNIT}@{i}.service" for i in want), name


def assert_online(emulator, expected: set[str]) -> None:
    online = emulator.wait_agents(expected, online_within=ONLINE_WITHIN)
    assert set(online) == expected


def assert_scraped(prometheus, expected: set[str], slots: int) -> None:
    """The playbooks' file_sd lists exactly `expected` (`<host>/<instance>`), and Prometheus,
    scraping through it, has exactly those targets, each up, with `slots` slots in all."""
    sd = prometheus.file_sd()
    assert set(sd) == expected
    for label, group in sd.items():
        name, instance = label.split("/")
        assert group["labels"] == {
            "host": name,
            "instance": label,
            "pool": "default",
            "deploy_target": "process",
        }
        assert group["targets"][0].endswith(f":{8080 + int(instance) - 1}"), group
    seen = prometheus.wait_fleet(expected, slots)
    assert set(seen["targets"]) == expected, seen
    assert seen["up"] == dict.fromkeys(expected, "1"), seen
    assert seen["slots"] == ([str(slots)] if expected else []), seen


def install_state(name: str) -> str:
    """Inode and change time of the agent's install: a reinstall or re-link changes them."""
    return host(name).check_output(
        f"stat -c '%n %i %Z' {INSTALL}/current {INSTALL}/current/ {INSTALL}/current/.wheelhouse "
        f"{INSTALL}/current/bin/python"
    )


def test_step1_rollout_six_over_three(emulator, prometheus):
    split = dict.fromkeys(HOSTS, 2)
    assert_split(split)
    assert configured(NEW_HOST) == []  # the spare host is not in the play yet
    assert_online(emulator, ids(split))
    assert_scraped(prometheus, ids(split), 6)


def test_step2_scale_to_nine_adds_only(emulator, prometheus):
    kept = {(h, i): runs(h, i) for h in HOSTS for i in ("1", "2")}
    installed = {h: install_state(h) for h in HOSTS}

    # A dry run first: check mode predicts the change and makes none.
    out = playbook("scale", "--check", "-e", "workflow_agent_pool_target=9")
    assert "actual not checked (check mode); added 3" in out
    assert_split(dict.fromkeys(HOSTS, 2))
    assert {k: runs(*k) for k in kept} == kept

    out = playbook("scale", "-e", "workflow_agent_pool_target=9")

    split = dict.fromkeys(HOSTS, 3)
    assert_split(split)
    # Neither reinstalled nor restarted: same install, same runs of the instances that stay.
    assert {h: install_state(h) for h in HOSTS} == installed
    assert {k: runs(*k) for k in kept} == kept
    assert "planned 3 instance(s), 3 slot(s); actual 3 instance(s), 3 slot(s); added 3" in out
    assert_online(emulator, ids(split))
    assert_scraped(prometheus, ids(split), 9)


def test_step3_add_a_host_rebalances_without_losing_jobs(emulator, prometheus):
    before = {(h, i): runs(h, i) for h in HOSTS for i in ("1", "2", "3")}
    for name in ALL:
        host(name).check_output(f"rm -f {RELEASE}")

    # Nine blocking jobs, one on each of the nine agents (each has one slot).
    blocking = [emulator.create_job(BLOCKING_JOB, name="block") for _ in range(9)]
    claimed = _wait(
        lambda: [emulator.job(j) for j in blocking], lambda js: all(j["agent"] for j in js)
    )
    assert len({j["agent"] for j in claimed}) == 9, [j["agent"] for j in claimed]

    # While the scale runs: keep enqueueing jobs, and release the blocking ones once both
    # instances the plan removes (9 over 4 hosts: one host keeps 3, two give up instance 3) are
    # stopping, i.e. draining their blocking job.
    stop = threading.Event()
    during: list[str] = []
    released = threading.Event()

    def enqueue() -> None:
        while not stop.wait(2):
            during.append(emulator.create_job("echo enqueued during the scale"))

    def release() -> None:
        while not stop.wait(1):
            states = [active_state(h, "3") for h in HOSTS]
            if states.count("deactivating") >= 2:
                for name in ALL:
                    host(name).check_output(f"touch {RELEASE}")
                released.set()
                return

    threads = [threading.Thread(target=enqueue), threading.Thread(target=release)]
    for t in threads:
        t.start()
    try:
        out = playbook("scale", "-e", "workflow_agent_pool_target=9", hosts=f"{GROUP}:{SPARE}")
    finally:
        stop.set()
        for t in threads:
            t.join()
        for name in ALL:  # whatever happened, let the blocking jobs end
            host(name).run(f"touch {RELEASE}")
    assert released.is_set(), "no two instances were ever draining"
    assert during, "no job was enqueued during the scale"

    # 3/2/2/2 in some order; the new host has 2.
    counts = {h: len(configured(h)) for h in ALL}
    assert sorted(counts.values()) == [2, 2, 2, 3], counts
    assert counts[NEW_HOST] == 2
    assert_split(counts)
    full = [h for h in HOSTS if counts[h] == 3]
    trimmed = [h for h in HOSTS if counts[h] == 2]
    # Only instance 3 of the over-full hosts went; every other instance runs as before.
    for h in HOSTS:
        for i in configured(h):
            assert runs(h, i) == before[(h, i)], (h, i, journal_tail(host(h), i))
    for h in trimmed:
        assert "removed 3" in next(line for line in out.splitlines() if f"{h}: planned" in line)
        log = host(h).run(f"journalctl --no-pager -u {UNIT}@3.service").stdout
        assert "signal received: draining (1 running" in log, log[-3000:]
    assert full and all(f"{h}: planned 3 instance(s)" in out for h in full)

    # No job lost: every job enqueued before and during the scale succeeded, each claimed once.
    jobs = emulator.wait_jobs(blocking + during)
    assert Counter(j["status"] for j in jobs) == Counter(succeeded=len(jobs)), [
        (j["id"], j["status"], j["reason"]) for j in jobs if j["status"] != "succeeded"
    ]
    assert all(len(j["claims"]) == 1 for j in jobs)
    drained = {f"{h}/3" for h in trimmed}
    assert drained <= {j["agent"] for j in jobs if j["id"] in blocking}
    assert_online(emulator, ids(counts))
    # The removed instances are no longer scraped; the new host's are.
    assert_scraped(prometheus, ids(counts), 9)
    assert drained.isdisjoint(prometheus.targets())


def test_step4_rollout_to_zero_stops_everything(emulator, prometheus):
    playbook("rollout", "-e", "workflow_agent_pool_target=0", hosts=f"{GROUP}:{SPARE}")
    assert_scraped(prometheus, set(), 0)
    for name in ALL:
        assert configured(name) == [], name
        assert active_units(name) == [], name
        assert "workflow-agent run" not in host(name).check_output("ps -eo args="), name
    assert_online(emulator, set())


def test_step5_uninstall_removes_the_agent():
    playbook("uninstall", hosts=f"{GROUP}:{SPARE}")
    for name in ALL:
        h = host(name)
        for path in (
            INSTALL,
            "/etc/workflow-agent",
            "/var/lib/workflow-agent",
            f"/etc/systemd/system/{UNIT}@.service",
        ):
            assert not h.file(path).exists, (name, path)


def active_state(name: str, instance: str) -> str:
    return (
        host(name)
        .run(f"systemctl show -p ActiveState --value {UNIT}@{instance}.service")
        .stdout.strip()
    )


def _wait(get, done):
    deadline = time.monotonic() + DEADLINE
    while True:
        value = get()
        if done(value):
            return value
        assert time.monotonic() < deadline, value
        time.sleep(1)
