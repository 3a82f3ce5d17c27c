"""The agent role's plan for one host (module_utils/agent_plan.py): what the look asks and what
must change, as tables of cases. The role acts on this plan only; Molecule runs it on real
hosts (Debian 12 and 13), tests/system/test_role_launchd.py on a mocked launchctl."""

from __future__ import annotations

import hashlib
import json

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_plan import (
    INPUTS,
    REMOVED_PIP_INDEX,
    plan,
    request,
    settings,
)

DEBIAN = {"os_family": "Debian", "supported": True}
MACOS = {"os_family": "Darwin", "supported": True}
INPUT = {
    "state": "present",
    "service_state": "started",
    "service_enabled": True,
    "user": "wfa",
    "group": "wfa",
    "config_dir": "/etc/wfa",
    "data_dir": "/var/lib/wfa",
    "install_dir": "/opt/wfa",
    "log_dir": "/var/log/wfa",
    "ca_bundle": "",
    "instances": ["1", "b"],
    "http_port_base": 8080,
    "config": {},
    "version": "0.2.0",
    "job_user": "wfa-job",
    "launchd_label": "com.example.wfa",
    "python": "",
    "pip_index_url": "",
}


def inputs(**over):
    return dict(INPUT, **over)


def test_the_inputs_are_the_plans_variables():
    assert set(INPUT) == set(INPUTS)


def by_path(paths):
    return {p["path"]: p for p in paths}


def test_systemd_paths_owners_and_modes_declared_once():
    s = settings(inputs(ca_bundle="PEM\n"), DEBIAN, env_sha1="e" * 40)
    paths = by_path(s["paths"])
    assert list(paths) == [
        "/etc/wfa",
        "/var/lib/wfa",
        "/var/lib/wfa/1",
        "/var/lib/wfa/1/shared",
        "/var/lib/wfa/b",
        "/var/lib/wfa/b/shared",
        "/etc/wfa/ca-bundle.pem",
        "/etc/wfa/environment",
    ]
    assert paths["/etc/wfa"] == {
        "path": "/etc/wfa",
        "state": "directory",
        "owner": "root",
        "group": "wfa",
        "mode": "0750",
    }
    # The job user reaches its work/ through the data directories: x only.
    assert {paths[p]["mode"] for p in list(paths)[1:6]} == {"0711"}
    ca = paths["/etc/wfa/ca-bundle.pem"]
    assert ca["sha1"] == hashlib.sha1(b"PEM\n").hexdigest()  # noqa: S324
    assert (ca["owner"], ca["group"], ca["mode"], ca["content"]) == (
        "root",
        "root",
        "0644",
        "ca_bundle",
    )
    assert "PEM" not in str(s)  # contents never go out, only their hash
    env = paths["/etc/wfa/environment"]
    assert (env["mode"], env["sha1"], env["content"]) == ("0640", "e" * 40, "environment")
    assert s["config_file"] == {"owner": "root", "group": "wfa", "mode": "0640"}
    assert s["unit_file"] == {
        "path": "/etc/systemd/system/workflow-agent@.service",
        "owner": "root",
        "group": "root",
        "mode": "0644",
    }
    assert s["job_home"] == {
        "path": "/var/lib/wfa/job-home",
        "state": "directory",
        "owner": "wfa-job",
        "group": "wfa-job",
        "mode": "0700",
    }
    assert s["pythons"] == ["/usr/bin/python3"]
    assert s["venv"] == "/opt/wfa/0.2.0"


def test_launchd_has_no_job_user_a_log_directory_and_its_own_root_group():
    s = settings(inputs(), MACOS)
    paths = by_path(s["paths"])
    assert "/var/log/wfa" in paths and paths["/var/lib/wfa"]["mode"] == "0750"
    assert paths["/etc/wfa/ca-bundle.pem"] == {"path": "/etc/wfa/ca-bundle.pem", "state": "absent"}
    assert "/etc/wfa/environment" not in paths
    assert (s["job_user"], s["job_user_spec"]) == ("", None)
    assert (s["service_manager"], s["root_group"], s["plist_file"]["group"]) == (
        "launchd",
        "wheel",
        "wheel",
    )
    assert s["pythons"][0].startswith("/Library/Frameworks/")
    assert settings(inputs(python="/opt/py/bin/python3"), MACOS)["pythons"] == [
        "/opt/py/bin/python3"
    ]


