"""Rollout: `selfhosted.workflow_agent.rollout` to N systemd container hosts (10, 25 and 50 by
default: how the cost grows with the fleet), first converge and no-op re-runs, each beside a
baseline play on the same hosts with the same forks, connection and batches (serial) that runs
one `stat` and one `systemd` task: what any play over these hosts costs. The no-op and its
baseline alternate (B A B A ...) `repeats` times; the first converge happens once per size,
after one baseline. The collection is used from this working tree (a symlinked collections
path).

With WFA_BENCH_BEFORE=<git revision>, each no-op repeat also runs that revision's rollout
(same hosts, same agent source), so a change to the no-op path is measured before and after in
the same run: B A P, B A P, ... (P: the previous revision). The first converge is then measured
`repeats` times too, this tree's and that revision's alternately on fresh host containers (the
order swapped each repeat), each after its own baseline play.

Each first converge also reports where its CPU went: the controller's (ansible-playbook, its
forks and the docker CLI it runs: the CPU of this process's children) and the hosts' (their
containers' cgroups), separately, since on a real fleet each host has its own CPUs while here
all share the machine's.

The hosts, the network and the emulator container are named wfa-rel-bench-* and removed after.
"""

from __future__ import annotations

import os
import re
import resource
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchlib import DOCKER, REPO, STATE, spread

SIZES = (10, 25, 50)
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


def _hosts(count: int) -> list[str]:
    return [f"{PREFIX}-h{i:02d}" for i in range(1, count + 1)]


def _teardown() -> None:
    names = _docker("ps", "-aq", "--filter", f"name=^{PREFIX}-", check=False).stdout.split()
    if names:
        _docker("rm", "-f", *names, check=False)
    _docker("network", "rm", NET, check=False)


INOTIFY = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_PER_HOST = 6  # systemd, journald, logind ... of one host container (about 4), with room


def _inotify(count: int) -> None:
    """The host containers' systemd share the machine's per-user inotify instance limit; past it,
    the next container's systemd never finishes booting (the default 128 fits about 30 hosts).
    Raised as kind's docs advise for many nodes; never lowered."""
    need = 32 + count * INOTIFY_PER_HOST  # the smoke run's 2 hosts never need a change
    have = int(INOTIFY.read_text())
    if have >= need:
        return
    try:
        INOTIFY.write_text(str(need))
    except OSError as exc:
        raise RuntimeError(
            f"{count} systemd hosts need fs.inotify.max_user_instances >= {need} (it is {have}): "
            f"sysctl -w fs.inotify.max_user_instances={need}"
        ) from exc
    print(f"bench: fs.inotify.max_user_instances {have} -> {need}", file=sys.stderr, flush=True)


def _start_hosts(count: int) -> None:
    """Fresh host containers (removed first if they exist), booted."""
    names = _docker("ps", "-aq", "--filter", f"name=^{PREFIX}-h", check=False).stdout.split()
    if names:
        _docker("rm", "-f", *names, check=False)
    for host in _hosts(count):
        _docker(
            "run", "-d", "--name", host, "--hostname", host, "--network", NET,
            "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined", "--cgroupns=host",
            "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock",
            "--tmpfs", "/tmp", "local/debian12-systemd:latest", "/sbin/init",
        )  # fmt: skip
    for host in _hosts(count):
        _docker("exec", host, "systemctl", "is-system-running", "--wait", check=False)


def _cpu_of_hosts(count: int) -> float | None:
    """CPU seconds the host containers used so far (cgroup v1 or v2); None when unreadable."""
    total = 0.0
    for host in _hosts(count):
        cid = _docker("inspect", "-f", "{{.Id}}", host).stdout.strip()
        v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
        v2 = [
            Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat"),
            Path(f"/sys/fs/cgroup/docker/{cid}/cpu.stat"),
        ]
        if v1.exists():
            total += int(v1.read_text()) / 1e9
            continue
        stat = next((f for f in v2 if f.exists()), None)
        if stat is None:
            return None
        usage = re.search(r"^usage_usec (\d+)", stat.read_text(), re.M)
        total += int(usage.group(1)) / 1e6 if usage else 0.0
    return total


def _setup(work: Path, count: int) -> None:
    _teardown()
    _inotify(count)
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
    _start_hosts(count)
    lines = ["workflow_agents:", "  hosts:"]
    lines += [f"    {h}:" for h in _hosts(count)]
    lines += [
        "  vars:",
        "    ansible_connection: community.docker.docker",
        "    ansible_python_interpreter: /usr/bin/python3",
        f"    workflow_agent_pool_target: {count}",
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
    if BEFORE:
        tree = work / "before" / "ansible_collections" / "selfhosted" / "workflow_agent"
        tree.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", BEFORE], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)


BEFORE = os.environ.get("WFA_BENCH_BEFORE", "")


def _play(work: Path, playbook: str, log: str, serial: str = SERIAL, before: bool = False) -> dict:
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(work / ("before" if before else "collections")),
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
    if before:  # the same agent (and so the same install) as this tree's
        cmd += ["-e", f"workflow_agent_source_dir={REPO / 'agent'}"]
    count = len(_hosts_in(work))
    cpu0, hosts0 = resource.getrusage(resource.RUSAGE_CHILDREN), _cpu_of_hosts(count)
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=work, timeout=3600, check=False
    )
    seconds = time.monotonic() - t0
    cpu1, hosts1 = resource.getrusage(resource.RUSAGE_CHILDREN), _cpu_of_hosts(count)
    (work / log).write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"{playbook} failed (rc {proc.returncode}); see {work / log}")
    changed = sum(int(n) for n in re.findall(r"changed=(\d+)", proc.stdout))
    tasks = _task_seconds(proc.stdout)
    controller = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "seconds": round(seconds, 1),
        "controller_cpu_s": round(controller, 1),
        "hosts_cpu_s": None if hosts0 is None or hosts1 is None else round(hosts1 - hosts0, 1),
        "changed": changed,
        "task_runs": sum(n for n, _ in tasks.values()),
        "slowest_tasks_s": {k: round(t, 1) for k, (_, t) in list(tasks.items())[:10]},
    }


