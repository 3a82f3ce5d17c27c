"""The agent role's macOS (launchd) tasks, run by real ansible-playbook on this Linux machine.

There is no macOS here, so `launchctl` is the one thing mocked: FAKE_LAUNCHCTL below keeps the
state launchd would (loaded, running, disabled jobs) in a JSON file, logs every command line,
and fails the way launchctl does for a disabled, unknown or already loaded job. Everything else
is real: the role's task files and plist template, plistlib parsing the plists they write, and
real agent processes (against the real emulator) answering the role's health checks.
"""

from __future__ import annotations

import grp
import json
import os
import plistlib
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from test_plugins_common import collections_path, run_play

LABEL = "com.selfhosted.workflow-agent"
STOP_TIMEOUT = 330

FAKE_LAUNCHCTL = r"""
import json, os, plistlib, sys
state_file, log_file = os.environ["FAKE_LAUNCHD_STATE"], os.environ["FAKE_LAUNCHD_LOG"]
state = json.load(open(state_file)) if os.path.exists(state_file) else {}
args = sys.argv[1:]
with open(log_file, "a") as fh:
    fh.write(" ".join(args) + "\n")

def job(target):
    new = {"loaded": False, "disabled": False, "starts": 0}
    return state.setdefault(target.split("/", 1)[1], new)

def done(rc=0, out="", err=""):
    json.dump(state, open(state_file, "w"))
    sys.stdout.write(out); sys.stderr.write(err); sys.exit(rc)

cmd = args[0]
if cmd == "print":
    j = job(args[1])
    if not j["loaded"]:
        done(113, err="Could not find service \"%s\" in domain for system\n" % args[1])
    done(0, out="%s = {\n\tstate = running\n\tpid = 4242\n}\n" % args[1])
if cmd == "print-disabled":
    lines = ['\t"%s" => %s' % (k, "disabled" if v["disabled"] else "enabled")
             for k, v in state.items()]
    done(0, out="disabled services = {\n" + "\n".join(lines) + "\n}\n")
if cmd == "bootstrap":
    with open(args[2], "rb") as fh:
        label = plistlib.load(fh)["Label"]
    j = job("system/" + label)
    if j["disabled"]:
        done(5, err="Bootstrap failed: 5: Input/output error\n")
    if j["loaded"]:
        done(5, err="Bootstrap failed: 5: Input/output error\n")
    j["loaded"] = True; j["starts"] += 1
    done()
if cmd == "bootout":
    j = job(args[1])
    if not j["loaded"]:
        done(3, err="Boot-out failed: 3: No such process\n")
    j["loaded"] = False
    done()
if cmd in ("enable", "disable"):
    job(args[1])["disabled"] = cmd == "disable"
    done()
if cmd == "kickstart":
    j = job(args[-1])
    if not j["loaded"]:
        done(113, err="Could not find service\n")
    j["starts"] += 1
    done()
done(64, err="unknown subcommand %s\n" % cmd)
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the role writes root-owned plists")


class Launchd:
    """The mocked launchctl: its log of command lines and its job state."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.state_file = base / "launchd-state.json"
        self.log_file = base / "launchctl.log"
        self.exe = base / "launchctl"
        self.exe.write_text(f"#!{sys.executable}\n{FAKE_LAUNCHCTL}")
        self.exe.chmod(0o755)

    @property
    def env(self) -> dict[str, str]:
        return {"FAKE_LAUNCHD_STATE": str(self.state_file), "FAKE_LAUNCHD_LOG": str(self.log_file)}

    def calls(self) -> list[str]:
        """Command lines since the last call, without the read-only queries."""
        lines = self.log_file.read_text().splitlines() if self.log_file.exists() else []
        self.log_file.write_text("")
        return [ln for ln in lines if not ln.startswith(("print ", "print-disabled"))]

    def jobs(self) -> dict:
        return json.loads(self.state_file.read_text())


@pytest.fixture
def launchd(tmp_path) -> Launchd:
    return Launchd(tmp_path)


@pytest.fixture
def agents(make_agent):
    """Two real agents named 1 and 2: what launchd would have started, for the health checks."""
    return {name: make_agent(name).start() for name in ("1", "2")}


def role_vars(tmp_path: Path, launchd: Launchd, agents: dict, remove=(), **extra) -> dict:
    user = pwd.getpwuid(os.geteuid()).pw_name
    return {
        "workflow_agent_install_dir": str(tmp_path / "opt"),
        "workflow_agent_config_dir": str(tmp_path / "etc"),
        "workflow_agent_data_dir": str(tmp_path / "var"),
        "workflow_agent_log_dir": str(tmp_path / "log"),
        "workflow_agent_user": user,
        "workflow_agent_group": grp.getgrgid(os.getegid()).gr_name,
        "workflow_agent_proxy": {"https": "http://proxy.invalid:3128"},
        # The plan preflight would make on a Mac (module_utils/agent_plan.py), with this test's
        # LaunchDaemons directory, mocked launchctl, root group and agents' ports; and what
        # present.yml would have set.
        "_workflow_agent_plan": mac_plan(tmp_path, launchd, agents, remove),
        "_workflow_agent_stop_timeout": STOP_TIMEOUT,
        **extra,
    }