def test_an_unsupported_platform_has_no_service_manager():
    s = settings(inputs(), {"os_family": "RedHat", "supported": False})
    assert (s["service_manager"], s["pythons"]) == ("none", [])


@pytest.mark.parametrize(
    ("over", "check_mode", "wanted"),
    [
        ({}, False, True),
        ({}, True, False),  # check mode starts nothing to ask
        ({"service_state": "stopped"}, False, False),
        ({"instances": 0}, False, False),
    ],
)
def test_health_is_wanted_of_started_instances_outside_check_mode(over, check_mode, wanted):
    s = settings(dict(inputs(**over), check_mode=check_mode), DEBIAN)
    assert s["health_wanted"] is wanted
    assert request(inputs(**over), s)["health"] == ([8080, 8081] if wanted else [])


def test_bad_instances_and_the_removed_pip_index_are_problems():
    s = settings(inputs(instances=["a", "a"], pip_index_url="https://pypi.example/simple"), DEBIAN)
    assert REMOVED_PIP_INDEX in s["problems"]
    assert len(s["problems"]) == 2


def test_state_absent_asks_for_discovery_only():
    for platform, lists, systemd in (
        (DEBIAN, [], {"systemd": {"pattern": "workflow-agent@*", "units": []}}),
        (MACOS, ["/Library/LaunchDaemons"], {}),
    ):
        s = settings(inputs(state="absent"), platform)
        assert request(inputs(state="absent"), s) == dict(
            {"lists": ["/etc/wfa", "/opt/wfa", "/opt/wfa/wheelhouse"] + lists}, **systemd
        )


def test_state_present_on_systemd_asks_for_everything_the_plan_compares():
    s = settings(inputs(service_state="stopped"), DEBIAN)
    got = request(inputs(service_state="stopped"), s)
    assert got["paths"][-2] == {
        "path": "/opt/wfa/current",
        "state": "link",
        "src": "/opt/wfa/0.2.0",
    }
    assert got["paths"][-1]["path"] == "/var/lib/wfa/job-home"
    assert all("content" not in p for p in got["paths"])  # the host is asked only what it checks
    assert [u["name"] for u in got["users"]] == ["wfa", "wfa-job"]
    assert got["groups"] == ["docker"]
    assert got["reads"] == ["/opt/wfa/0.2.0/.wheelhouse"]
    assert got["files"] == [
        "/etc/systemd/system/workflow-agent@.service",
        "/etc/wfa/1.yaml",
        "/etc/wfa/b.yaml",
    ]
    assert got["systemd"]["units"] == [
        {"name": "workflow-agent@1.service", "started": False, "enabled": True},
        {"name": "workflow-agent@b.service", "started": False, "enabled": True},
    ]


def test_state_present_on_launchd():
    got = request(inputs(), settings(inputs(), MACOS))
    assert "systemd" not in got
    assert got["groups"] == []
    assert got["files"] == ["/etc/wfa/1.yaml", "/etc/wfa/b.yaml"]
    assert [u["name"] for u in got["users"]] == ["wfa"]


HEALTHY = [{"healthy": True, "instance": "1"}, {"healthy": True, "instance": "b"}]