def _hosts_in(work: Path) -> list[str]:
    text = (work / "inventory.yml").read_text()
    return re.findall(rf"^    ({PREFIX}-h\d+):$", text, re.M)


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


def size(work: Path, count: int, repeats: int) -> dict:
    _setup(work, count)
    baseline_before = _play(work, "baseline.yml", "baseline-0.log")
    first = _play(work, "selfhosted.workflow_agent.rollout", "rollout-0.log")
    runs = []
    before_installs = 0
    for i in range(1, repeats + 1):
        base = _play(work, "baseline.yml", f"baseline-{i}.log")
        no_op = _play(work, "selfhosted.workflow_agent.rollout", f"rollout-{i}.log")
        if no_op["changed"]:
            changed = no_op["changed"]
            raise RuntimeError(f"no-op rollout {i} changed {changed} tasks (rollout-{i}.log)")
        run = {
            "baseline_s": base["seconds"],
            "no_op_s": no_op["seconds"],
            "no_op_ratio": round(no_op["seconds"] / base["seconds"], 2),
            "no_op_s_per_host": round(no_op["seconds"] / count, 3),
        }
        if BEFORE and not before_installs:
            prev = _play(work, "selfhosted.workflow_agent.rollout", f"before-{i}.log", before=True)
            if prev["changed"]:
                # BEFORE installs differently (its install's record differs from this tree's):
                # its no-op is not measurable on these hosts. This tree's install is put back
                # (not counted) and the rest of the repeats run without BEFORE's no-op.
                before_installs = prev["changed"]
                _play(work, "selfhosted.workflow_agent.rollout", f"restore-{i}.log")
            else:
                run["before_no_op_s"] = prev["seconds"]
                run["before_no_op_ratio"] = round(prev["seconds"] / base["seconds"], 2)
        runs.append(run)
    out = {
        "hosts": count,
        "baseline_before": baseline_before,
        "first_converge": first,
        "first_converge_ratio": round(first["seconds"] / baseline_before["seconds"], 2),
        "first_converge_s_per_host": round(first["seconds"] / count, 2),
        "slowest_no_op_tasks_s": no_op["slowest_tasks_s"],
        "runs": runs,
        "no_op": spread(runs),
    }
    if before_installs:
        out["before_no_op"] = (
            f"n/a: {BEFORE} changed {before_installs} tasks on hosts this tree installed "
            "(another install), so its no-op was not measured"
        )
    if BEFORE:
        out["first_runs"] = _first_before_after(work, count, repeats)
        out["first"] = spread(out["first_runs"])
    return out


def _first_before_after(work: Path, count: int, repeats: int) -> list[dict]:
    """The first converge of this tree (A) and of BEFORE (P), each on fresh hosts after its own
    baseline play: A P, P A, A P, ... so that a load that drifts hits both alike."""
    runs = []
    for i in range(1, repeats + 1):
        run: dict = {}
        for before in (False, True) if i % 2 else (True, False):
            key = "before" if before else "after"
            _start_hosts(count)
            base = _play(work, "baseline.yml", f"first-baseline-{key}-{i}.log")
            first = _play(
                work, "selfhosted.workflow_agent.rollout", f"first-{key}-{i}.log", before=before
            )
            run[key] = {
                "baseline_s": base["seconds"],
                "first_s": first["seconds"],
                "ratio": round(first["seconds"] / base["seconds"], 2),
                "s_per_host": round(first["seconds"] / count, 2),
                "controller_cpu_s_per_host": round(first["controller_cpu_s"] / count, 2),
                "hosts_cpu_s_per_host": None
                if first["hosts_cpu_s"] is None
                else round(first["hosts_cpu_s"] / count, 2),
                "baseline_controller_cpu_s_per_host": round(base["controller_cpu_s"] / count, 2),
                "task_runs": first["task_runs"],
                "slowest_tasks_s": first["slowest_tasks_s"],
            }
        runs.append(run)
    return runs


def run(sizes: tuple[int, ...] = SIZES, repeats: int = 5) -> dict:
    if not (REPO / "playbooks" / "rollout.yml").exists():
        return {"na": "n/a: playbooks/rollout.yml does not exist yet"}
    work = STATE / "rollout"
    out: dict = {"forks": FORKS, "serial": SERIAL, "repeats": repeats, "sizes": {}}
    if BEFORE:
        out["before"] = BEFORE
    try:
        for count in sizes:
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            work.chmod(0o700)
            out["sizes"][str(count)] = size(work, count, repeats)
        return out
    finally:
        _teardown()