def mac_plan(tmp_path: Path, launchd: Launchd, agents: dict, remove) -> dict:
    """The plan's own answer for a Mac, with this test's LaunchDaemons directory, mocked
    launchctl and root group, and the agents' ports."""
    sys.path.insert(0, str(collections_path(tmp_path / "play")))
    from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import agent_plan

    root_group = grp.getgrgid(0).gr_name
    darwin = dict(
        agent_plan.FAMILIES["Darwin"],
        launchd_dir=str(tmp_path / "LaunchDaemons"),
        launchctl=str(launchd.exe),
        root_group=root_group,
    )
    inputs = {key: "" for key in agent_plan.INPUTS}
    inputs.update(
        state="present",
        service_state="started",
        user="u",
        group="g",
        config_dir=str(tmp_path / "etc"),
        data_dir=str(tmp_path / "var"),
        install_dir=str(tmp_path / "opt"),
        log_dir=str(tmp_path / "log"),
        instances=[n for n in agents if n not in remove],
        http_port_base=8080,
        config={},
        version="0.2.0",
        launchd_label=LABEL,
    )
    # The instances to remove are what the look would list in the config directory.
    found = {"lists": {inputs["config_dir"]: [f"{n}.yaml" for n in agents]}}
    saved = agent_plan.FAMILIES["Darwin"]
    agent_plan.FAMILIES["Darwin"] = darwin
    try:
        plan = agent_plan.plan(inputs, {"os_family": "Darwin", "supported": True}, found)
    finally:
        agent_plan.FAMILIES["Darwin"] = saved
    plan["present"] = [dict(i, port=agents[i["name"]].port) for i in plan["present"]]
    assert plan["remove"] == list(remove)
    return plan


def include(tasks_from: str, name: str) -> dict:
    return {
        "name": name,
        "ansible.builtin.include_role": {
            "name": "selfhosted.workflow_agent.agent",
            "tasks_from": tasks_from,
        },
    }


APPLY = [
    {
        "name": "dir",
        "ansible.builtin.file": {
            "path": "{{ _workflow_agent_plan.launchd_dir }}",
            "state": "directory",
            "mode": "0755",
        },
    },
    include("service_launchd", "plists"),
    include("state_launchd", "state"),
    {  # as converge.yml drives them: one instance after the other
        **include("state_launchd_one", "each"),
        "loop": "{{ _workflow_agent_plan.present }}",
        "loop_control": {
            "loop_var": "_workflow_agent_instance",
            "index_var": "_workflow_agent_index",
        },
    },
]


def apply(tmp_path, launchd, agents, **extra):
    run = run_play(
        tmp_path / "play",
        APPLY,
        variables=role_vars(tmp_path, launchd, agents, **extra),
        env=launchd.env,
    )
    assert run.rc == 0, run.output
    return run


def changed_tasks(run) -> list[str]:
    return [name for name, res in run.results.items() if res.get("changed")]


def test_plist_is_valid_and_complete(tmp_path, launchd, agents):
    apply(tmp_path, launchd, agents)
    path = tmp_path / "LaunchDaemons" / f"{LABEL}.1.plist"
    with path.open("rb") as fh:
        plist = plistlib.load(fh)
    assert plist["Label"] == f"{LABEL}.1"
    assert plist["ProgramArguments"] == [
        f"{tmp_path}/opt/current/bin/workflow-agent",
        "run",
        "--config",
        f"{tmp_path}/etc/1.yaml",
    ]
    assert plist["UserName"] == pwd.getpwuid(os.geteuid()).pw_name
    assert plist["GroupName"] == grp.getgrgid(os.getegid()).gr_name
    assert plist["KeepAlive"] is True
    assert plist["RunAtLoad"] is True
    assert plist["ExitTimeOut"] == STOP_TIMEOUT
    assert plist["StandardOutPath"] == plist["StandardErrorPath"] == f"{tmp_path}/log/1.log"
    assert plist["WorkingDirectory"] == f"{tmp_path}/var/1"
    env = plist["EnvironmentVariables"]
    assert env["WORKFLOW_AGENT_INSTANCE"] == "1"
    assert env["HTTPS_PROXY"] == env["https_proxy"] == "http://proxy.invalid:3128"
    # The environment may hold proxy credentials: root-only, like launchd wants its daemons.
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.stat().st_uid == 0


def test_load_once_then_idempotent(tmp_path, launchd, agents):
    apply(tmp_path, launchd, agents)
    plists = tmp_path / "LaunchDaemons"
    assert launchd.calls() == [
        f"bootstrap system {plists}/{LABEL}.1.plist",
        f"bootstrap system {plists}/{LABEL}.2.plist",
    ]
    assert {k: v["loaded"] for k, v in launchd.jobs().items()} == {
        f"{LABEL}.1": True,
        f"{LABEL}.2": True,
    }

    again = apply(tmp_path, launchd, agents)
    assert launchd.calls() == []
    assert changed_tasks(again) == []