# What the look found -> what the plan says must change.
@pytest.mark.parametrize(
    ("name", "over", "found", "want"),
    [
        (
            "a fresh host: the base, the job user, nothing to remove",
            {},
            {
                "paths_differ": ["/etc/wfa", "/opt/wfa/current", "/var/lib/wfa/job-home"],
                "users_differ": ["wfa", "wfa-job"],
            },
            {
                "base_todo": True,
                "job_user_todo": True,
                "remove": [],
                "existing": [],
                "seen_healthy": False,
            },
        ),
        (
            "all as wanted and healthy: nothing",
            {},
            {"lists": {"/etc/wfa": ["1.yaml", "b.yaml"]}, "health": HEALTHY},
            {"base_todo": False, "job_user_todo": False, "remove": [], "seen_healthy": True},
        ),
        (
            # Only the install's link differs: that is the install's, not the base's (the
            # _base_todo back-and-forth of an earlier round).
            "only `current` differs: not the base",
            {},
            {"paths_differ": ["/opt/wfa/current"]},
            {"base_todo": False, "job_user_todo": False},
        ),
        (
            "only the job user's home differs: the job user, not the base",
            {},
            {"paths_differ": ["/var/lib/wfa/job-home"]},
            {"base_todo": False, "job_user_todo": True},
        ),
        (
            "the job user differs but there is none on launchd",
            {"platform": MACOS},
            {"users_differ": ["wfa-job"]},
            {"base_todo": False, "job_user_todo": False},
        ),
        (
            "the agent's user differs: the base",
            {},
            {"users_differ": ["wfa"]},
            {"base_todo": True},
        ),
        (
            "an instance no longer wanted, found by config, unit and plist",
            {},
            {
                "lists": {"/etc/wfa": ["1.yaml", "c.yaml", "notes.txt"]},
                "systemd": {"listed": ["workflow-agent@d.service", "other@x.service"]},
            },
            {"configured": ["1", "c"], "existing": ["1", "c", "d"], "remove": ["c", "d"]},
        ),
        (
            "launchd plists name instances too",
            {"platform": MACOS},
            {"lists": {"/Library/LaunchDaemons": ["com.example.wfa.z.plist", "com.other.plist"]}},
            {"existing": ["z"], "remove": ["z"]},
        ),
        (
            "uninstall removes every instance",
            {"state": "absent"},
            {"lists": {"/etc/wfa": ["1.yaml"]}},
            {"remove": ["1"]},
        ),
        (
            "an instance answering with another's name is not seen healthy",
            {},
            {"health": [{"healthy": True, "instance": "b"}, {"healthy": True, "instance": "1"}]},
            {"seen_healthy": False},
        ),
        (
            "one unhealthy instance",
            {},
            {"health": [{"healthy": True, "instance": "1"}, {"healthy": False, "instance": None}]},
            {"seen_healthy": False},
        ),
    ],
)
def test_what_must_change(name, over, found, want):
    platform = over.pop("platform", DEBIAN)
    got = plan(inputs(**over), platform, found)
    assert {key: got[key] for key in want} == want, name


# Which instances the restart handlers ask about: on systemd only those whose unit systemd had
# loaded at the look (a running unit always is).
@pytest.mark.parametrize(
    ("name", "platform", "found", "want"),
    [
        ("a fresh host: none (the state tasks start them)", DEBIAN, {}, []),
        (
            "one instance's unit loaded, another's not yet",
            DEBIAN,
            {"systemd": {"listed": ["workflow-agent@b.service", "other@1.service"]}},
            ["b"],
        ),
        (
            "both loaded",
            DEBIAN,
            {"systemd": {"listed": ["workflow-agent@1.service", "workflow-agent@b.service"]}},
            ["1", "b"],
        ),
        ("launchd: all, its restart tasks check each", MACOS, {}, ["1", "b"]),
    ],
)
def test_restartable_instances(name, platform, found, want):
    got = plan(inputs(), platform, found)
    assert [i["name"] for i in got["restartable"]] == want, name


def test_paths_todo_are_the_differing_base_paths_with_their_owner_and_mode():
    got = plan(inputs(), DEBIAN, {"paths_differ": ["/var/lib/wfa/b", "/opt/wfa/current"]})
    assert got["paths_todo"] == [
        {
            "path": "/var/lib/wfa/b",
            "state": "directory",
            "owner": "wfa",
            "group": "wfa",
            "mode": "0711",
        }
    ]


def test_no_look_means_nothing_found():
    got = plan(inputs(), DEBIAN, {})
    assert (got["existing"], got["remove"], got["base_todo"]) == ([], [], False)


ARGS = ["--source", "/src", "--version", "0.2.0"]
MANIFEST = {"key": "k2", "dir": "/cache/k2", "archive": "k2.tar.gz", "archive_sha256": "a"}
UNIT_OK = {
    "isreg": True,
    "pw_name": "root",
    "gr_name": "root",
    "mode": "0644",
    "checksum": "u1",
}
AS_WANTED = {
    "lists": {"/etc/wfa": ["1.yaml", "b.yaml"], "/opt/wfa": ["0.2.0", "current", "wheelhouse"]},
    "reads": {"/opt/wfa/0.2.0/.wheelhouse": "k2"},
    "files": {"/etc/systemd/system/workflow-agent@.service": UNIT_OK},
    "groups": {"docker": ["wfa"]},
    "health": HEALTHY,
    "systemd": {"differ": []},
}


