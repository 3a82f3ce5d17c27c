"""agent_host_info through real ansible-playbook on this host: real files, the real users and
groups, candidate interpreters that exist or not, and a real agent process (against the real
emulator) answering the health look."""

from __future__ import annotations

import grp
import hashlib
import os
import sys
from pathlib import Path

from agent_harness import WAIT, wait_for
from test_plugins_common import run_play

MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def look_task(**options):
    return {"name": "look", "selfhosted.workflow_agent.agent_host_info": options}


def test_first_usable_python_reports_what_the_host_has_and_what_differs(emu, make_agent, tmp_path):
    agent = make_agent("a", slots=2).start()
    wait_for(lambda: agent.get("/healthz")[0] == 200, WAIT, "agent a healthy")
    site = tmp_path / "site"
    (site / "conf").mkdir(parents=True)
    (site / "conf").chmod(0o755)
    (site / "conf" / "a.yaml").write_text("slots: 2\n")
    wanted = hashlib.sha1(b"slots: 2\n").hexdigest()  # noqa: S324 - what the module compares
    options = {
        "pythons": ["/nonexistent/python3", sys.executable],
        "lists": [str(site / "conf"), str(site / "missing")],
        "files": [str(site / "conf" / "a.yaml")],
        "reads": [str(site / "conf" / "a.yaml")],
        "paths": [
            {"path": str(site / "conf"), "state": "directory", "mode": "0750"},
            {"path": str(site / "conf" / "a.yaml"), "state": "file", "sha1": wanted},
            {"path": str(site / "current"), "state": "link", "src": str(site / "conf")},
        ],
        "groups": [MY_GROUP, "no-such-group-here"],
        "users": [
            {
                "name": "no-such-user-here",
                "group": MY_GROUP,
                "shell": "/bin/sh",
                "home": str(site),
                "comment": "nobody",
            }
        ],
        "health": [agent.port],
    }
    for check in (False, True):  # it only looks: check mode reports the same
        run = run_play(tmp_path / f"check-{check}", [look_task(**options)], check=check)
        assert run.rc == 0, run.output
        res = run["look"]
        assert res["changed"] is False and res["problems"] == []
        missing, used = res["tried"]
        assert (missing["path"], missing["ran"], missing["ok"]) == (
            "/nonexistent/python3",
            False,
            False,
        )
        assert "not found" in missing["error"] or "No such file" in missing["error"]
        assert (used["ran"], used["ok"], used["error"]) == (True, True, None)
        assert res["host"]["executable"] == os.path.abspath(sys.executable)
        assert res["host"]["python"] == "{}.{}".format(*sys.version_info[:2])
        state = res["state"]
        assert state["lists"] == {str(site / "conf"): ["a.yaml"], str(site / "missing"): []}
        assert state["files"][str(site / "conf" / "a.yaml")]["checksum"] == wanted
        assert state["reads"] == {str(site / "conf" / "a.yaml"): "slots: 2\n"}
        assert state["paths_differ"] == [str(site / "conf"), str(site / "current")]
        assert state["groups"]["no-such-group-here"] is None and MY_GROUP in state["groups"]
        assert state["users_differ"] == ["no-such-user-here"]
        (health,) = state["health"]
        assert (health["healthy"], health["instance"], health["slots"]) == (True, "a", 2)


def test_no_candidate_that_runs_is_a_problem_not_a_failure(tmp_path):
    run = run_play(tmp_path, [look_task(pythons=["/nonexistent/python3"], lists=[str(tmp_path)])])
    assert run.rc == 0, run.output
    res = run["look"]
    assert res["host"] == {} and res["state"] == {}
    (problem,) = res["problems"]
    assert problem.startswith("None of /nonexistent/python3 runs on this host (")
    assert problem.endswith("install Python 3.10 or later or set workflow_agent_python")


def test_bad_arguments_name_the_option(tmp_path):
    run = run_play(
        tmp_path,
        [look_task(pythons=[sys.executable], paths=[{"path": "/x", "state": "folder"}])],
    )
    assert run.rc != 0
    msg = run["look"]["msg"]
    assert "state" in msg and "paths" in msg and "folder" in msg, msg
    assert "Traceback" not in run.output


def test_platform_alone_needs_no_python_and_describes_this_host(tmp_path):
    run = run_play(tmp_path, [look_task(platform=True)])
    assert run.rc == 0, run.output
    platform = run["look"]["platform"]
    lines = Path("/etc/os-release").read_text().splitlines()
    release = dict(line.split("=", 1) for line in lines if "=" in line)
    assert platform["id"] == release["ID"].strip('"')
    assert platform["cpus"] == len(os.sched_getaffinity(0))
    assert platform["memory_mb"] > 0
    assert run["look"]["tried"] == []  # no interpreter was run


def test_the_roles_plan_names_what_it_misses(tmp_path):
    run = run_play(tmp_path, [{**look_task(role={"state": "present"}), "ignore_errors": True}])
    res = run["look"]
    assert res["failed"] and res["msg"].startswith("role: missing service_state, service_enabled")
    assert "Traceback" not in run.output
