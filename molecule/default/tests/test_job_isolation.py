"""issue 16: a process-target job runs as the job user and cannot reach the agent.

The job tries to read each instance's config and /proc/<agent pid>/environ, to write the config
and to signal the agent; each attempt's error shows in the job's log. A daemon it starts with
setsid (out of the step's process group) is gone once the job ends: the job's cgroup is killed.
"""

import shlex
import time

from wfa_testlib import CONFIG_DIR, hosts, show

testinfra_hosts = hosts()
NAMES = ["1", "2"]


def attempts(pids: dict[str, str], marker: str) -> str:
    lines = ["id -un", "grep -E '^Cap(Prm|Eff|Amb)' /proc/self/status"]
    for name, pid in pids.items():
        cfg = f"{CONFIG_DIR}/{name}.yaml"
        lines += [
            f'e=$(cat {cfg} 2>&1 >/dev/null) || echo "read config {name}: $e"',
            f'e=$(cat /proc/{pid}/environ 2>&1 >/dev/null) || echo "read environ {name}: $e"',
            f'e=$( (echo x >> {cfg}) 2>&1) || echo "write config {name}: $e"',
            f'e=$(kill -TERM {pid} 2>&1) || echo "signal agent {name}: $e"',
        ]
    # A daemon in a session of its own, out of the step's process group. Neither the daemon's
    # command line nor pgrep's pattern is spelled out in this script (the step's shell would
    # match): $m and the pattern's [] keep them apart.
    whole, frac = marker.split(".")
    lines += [
        f'm={whole}; setsid sh -c "exec sleep $m.{frac}" </dev/null >/dev/null 2>&1 &',
        "sleep 1",
        f'echo "daemon: $(pgrep -u "$(id -u)" -f {shlex.quote(pattern(marker))} | xargs)"',
    ]
    return "\n".join(lines)


def pattern(marker: str) -> str:
    return "slee[p] " + marker.replace(".", "[.]")


def test_a_job_cannot_reach_the_agent_and_its_setsid_daemon_dies(host, emulator, pool_token):
    pids = {n: show(host, n, "MainPID")["MainPID"] for n in NAMES}
    sums = {n: host.check_output(f"sha1sum {CONFIG_DIR}/{n}.yaml") for n in NAMES}
    marker = "4242.16"  # a sleep only this job starts
    job = emulator.run_on_host(host.check_output("hostname"), attempts(pids, marker))
    logs = job["steps"][0]["logs"]
    print("\n".join(logs))  # the failures, for the record

    assert job["status"] == "succeeded", job
    assert logs[0] == "workflow-agent-job"
    # setpriv left the step no capabilities (the agent's ambient ones included).
    assert [line.split()[1] for line in logs[1:4]] == ["0000000000000000"] * 3, logs
    for name in NAMES:
        for what in ("read config", "read environ", "write config"):
            line = next(x for x in logs if x.startswith(f"{what} {name}: "))
            assert "Permission denied" in line, line
        line = next(x for x in logs if x.startswith(f"signal agent {name}: "))
        assert "Operation not permitted" in line, line
    assert pool_token not in "\n".join(logs)
    daemon = logs[-1].removeprefix("daemon:").split()
    assert len(daemon) == 1 and daemon[0].isdigit(), logs[-1]  # it ran, as the job user
    # Nothing changed: same configs, same agent processes, still running.
    assert {n: host.check_output(f"sha1sum {CONFIG_DIR}/{n}.yaml") for n in NAMES} == sums
    assert {n: show(host, n, "MainPID")["MainPID"] for n in NAMES} == pids

    # The daemon ran as the job user and is gone with the job.
    deadline = time.monotonic() + 60
    while host.run(f"pgrep -f {shlex.quote(pattern(marker))}").rc == 0:
        assert time.monotonic() < deadline, host.check_output("ps -o user,pid,sid,args -C sleep")
        time.sleep(1)
    # ... and so is the job's directory (work/ emptied by the job user, the rest by the agent).
    left = "ls -d /var/lib/workflow-agent/*/shared/workflow-agent-job-* 2>/dev/null"
    while host.run(left).stdout.strip():
        assert time.monotonic() < deadline, host.run(left).stdout
        time.sleep(1)
    journal = host.check_output("journalctl --no-pager -o cat -u 'workflow-agent@*'")
    assert "no delegated cgroup" not in journal