def after(**over):
    base = {
        "configs_changed": False,
        "deploy_targets": ["process"],
        "build_args": ARGS,
        "builds": [{"item": ARGS, "stdout": json.dumps(MANIFEST)}],
        "built_before": [],
        "unit_sha1": "u1",
        "upstream": [],
    }
    return dict(base, **over)


def converge_of(found, over=None, platform=None, **after_over):
    return plan(inputs(**(over or {})), platform or DEBIAN, found, after=after(**after_over))[
        "converge"
    ]


# What the look found and what the run did -> what the converge steps do.
@pytest.mark.parametrize(
    ("name", "found", "over", "after_over", "want"),
    [
        (
            "all as wanted: nothing at all",
            AS_WANTED,
            {},
            {},
            {"todo": [], "unused": [], "switch": [], "health_check": False, "todo_any": False},
        ),
        (
            "a config written: the health check",
            AS_WANTED,
            {},
            {"configs_changed": True},
            {"todo": [], "health_check": True, "todo_any": True},
        ),
        (
            "another version installed: install, and the old one unused",
            dict(
                AS_WANTED,
                reads={"/opt/wfa/0.2.0/.wheelhouse": None},
                lists={
                    "/opt/wfa": ["0.1.0", "current", "wheelhouse"],
                    "/opt/wfa/wheelhouse": ["k1", "k1.tar", "k2.tar.gz"],
                },
                paths_differ=["/opt/wfa/current"],
            ),
            {},
            {},
            {
                "todo": ["install", "current"],
                "install": {
                    "archive": "/opt/wfa/wheelhouse/k2.tar.gz",
                    "sha256": "a",
                    "venv": "/opt/wfa/0.2.0",
                    "key": "k2",
                },
                # An unpacked wheelhouse and its archive: the layout before environments.
                "unused": [
                    "/opt/wfa/0.1.0",
                    "/opt/wfa/wheelhouse/k1",
                    "/opt/wfa/wheelhouse/k1.tar",
                ],
                "health_check": True,
            },
        ),
        (
            "this version from another build: installed again; its old archive and a partial "
            "install of a stopped run unused",
            dict(
                AS_WANTED,
                reads={"/opt/wfa/0.2.0/.wheelhouse": "k1"},
                lists={
                    "/opt/wfa": ["0.2.0", "0.2.0.partial", "current", "wheelhouse"],
                    "/opt/wfa/wheelhouse": ["k1.tar.gz", "k2.tar.gz"],
                },
            ),
            {},
            {},
            {
                "todo": ["install"],
                "unused": ["/opt/wfa/0.2.0.partial", "/opt/wfa/wheelhouse/k1.tar.gz"],
                "todo_any": True,
            },
        ),
        (
            "installed from this build: nothing to install",
            dict(AS_WANTED, lists={"/opt/wfa/wheelhouse": ["k2.tar.gz"]}),
            {},
            {},
            {"todo": [], "install": None, "unused": []},
        ),
        (
            "no wheelhouse (--skip-tags workflow_agent_install): no install compared or removed",
            dict(AS_WANTED, reads={}, lists={"/opt/wfa": ["0.1.0"]}),
            {},
            {"builds": []},
            {"todo": [], "unused": [], "install_key": None, "wheelhouse": None},
        ),
        (
            "an earlier batch's wheelhouse is reused",
            AS_WANTED,
            {},
            {"builds": [], "built_before": [dict(MANIFEST, build_args=ARGS)]},
            {"todo": [], "install_key": "k2"},
        ),
        (
            "the unit's content differs",
            AS_WANTED,
            {},
            {"unit_sha1": "u2"},
            {"todo": ["unit"], "health_check": True},
        ),
        (
            "the unit's mode differs",
            dict(
                AS_WANTED,
                files={"/etc/systemd/system/workflow-agent@.service": dict(UNIT_OK, mode="0666")},
            ),
            {},
            {},
            {"todo": ["unit"]},
        ),
        (
            "docker jobs and the agent not in the docker group",
            dict(AS_WANTED, groups={"docker": []}),
            {},
            {"deploy_targets": ["docker", "process"]},
            {"todo": ["docker"]},
        ),
        (
            "a unit stopped that should run: converge, but no health check before it starts",
            dict(AS_WANTED, systemd={"differ": ["workflow-agent@1.service"]}),
            {},
            {},
            {"todo": [], "health_check": False, "todo_any": True},
        ),
        (
            "an instance unhealthy in the look: the health check",
            dict(AS_WANTED, health=HEALTHY[:1] + [{"healthy": False, "instance": None}]),
            {},
            {},
            {"health_check": True, "todo_any": True},
        ),
        (
            "check mode asks for no health",
            AS_WANTED,
            {"check_mode": True},
            {"configs_changed": True},
            {"health_check": False, "todo_any": True},
        ),
        (
            "upstream's running units, then its enabled ones, are switched",
            AS_WANTED,
            {},
            {
                "upstream": [
                    {"unit": "a", "active": False, "enabled": True},
                    {"unit": "b", "active": True, "enabled": True},
                    {"unit": "c", "active": False, "enabled": False},
                ]
            },
            {
                "switch": [
                    {"unit": "b", "active": True, "enabled": True},
                    {"unit": "a", "active": False, "enabled": True},
                ],
                "todo_any": True,
            },
        ),
        (
            "nothing switches to stopped instances",
            AS_WANTED,
            {"service_state": "stopped"},
            {"upstream": [{"unit": "b", "active": True, "enabled": True}]},
            {"switch": []},
        ),
    ],
)
def test_what_changes_after_the_configs(name, found, over, after_over, want):
    got = converge_of(found, over, **after_over)
    assert {key: got[key] for key in want} == want, name


