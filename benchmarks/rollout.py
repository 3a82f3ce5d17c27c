"""Rollout: `selfhosted.workflow_agent.rollout` to 10 systemd container hosts, first converge and
a no-op re-run, each beside a baseline play on the same hosts with the same forks, connection
and batches (serial) that runs one `stat` and one `systemd` task: what any play over these hosts
costs. The collection is used from this working tree (a symlinked collections path).

The hosts, the network and the emulator container are named wfa-rel-bench-* and removed after.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchlib import DOCKER, REPO, STATE

HOSTS = 10
FORKS = 10
PREFIX = "wfa-rel-bench"
NET = f"{PREFIX}-net"
EMU = f"{PREFIX}-emulator"
SERIAL = "25%"  # the rollout's default batch size; the baseline uses the same
BASELINE = """\
- name: Baseline - one stat and one systemd task per host
  hosts: workflow_agents
  gather_facts: false
  become: true
  serial: "{{ workflow_agent_serial | default('25%') }}"
  tasks:
    - name: Stat the agent's config directory
      ansible.builtin.stat:
        path: /etc/workflow-agent
    - name: A service that is already running
      ansible.builtin.systemd:
        name: systemd-journald
        state: started
"""


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=check, timeout=600)


def _hosts() -> list[str]:
    return [f"{PREFIX}-h{i:02d}" for i in range(1, HOSTS + 1)]


def _teardown() -> None:
    _docker("rm", "-f", *_hosts(), EMU, check=False)
    _docker("network", "rm", NET, check=False)


def _setup(work: Path) -> None:
    _teardown()
    _docker("network", "create", NET)
    token = "pul-" + secrets.token_hex(20)
    (work / "pool-token").write_text(token)
    env = work / "emulator.env"
    env.write_text(f"EMULATOR_SEED_TOKEN={token}\nEMULATOR_ADMIN_TOKEN={secrets.token_hex(20)}\n")
    for path in (work / "pool-token", env):
        path.chmod(0o600)
    _docker(
        "run", "-d", "--name", EMU, "--network", NET, "--env-file", str(env),
        "local/workflow-emulator:latest",
    )  # fmt: skip
    for host in _hosts():
        _docker(
            "run", "-d", "--name", host, "--hostname", host, "--network", NET,
            "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined", "--cgroupns=host",
            "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock",
            "--tmpfs", "/tmp", "local/debian12-systemd:latest", "/sbin/init",
        )  # fmt: skip
    for host in _hosts():
        _docker("exec", host, "systemctl", "is-system-running", "--wait", check=False)
    lines = ["workflow_agents:", "  hosts:"]
    lines += [f"    {h}:" for h in _hosts()]
    lines += [
        "  vars:",
        "    ansible_connection: community.docker.docker",
        "    ansible_python_interpreter: /usr/bin/python3",
        f"    workflow_agent_pool_target: {HOSTS}",
        f"    workflow_agent_service_url: http://{EMU}:8080",
        "    workflow_agent_token: \"{{ lookup('ansible.builtin.file', '"
        + f"{work}/pool-token') }}}}\"",
        "    workflow_agent_deploy_target: process",
        "    workflow_agent_polling_interval: 5s",
    ]
    (work / "inventory.yml").write_text("\n".join(lines) + "\n")
    (work / "baseline.yml").write_text(BASELINE)
    collections = work / "collections" / "ansible_collections" / "selfhosted"
    collections.mkdir(parents=True)
    (collections / "workflow_agent").symlink_to(REPO)


def _play(work: Path, playbook: str, log: str, serial: str = SERIAL) -> dict:
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(work / "collections"),
        "ANSIBLE_FORKS": str(FORKS),
        "ANSIBLE_HOST_KEY_CHECKING": "false",
        "ANSIBLE_NOCOLOR": "1",
        # Timings per task (on every play, the baseline too, so both carry the same cost).
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    cmd = [
        "ansible-playbook", "-i", str(work / "inventory.yml"), playbook,
        "-e", f"workflow_agent_serial={serial}",
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=work, timeout=3600, check=False
    )
    seconds = time.monotonic() - t0
    (work / log).write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"{playbook} failed (rc {proc.returncode}); see {work / log}")
    changed = sum(int(n) for n in re.findall(r"changed=(\d+)", proc.stdout))
    tasks = _task_seconds(proc.stdout)
    return {
        "seconds": round(seconds, 1),
        "changed": changed,
        "task_runs": sum(n for n, _ in tasks.values()),
        "slowest_tasks_s": {k: round(t, 1) for k, (_, t) in list(tasks.items())[:10]},
    }


_HEADER = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(.*?)\]|^TASKS RECAP")
_ELAPSED = re.compile(r"\((\d+):(\d+):(\d+(?:\.\d+)?)\)")


def _task_seconds(output: str) -> dict[str, tuple[int, float]]:
    """{task: (runs, total seconds)} over all batches, slowest first. profile_tasks prints,
    under each task header (and under TASKS RECAP), how long the previous task took."""
    totals: dict[str, list] = {}
    last = pending = None
    expect = False
    for line in output.splitlines():
        header = _HEADER.match(line)
        if header:
            pending, last, expect = last, header.group(1), True
            continue
        elapsed = _ELAPSED.search(line) if expect else None
        if elapsed:
            expect = False
            h, m, sec = elapsed.groups()
            if pending:
                entry = totals.setdefault(pending, [0, 0.0])
                entry[0] += 1
                entry[1] += int(h) * 3600 + int(m) * 60 + float(sec)
    ordered = sorted(totals.items(), key=lambda kv: -kv[1][1])
    return {k: (v[0], v[1]) for k, v in ordered}


def run() -> dict:
    if not (REPO / "playbooks" / "rollout.yml").exists():
        return {"na": "n/a: playbooks/rollout.yml does not exist yet"}
    work = STATE / "rollout"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    work.chmod(0o700)
    try:
        _setup(work)
        out: dict = {"hosts": HOSTS, "forks": FORKS, "serial": SERIAL}
        out["baseline_before"] = _play(work, "baseline.yml", "baseline-1.log")
        out["first_converge"] = _play(work, "selfhosted.workflow_agent.rollout", "rollout-1.log")
        out["baseline"] = _play(work, "baseline.yml", "baseline-2.log")
        out["baseline_unbatched"] = _play(work, "baseline.yml", "baseline-3.log", serial="100%")
        out["no_op"] = _play(work, "selfhosted.workflow_agent.rollout", "rollout-2.log")
        first, base = out["baseline_before"]["seconds"], out["baseline"]["seconds"]
        out["first_converge_ratio"] = round(out["first_converge"]["seconds"] / first, 2)
        out["no_op_ratio"] = round(out["no_op"]["seconds"] / base, 2)
        return out
    finally:
        _teardown()