def test_changed_plist_is_reloaded(tmp_path, launchd, agents):
    apply(tmp_path, launchd, agents)
    launchd.calls()
    apply(tmp_path, launchd, agents, _workflow_agent_stop_timeout=STOP_TIMEOUT + 60)
    plists = tmp_path / "LaunchDaemons"
    assert launchd.calls() == [
        f"bootout system/{LABEL}.1",
        f"bootstrap system {plists}/{LABEL}.1.plist",
        f"bootout system/{LABEL}.2",
        f"bootstrap system {plists}/{LABEL}.2.plist",
    ]


def test_disabled_job_is_enabled_before_bootstrap_and_disable_is_kept(tmp_path, launchd, agents):
    launchd.state_file.write_text(
        json.dumps({f"{LABEL}.1": {"loaded": False, "disabled": True, "starts": 0}})
    )
    apply(tmp_path, launchd, agents)
    plists = tmp_path / "LaunchDaemons"
    assert launchd.calls() == [
        f"enable system/{LABEL}.1",
        f"bootstrap system {plists}/{LABEL}.1.plist",
        f"bootstrap system {plists}/{LABEL}.2.plist",
    ]
    apply(tmp_path, launchd, agents, workflow_agent_service_enabled=False)
    assert launchd.calls() == [f"disable system/{LABEL}.1", f"disable system/{LABEL}.2"]


def test_stopped_means_booted_out(tmp_path, launchd, agents):
    apply(tmp_path, launchd, agents)
    launchd.calls()
    apply(tmp_path, launchd, agents, workflow_agent_service_state="stopped")
    assert launchd.calls() == [f"bootout system/{LABEL}.1", f"bootout system/{LABEL}.2"]
    assert not any(v["loaded"] for v in launchd.jobs().values())


def test_restart_kickstarts_one_at_a_time_and_checks_health(tmp_path, launchd, agents):
    apply(tmp_path, launchd, agents)
    launchd.calls()
    restart = [
        {
            "name": "restart",
            "ansible.builtin.include_role": {
                "name": "selfhosted.workflow_agent.agent",
                "tasks_from": "restart_one_launchd",
            },
            "vars": {"_workflow_agent_instance": "{{ item }}"},
            "loop": "{{ _workflow_agent_plan.present }}",
        }
    ]
    run = run_play(
        tmp_path / "play", restart, variables=role_vars(tmp_path, launchd, agents), env=launchd.env
    )
    assert run.rc == 0, run.output
    assert launchd.calls() == [f"kickstart -k system/{LABEL}.1", f"kickstart -k system/{LABEL}.2"]
    # Each restart is followed by its own health check (of the right instance) before the next.
    steps = [
        (name.split(" : ", 1)[1], res)
        for name, res in run.results.items()
        if " : Restart " in name or " : Wait for /healthz" in name
    ]
    assert [name for name, _ in steps] == [
        f"Restart {LABEL}.1",
        "Wait for /healthz of 1",
        f"Restart {LABEL}.2",
        "Wait for /healthz of 2",
    ]
    assert [res["instances"][0]["instance"] for name, res in steps if "healthz" in name] == [
        "1",
        "2",
    ]
    assert all(res["healthy"] for name, res in steps if "healthz" in name)


def test_removed_instance_is_booted_out_and_its_files_go(tmp_path, launchd, agents):
    apply(tmp_path, launchd, agents)
    launchd.calls()
    for sub in ("etc", "var/2", "log"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    (tmp_path / "etc" / "2.yaml").write_text("token: x\n")
    (tmp_path / "log" / "2.log").write_text("")
    remove = [include("remove_launchd", "remove")]
    run = run_play(
        tmp_path / "play",
        remove,
        variables=role_vars(tmp_path, launchd, agents, remove=["2"]),
        env=launchd.env,
    )
    assert run.rc == 0, run.output
    assert launchd.calls() == [f"bootout system/{LABEL}.2"]
    assert launchd.jobs()[f"{LABEL}.1"]["loaded"] and not launchd.jobs()[f"{LABEL}.2"]["loaded"]
    for gone in (f"LaunchDaemons/{LABEL}.2.plist", "etc/2.yaml", "var/2", "log/2.log"):
        assert not (tmp_path / gone).exists(), gone
    assert (tmp_path / "LaunchDaemons" / f"{LABEL}.1.plist").exists()


def test_fake_launchctl_refuses_a_disabled_bootstrap(tmp_path, launchd):
    """The mock fails like launchctl does, so the role's enable-before-bootstrap is needed."""
    launchd.state_file.write_text(
        json.dumps({f"{LABEL}.1": {"loaded": False, "disabled": True, "starts": 0}})
    )
    plist = tmp_path / "x.plist"
    plist.write_bytes(plistlib.dumps({"Label": f"{LABEL}.1"}))
    proc = subprocess.run(
        [str(launchd.exe), "bootstrap", "system", str(plist)],
        env={**os.environ, **launchd.env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 5, proc.stderr