def test_launchd_always_rewrites_through_its_template_tasks():
    got = converge_of(dict(AS_WANTED, health=HEALTHY), platform=MACOS)
    assert got["todo"] == ["launchd"]
    assert got["todo_any"]  # launchd: a restart is always assumed


def test_the_archive_on_the_host_is_named_by_its_key():
    got = converge_of(AS_WANTED)
    assert got["wheelhouse"]["host_archive"] == "/opt/wfa/wheelhouse/k2.tar.gz"
    assert got["wheelhouse"]["build_args"] == ARGS


def test_each_instances_files_are_named_once():
    s = settings(inputs(), MACOS)
    assert s["present"][0] == {
        "name": "1",
        "port": 8080,
        "config_path": "/etc/wfa/1.yaml",
        "data_path": "/var/lib/wfa/1",
        "shared_path": "/var/lib/wfa/1/shared",
        "plist_path": "/Library/LaunchDaemons/com.example.wfa.1.plist",
        "log_path": "/var/log/wfa/1.log",
    }
    assert "plist_path" not in settings(inputs(), DEBIAN)["present"][0]


@pytest.mark.parametrize(
    ("platform", "want"),
    [
        (DEBIAN, ["/etc/wfa/c.yaml", "/var/lib/wfa/c"]),
        (
            MACOS,
            [
                "/etc/wfa/c.yaml",
                "/var/lib/wfa/c",
                "/var/log/wfa/c.log",
                "/Library/LaunchDaemons/com.example.wfa.c.plist",
            ],
        ),
    ],
)
def test_a_removed_instance_leaves_no_file(platform, want):
    got = plan(inputs(), platform, {"lists": {"/etc/wfa": ["1.yaml", "c.yaml"]}})
    assert got["remove"] == ["c"]
    assert got["remove_paths"] == want


def test_an_instances_config_stays_out_of_the_plan():
    # The plan is the look's result, which -v prints; a per-instance token must not be in it.
    got = settings(
        inputs(instances=["a", {"name": "b", "config": {"token": "pul-secret"}}]), DEBIAN
    )
    assert "pul-secret" not in json.dumps(got)
    assert [(i["name"], i["config_index"]) for i in got["instances"]] == [("a", None), ("b", 1)]
